"""Seconds per trial of every available strategy (run by hand, not in CI).

    uv run python benchmarks/strategies.py [--protocol lu2023] [--dataset sonar] [--trials 3]

Runs the first trials of each strategy in one process through the real runner and
prints the mean wall time per trial, split into task-model fitting and querying.
lu2023 (Appendix C) published its computational times only on GitHub, not in the
paper; without a transcribable published table, the task-model share printed here
is the baseline the strategies are measured against.
"""
from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np

from audit.engine.capabilities import CANONICAL_STRATEGIES, capability
from audit.engine.datasets import load_dataset
from audit.engine.runner import run_trial
from audit.engine.splits import plan_seeds
from audit.protocols import load_protocol


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--protocol", default="lu2023")
    parser.add_argument("--dataset", default="sonar")
    parser.add_argument("--trials", type=int, default=3)
    args = parser.parse_args()

    protocol = load_protocol(args.protocol)
    data = load_dataset(args.dataset)
    seeds, _ = plan_seeds(protocol, data.y, args.trials)
    rank = {s: i for i, s in enumerate(CANONICAL_STRATEGIES)}
    print(f"{args.protocol} on {args.dataset} (n={data.info.n}), {len(seeds)} trials each, one process; "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"{'strategy':10s} {'implementation':22s} {'s/trial':>8s} {'fit s':>7s} {'query s':>8s}  status")
    for sid in sorted(protocol.strategies, key=lambda s: rank.get(s, len(rank))):
        implementation = protocol.strategies[sid].implementation
        status = capability(protocol, sid).status
        if status != "available":
            print(f"{sid:10s} {implementation:22s} {'-':>8s} {'-':>7s} {'-':>8s}  {status[:70]}")
            continue
        start = time.perf_counter()
        results = [run_trial(protocol, data.info.name, data.X, data.y, sid, s) for s in seeds]
        wall = (time.perf_counter() - start) / len(seeds)
        ok = [r for r in results if r.status == "ok"]
        fit = np.mean([sum(x.fit_seconds for x in r.rounds) for r in ok]) if ok else float("nan")
        query = np.mean([sum(x.query_seconds for x in r.rounds) for r in ok]) if ok else float("nan")
        status = "ok" if len(ok) == len(results) else f"{len(results) - len(ok)} failed: {results[0].error}"
        print(f"{sid:10s} {implementation:22s} {wall:8.2f} {fit:7.2f} {query:8.2f}  {status}")


if __name__ == "__main__":
    main()
