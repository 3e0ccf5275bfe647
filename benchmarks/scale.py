"""Throughput of `audit run` per executor, and the driver's peak memory on a large set.

Run by hand (minutes, not a test):

    uv run python benchmarks/scale.py [--trials 20]        # throughput on sonar x uniform, us-c
    uv run python benchmarks/scale.py --memory phishing    # driver peak RSS over one long trial

Throughput: the same cells (lu2023, sonar, Uniform + US-C) run into a fresh store with
1 and 2 local workers and a 2-worker Dask LocalCluster; wall time includes starting the
workers, as a user sees it. The Dask overhead ratio is Dask wall / local wall at 2
workers (target <= 1.1). The machine's load average is printed: on a shared machine the
figures move with it.

Memory: one Uniform trial of the data set on a 1-worker Dask LocalCluster, so the trial
runs in another process and the driver's peak resident memory (getrusage of this
process) is what receiving, holding and storing the trial's rounds cost.
"""
from __future__ import annotations

import argparse
import os
import resource
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from audit.executors import DaskExecutor, Executor, LocalExecutor  # noqa: E402
from audit.run import RunRequest, run  # noqa: E402

STRATEGIES = ("uniform", "us-c")


def _timed(make: Callable[[], Executor], trials: int) -> tuple[float, int]:
    """(wall seconds, trials run) of the cells into a fresh store, the executor's start
    (a LocalCluster's, a pool's) included: part of what a user waits for."""
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        with make() as executor:
            outcome = run(RunRequest("lu2023", ["sonar"], list(STRATEGIES), trials=trials,
                                     store=Path(tmp) / "store.sqlite", progress=False), executor, log=lambda line: None)
        return time.perf_counter() - start, outcome.ran


def throughput(trials: int) -> None:
    print(f"lu2023 on sonar, {' + '.join(STRATEGIES)} x {trials} trials; load average before: "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())} on {os.cpu_count()} cores")
    walls = {}
    for label, make in (("local, 1 worker", lambda: LocalExecutor(1)),
                        ("local, 2 workers", lambda: LocalExecutor(2)),
                        ("dask LocalCluster, 2 workers", lambda: DaskExecutor(workers=2))):
        wall, ran = _timed(make, trials)
        walls[label] = wall
        print(f"{label:30s} {ran} trials in {wall:6.1f} s: {60 * ran / wall:6.1f} trials/min")
    ratio = walls["dask LocalCluster, 2 workers"] / walls["local, 2 workers"]
    print(f"dask / local wall at 2 workers: {ratio:.2f} (target <= 1.1); load average after: "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}")


def memory(dataset: str) -> None:
    with tempfile.TemporaryDirectory() as tmp, DaskExecutor(workers=1) as on_dask:
        store = Path(tmp) / "store.sqlite"
        start = time.perf_counter()
        run(RunRequest("lu2023", [dataset], ["uniform"], trials=1, store=store, progress=False), on_dask,
            log=lambda line: None)
        with sqlite3.connect(store) as db:
            rounds = db.execute("SELECT COUNT(*) FROM rounds").fetchone()[0]
            status = db.execute("SELECT status FROM trials").fetchone()[0]
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{dataset}: 1 uniform trial ({status}, {rounds} rounds stored) in {time.perf_counter() - start:.0f} s; "
          f"driver peak RSS {peak_mib:.0f} MiB (target < 1024)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20, help="trials per strategy (default %(default)s)")
    parser.add_argument("--memory", metavar="DATASET", help="measure the driver's peak memory on one trial instead")
    args = parser.parse_args()
    if args.memory:
        memory(args.memory)
    else:
        throughput(args.trials)


if __name__ == "__main__":
    main()
