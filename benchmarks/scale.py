"""Throughput of `audit run` per executor, and the driver's peak memory on a large set.

Run by hand (minutes, not a test):

    uv run python benchmarks/scale.py [--trials 50]        # throughput on sonar x uniform, us-c
    uv run python benchmarks/scale.py --memory phishing    # driver peak RSS over one long trial

Throughput: the same cells (lu2023, sonar, Uniform + US-C) run into a fresh store with
1 and 2 local workers and a 2-worker Dask LocalCluster. Each executor's start-up (its
workers started and a first trial of each cell run, so every worker has imported the
replay code) is timed apart from the runs that follow: a one-off per run that decides
nothing at scale, where a Dask cluster is started once and used by address. The 2-worker
executors then take turns `--repeats` times (default 3), each into a fresh store, and
each keeps its fastest run: the VM's speed drifts within minutes. The Dask
overhead ratio is Dask wall / local wall at 2 workers with the workers ready (target
<= 1.1); the ratio with start-up is printed beside it. The machine's load average is
printed: on a shared machine the figures move with it.

Memory: one Uniform trial of the data set on a 1-worker Dask LocalCluster, so the trial
runs in another process and the driver's peak resident memory (getrusage of this
process) is what receiving, holding and storing the trial's rounds cost.
"""
from __future__ import annotations

import argparse
import os
import resource
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from audit.engine.benchmark import RunRequest, run  # noqa: E402
from audit.engine.executors import DaskExecutor, Executor, LocalExecutor  # noqa: E402

STRATEGIES = ("uniform", "us-c")


def _run(executor: Executor, strategies: list[str], trials: int, store: Path) -> int:
    outcome = run(RunRequest("lu2023", ["sonar"], strategies, trials=trials, store=store, progress=False),
                  executor, log=lambda line: None)
    return outcome.ran


def _started(make: Callable[[], Executor], strategies: list[str], tmp: Path) -> tuple[Executor, float]:
    """(executor, start-up seconds): its start (a LocalCluster's, a pool's) and a first trial
    of each cell into a throw-away store, so that every worker has imported the replay code;
    a user pays it once per run."""
    start = time.perf_counter()
    executor = make()
    _run(executor, strategies, 1, tmp / f"warm-up-{id(executor)}.sqlite")
    return executor, time.perf_counter() - start


def _timed_run(executor: Executor, strategies: list[str], trials: int, store: Path) -> tuple[float, int]:
    """(seconds, trials run) of the cells into a fresh store, the workers ready."""
    start = time.perf_counter()
    ran = _run(executor, strategies, trials, store)
    return time.perf_counter() - start, ran


def throughput(strategies: list[str], trials: int, repeats: int) -> None:
    print(f"lu2023 on sonar, {' + '.join(strategies)} x {trials} trials; load average before: "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())} on {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        executors = {}
        try:
            for label, make in (("local, 1 worker", lambda: LocalExecutor(1)),
                                ("local, 2 workers", lambda: LocalExecutor(2)),
                                ("dask LocalCluster, 2 workers", lambda: DaskExecutor(workers=2))):
                executors[label] = _started(make, strategies, tmp)
            # The VM's speed drifts by tens of percent within minutes: the executors take
            # turns, `repeats` times, and each keeps its fastest run.
            walls: dict[str, list[float]] = {label: [] for label in executors}
            for repeat in range(repeats):
                for label, (executor, _) in executors.items():
                    if label == "local, 1 worker" and repeat:
                        continue  # one run: a reference for the trials' own speed
                    wall, ran = _timed_run(executor, strategies, trials, tmp / f"{len(walls[label])}-{id(executor)}.sqlite")
                    walls[label].append(wall)
        finally:
            for executor, _ in executors.values():
                executor.close()
    for label, runs in walls.items():
        print(f"{label:30s} start-up {executors[label][1]:5.1f} s; then {ran} trials in {min(runs):6.1f} s "
              f"(runs: {', '.join(f'{w:.1f}' for w in runs)}): {60 * ran / min(runs):6.1f} trials/min")
    dask, local = walls["dask LocalCluster, 2 workers"], walls["local, 2 workers"]
    dask_start, local_start = executors["dask LocalCluster, 2 workers"][1], executors["local, 2 workers"][1]
    paired = sorted(d / l for d, l in zip(dask, local))
    print(f"dask / local wall at 2 workers, workers ready: {min(dask) / min(local):.2f}, fastest against fastest "
          f"(target <= 1.1); run by run: {', '.join(f'{r:.2f}' for r in paired)}, median "
          f"{statistics.median(paired):.2f}; with start-up: {(dask_start + min(dask)) / (local_start + min(local)):.2f}; "
          f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


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
    parser.add_argument("--trials", type=int, default=50, help="trials per strategy (default %(default)s)")
    parser.add_argument("--strategies", default=",".join(STRATEGIES),
                        help="lu2023 strategies on sonar (default %(default)s: the shortest trials, the worst case "
                             "for a per-task overhead)")
    parser.add_argument("--repeats", type=int, default=3,
                        help="turns of the 2-worker executors (fastest kept; default %(default)s)")
    parser.add_argument("--memory", metavar="DATASET", help="measure the driver's peak memory on one trial instead")
    args = parser.parse_args()
    if args.memory:
        memory(args.memory)
    else:
        throughput(args.strategies.split(","), args.trials, args.repeats)


if __name__ == "__main__":
    main()
