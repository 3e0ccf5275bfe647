"""Beam-search oracle speed: naive vs optimised, one trial (run by hand, not in CI).

    uv run python benchmarks/oracle.py [--dataset sonar] [--protocol lu2023] [--no-memory]

Times one trial (the first trial seed, budget = the whole pool) three ways and checks
that they choose the same query sequence:
- naive: tests/oracle_reference.py, every candidate of every beam fitted through
  scikit-learn, nothing cached or parallel;
- bso --jobs 1: audit/oracles.py in this process;
- bso --jobs 2: the same with two worker processes, started beforehand (their one-off
  start-up, mostly importing scikit-learn, is printed separately: a replay pays it once).
Targets (issue 4): --jobs 1 at least 2x faster than naive, --jobs 2 at least 1.7x faster
than --jobs 1. lu2023 reports 52 s per sonar BSO trial (Intel Xeon E5-2640 v3, 2.6 GHz).
Then, unless --no-memory, the peak memory (max RSS of a fresh process) of bso --jobs 1
over its first two rounds on phishing (n = 11055; 5 beams x 6612 candidates in round 2).
Wall times on a shared machine move with its load: the load average is printed with them.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # tests.oracle_reference: the naive implementation the tests keep

from audit.datasets import load_dataset  # noqa: E402
from audit.protocols import load_protocol  # noqa: E402
from audit.runner import run_trial  # noqa: E402
from audit.splits import make_split, plan_seeds  # noqa: E402
from tests.oracle_reference import naive_beam_search  # noqa: E402

LU2023_SONAR_SECONDS = 52.0


def timed(function, *args, **kwargs):
    wall, cpu = time.perf_counter(), time.process_time()
    value = function(*args, **kwargs)
    return value, time.perf_counter() - wall, time.process_time() - cpu


def load() -> str:
    return "load average " + " ".join(f"{v:.1f}" for v in os.getloadavg())


def speed(protocol_name: str, dataset: str) -> None:
    protocol = load_protocol(protocol_name)
    data = load_dataset(dataset)
    seed = plan_seeds(protocol, data.y, 1)[0][0]
    train = make_split(protocol, data.y, seed).train
    print(f"{protocol_name} on {dataset} (n={data.info.n}), trial seed {seed}, beam width "
          f"{protocol.strategy('bso').params['beam_width']}; {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, Python {platform.python_version()}; {load()}")

    positions, naive_wall, naive_cpu = timed(naive_beam_search, protocol, data.X, data.y, seed)
    naive = tuple(int(train[p]) for p in positions)
    print(f"naive beam search     {naive_wall:7.1f} s wall {naive_cpu:7.1f} s cpu   ({load()})")

    one, one_wall, one_cpu = timed(run_trial, protocol, dataset, data.X, data.y, "bso", seed, jobs=1)
    print(f"bso --jobs 1          {one_wall:7.1f} s wall {one_cpu:7.1f} s cpu   ({load()})")

    warm = dataclasses.replace(protocol, budget_size=1)
    _, start_wall, _ = timed(run_trial, warm, dataset, data.X, data.y, "bso", seed, jobs=2)
    two, two_wall, _ = timed(run_trial, protocol, dataset, data.X, data.y, "bso", seed, jobs=2)
    print(f"bso --jobs 2          {two_wall:7.1f} s wall                  ({load()}; worker start-up "
          f"{start_wall:.1f} s once)")

    sequences = {tuple(q for r in t.rounds for q in r.queried) for t in (one, two)}
    same = sequences == {naive}
    print(f"same sequence: {'yes' if same else 'NO'}; AUBC {one.aubc:.5f} ({protocol.aubc_variant})")
    print(f"--jobs 1 vs naive: {naive_wall / one_wall:.2f}x wall, {naive_cpu / one_cpu:.2f}x cpu (target >= 2x)")
    print(f"--jobs 2 vs --jobs 1: {one_wall / two_wall:.2f}x wall (target >= 1.7x)")
    print(f"lu2023: {LU2023_SONAR_SECONDS:.0f} s per sonar BSO trial (Xeon E5-2640 v3, 2.6 GHz); here: naive "
          f"{naive_wall:.1f} s, --jobs 1 {one_wall:.1f} s, --jobs 2 {two_wall:.1f} s")


def memory_child(protocol_name: str, rounds: int) -> None:
    protocol = dataclasses.replace(load_protocol(protocol_name), budget_size=rounds)
    data = load_dataset("phishing")
    seed = plan_seeds(protocol, data.y, 1)[0][0]
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result, wall, _ = timed(run_trial, protocol, "phishing", data.X, data.y, "bso", seed, jobs=1)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"phishing (n={data.info.n}), bso --jobs 1, {rounds} rounds: {result.status}, {wall:.0f} s; "
          f"peak RSS {peak / 2**20:.2f} GiB ({before / 2**20:.2f} GiB with libraries and data loaded)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--protocol", default="lu2023")
    parser.add_argument("--dataset", default="sonar")
    parser.add_argument("--no-memory", action="store_true")
    parser.add_argument("--memory-child", type=int, metavar="ROUNDS", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child:
        memory_child(args.protocol, args.memory_child)
        return
    speed(args.protocol, args.dataset)
    if not args.no_memory:
        subprocess.run([sys.executable, __file__, "--protocol", args.protocol, "--memory-child", "2"], check=True)


if __name__ == "__main__":
    main()
