"""Seconds per trial of every available strategy (run by hand, not in CI).

    uv run python benchmarks/strategies.py [--protocol lu2023] [--dataset sonar] [--trials 3]
        [--strategies margin,albl] [--off lean-grid-lr,lean-lr]

Runs the first trials of each strategy in one process through the real runner and
prints the mean wall and CPU (``time.process_time``) seconds per trial, the wall time
split into task-model fitting and querying. ``--off`` turns the named fast paths of
:mod:`audit.fast` off (those fits scikit-learn's own code), for before/after figures.
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
    parser.add_argument("--strategies", default="", help="comma-separated ids (default: every strategy)")
    parser.add_argument("--off", default="", help="comma-separated fast paths to turn off, e.g. lean-grid-lr")
    args = parser.parse_args()
    if args.off:
        from audit.fast.policy import FastPathMixin, fast_path_verified

        off = set(args.off.split(","))
        FastPathMixin._fast_path_verified = lambda self: self.fast_path_name not in off and fast_path_verified(type(self))

    protocol = load_protocol(args.protocol)
    data = load_dataset(args.dataset)
    seeds, _ = plan_seeds(protocol, data.y, args.trials)
    rank = {s: i for i, s in enumerate(CANONICAL_STRATEGIES)}
    print(f"{args.protocol} on {args.dataset} (n={data.info.n}), {len(seeds)} trials each, one process; "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"{'strategy':10s} {'implementation':22s} {'s/trial':>8s} {'cpu s':>7s} {'fit s':>7s} {'query s':>8s}  "
          f"status")
    chosen = [s for s in args.strategies.split(",") if s] or sorted(protocol.strategies,
                                                                   key=lambda s: rank.get(s, len(rank)))
    for sid in chosen:
        implementation = protocol.strategies[sid].implementation
        status = capability(protocol, sid).status
        if status != "available":
            print(f"{sid:10s} {implementation:22s} {'-':>8s} {'-':>7s} {'-':>7s} {'-':>8s}  {status[:70]}")
            continue
        start, cpu = time.perf_counter(), time.process_time()
        results = [run_trial(protocol, data.info.name, data.X, data.y, sid, s) for s in seeds]
        wall = (time.perf_counter() - start) / len(seeds)
        cpu = (time.process_time() - cpu) / len(seeds)
        ok = [r for r in results if r.status == "ok"]
        fit = np.mean([sum(x.fit_seconds for x in r.rounds) for r in ok]) if ok else float("nan")
        query = np.mean([sum(x.query_seconds for x in r.rounds) for r in ok]) if ok else float("nan")
        status = "ok" if len(ok) == len(results) else f"{len(results) - len(ok)} failed: {results[0].error}"
        paths = ",".join(sorted({r.fast_path or "-" for r in results}))
        print(f"{sid:10s} {implementation:22s} {wall:8.2f} {cpu:7.2f} {fit:7.2f} {query:8.2f}  {status} ({paths})")


if __name__ == "__main__":
    main()
