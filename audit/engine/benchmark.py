"""`audit run` and `audit status`: a whole protocol's benchmark, on any executor, resumable.

The driver plans every (data set, strategy, trial) the store lacks, through the same
planner as `audit reproduce`, orders the long cells first (so the last trials to finish
are short ones), hands the tasks to an executor and writes each result to the store as it
arrives, in one transaction per trial. It holds an exclusive lock on the store for the
whole run, so a second driver pointed at the same store refuses at once; the lock is
the kernel's (flock), so a driver killed even by SIGKILL leaves no stale lock and a
rerun resumes. The plan and the number of trials in flight are written to the store,
so `audit status` can show the progress from another process.
"""
from __future__ import annotations

import fcntl
import math
import os
import socket
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Iterator, Sequence

from audit.engine.datasets import names
from audit.engine.executors import DEFAULT_RETRIES, EXECUTORS, Executor, make_executor
from audit.engine.replay import (
    ReproduceRequest,
    expected_seconds,
    format_duration,
    longest_first,
    missing_tasks,
    plan_replay,
)
from audit.engine.runner import TrialResult, TrialTask, prepare_strategies
from audit.engine.store import DEFAULT_STORE, ResultStore
from audit.errors import AuditError
from audit.protocols import load_protocol

HEARTBEAT_SECONDS = 2.0


@dataclass
class RunRequest:
    """Everything `audit run` was asked to do, with the documented defaults."""

    protocol: str
    datasets: Sequence[str] | None = None  # None: every registered data set the protocol covers
    strategies: Sequence[str] | None = None  # None: every available strategy of the protocol
    trials: int | None = None  # None: the protocol's count for each data set's size
    executor: str = "local"  # "local" (process pool) or "dask"
    workers: int = 1  # local processes, or LocalCluster workers for dask without a scheduler
    scheduler: str | None = None  # a Dask scheduler address; None with dask: start a LocalCluster
    retries: int = DEFAULT_RETRIES  # extra attempts of a task whose worker died or that raised outside the trial
    max_trial_seconds: float | None = None  # a slower trial is recorded as TLE
    data_dir: str | None = None
    store: str | Path = DEFAULT_STORE
    retry_errors: bool = False
    progress: bool = True


@dataclass
class Cell:
    """One (data set, strategy) of the plan: its trial seeds and the expected seconds per trial."""

    dataset: str
    strategy: str
    fingerprint: str
    seeds: list[int]
    seconds_per_trial: float

    def to_data(self) -> dict:
        return {"dataset": self.dataset, "strategy": self.strategy, "fingerprint": self.fingerprint,
                "seeds": self.seeds, "seconds_per_trial": self.seconds_per_trial}


@dataclass
class RunPlan:
    protocol_name: str
    cells: list[Cell]
    tasks: list[TrialTask]  # the trials the store lacks, long cells first
    reused: int


@dataclass
class RunOutcome:
    ran: int
    reused: int
    failed: int
    seconds: float


def _validate(request: RunRequest) -> None:
    if request.trials is not None and request.trials < 1:
        raise AuditError(f"--trials must be a positive number, not {request.trials}")
    if request.workers < 1:
        raise AuditError(f"--workers must be a positive number, not {request.workers}")
    if request.retries < 0:
        raise AuditError(f"--retries must be 0 or more, not {request.retries}")
    if request.max_trial_seconds is not None and not 0 < request.max_trial_seconds < math.inf:  # NaN fails too
        raise AuditError(f"--max-trial-seconds must be a positive finite number, not {request.max_trial_seconds}")
    if request.executor not in EXECUTORS:
        raise AuditError(f"unknown executor '{request.executor}'; known: {', '.join(EXECUTORS)}")
    if request.scheduler and request.executor != "dask":
        raise AuditError("--scheduler needs --executor dask")


def plan_run(request: RunRequest, store: ResultStore, log=lambda line: None) -> RunPlan:
    """Every missing trial of every data set and strategy; all input validated first."""
    _validate(request)
    datasets = list(request.datasets) if request.datasets else names(load_protocol(request.protocol).tasks)
    if len(set(datasets)) != len(datasets):
        raise AuditError(f"a data set is named twice in --datasets: {','.join(datasets)}")
    replays = [ReproduceRequest(request.protocol, d, request.strategies, trials=request.trials,
                                data_dir=request.data_dir, store=request.store, retry_errors=request.retry_errors,
                                trial_timeout=request.max_trial_seconds) for d in datasets]
    plans = [plan_replay(r, log) for r in replays]  # every input validated before any work
    cells, tasks, reused = [], [], 0
    for plan, replay in zip(plans, replays):
        fingerprint, _, missing, stored = missing_tasks(plan, replay, store)
        reused += stored
        for sid, seconds in expected_seconds(plan, store).items():
            cells.append(Cell(plan.dataset, sid, fingerprint, list(plan.seeds), seconds))
        tasks += missing
    expected = {(c.dataset, c.strategy): c.seconds_per_trial for c in cells}
    return RunPlan(plans[0].protocol.name, cells, longest_first(tasks, expected), reused)


def _lock_file(store_path: Path) -> IO[str]:
    """The store's lock file, opened for flock (created when missing)."""
    lock_path = Path(f"{store_path}.lock")
    try:
        return open(lock_path, "a+")
    except OSError as exc:
        raise AuditError(f"cannot open {lock_path}, the lock file of results store {store_path}: "
                         f"{exc.strerror}") from None


@contextmanager
def driver_lock(store_path: Path) -> Iterator[None]:
    """Hold the store's driver lock, or refuse: one `audit run` per store at a time.

    flock is released by the kernel when its holder dies, so a killed driver never
    blocks the rerun that resumes it.
    """
    with _lock_file(store_path) as lock_file:
        try:
            fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock_file.seek(0)
            holder = lock_file.read().strip() or "unknown"
            raise AuditError(f"store {store_path} is in use by another `audit run` ({holder}); wait for it "
                             "to finish (`audit status` shows its progress) or use another --store") from None
        lock_file.seek(0)
        lock_file.truncate()
        lock_file.write(f"pid {os.getpid()} on {socket.gethostname()}")
        lock_file.flush()
        try:
            yield
        finally:
            lock_file.seek(0)
            lock_file.truncate()


def driver_running(store_path: Path) -> bool:
    """True while some `audit run` holds the store's driver lock."""
    lock_path = Path(f"{store_path}.lock")
    if not lock_path.exists():
        return False
    with _lock_file(store_path) as lock_file:
        try:
            fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(lock_file, fcntl.LOCK_UN)
        return False


def format_progress(done: int, total: int, running: int, failed: int, eta_seconds: float | None) -> str:
    """The one progress line the driver shows and `audit status` prints."""
    eta = "-" if eta_seconds is None else format_duration(eta_seconds)
    return f"trials done {done}/{total}, running {running}, failed {failed}, ETA {eta}"


class _Progress:
    """Counts and the ETA of a run: each cell's expected seconds per trial, replaced by the
    mean of its trials measured in this run as they arrive."""

    def __init__(self, plan: RunPlan):
        self.total = sum(len(c.seeds) for c in plan.cells)
        self.done = self.total - len(plan.tasks)
        self.failed = 0
        self.expected = {(c.dataset, c.strategy): c.seconds_per_trial for c in plan.cells}
        self.left = {}
        for task in plan.tasks:
            key = task.dataset, task.strategy
            self.left[key] = self.left.get(key, 0) + 1
        self._measured: dict[tuple[str, str], list[float]] = {}

    def record(self, result: TrialResult) -> None:
        key = result.dataset, result.strategy
        self.done += 1
        self.failed += result.status != "ok"
        self.left[key] -= 1
        times = self._measured.setdefault(key, [0.0, 0])
        times[0] += result.seconds
        times[1] += 1
        self.expected[key] = times[0] / times[1]

    def eta(self, workers: int) -> float:
        return sum(self.expected[key] * n for key, n in self.left.items()) / workers


def run(request: RunRequest, executor: Executor | None = None,
        log=lambda line: print(line, file=sys.stderr)) -> RunOutcome:
    """Run what the store lacks. ``executor``: None builds the one the request names (and
    closes it at the end); a given one is used as is and left open."""
    start = time.perf_counter()
    store = ResultStore(request.store)
    try:
        with driver_lock(store.path):
            plan = plan_run(request, store, log)
            log(f"plan: {len(plan.cells)} cells (data set x strategy) of {plan.protocol_name}, "
                f"{len(plan.tasks)} trials to run, {plan.reused} already stored in {store.path}")
            if not plan.tasks:
                return RunOutcome(0, plan.reused, 0, time.perf_counter() - start)
            prepare_strategies(plan.tasks, log)
            owned = executor is None
            if owned:
                executor = make_executor(request.executor, request.workers, request.scheduler, request.retries)
            try:
                progress = _Progress(plan)
                run_id = store.start_run(os.getpid(), socket.gethostname(), type(executor).__name__,
                                         executor.workers, {"protocol": plan.protocol_name,
                                                            "cells": [c.to_data() for c in plan.cells]})
                state = "interrupted"
                try:
                    _drive(plan, executor, store, run_id, progress, request.progress)
                    state = "finished"
                finally:
                    store.update_run(run_id, 0, executor.workers, state)
            finally:
                if owned:
                    executor.close()
            return RunOutcome(len(plan.tasks), plan.reused, progress.failed, time.perf_counter() - start)
    finally:
        store.close()


def _drive(plan: RunPlan, executor: Executor, store: ResultStore, run_id: int, progress: _Progress,
           show: bool) -> None:
    """Store every result as it arrives; show and record the progress."""
    from tqdm import tqdm

    fingerprints = {c.dataset: c.fingerprint for c in plan.cells}
    heartbeat = 0.0
    with tqdm(total=progress.total, initial=progress.done, disable=not show, file=sys.stderr, mininterval=0.5,
              bar_format="{percentage:3.0f}%|{bar:20}| {desc} [{elapsed}]") as bar:
        for result in executor.run(plan.tasks):
            store.save(result, fingerprints[result.dataset])
            progress.record(result)
            workers = executor.workers
            bar.set_description_str(format_progress(progress.done, progress.total, executor.running, progress.failed,
                                                progress.eta(workers)), refresh=False)
            bar.update()
            if time.monotonic() - heartbeat > HEARTBEAT_SECONDS:
                store.update_run(run_id, executor.running, workers)
                heartbeat = time.monotonic()


def status(store_path: str | Path = DEFAULT_STORE) -> str:
    """The progress of the latest `audit run` on a store, read from the store alone."""
    path = Path(store_path)
    if not path.exists():
        raise AuditError(f"no results store at {path}")
    store = ResultStore(path)
    try:
        latest = store.latest_run()
        if latest is None:
            raise AuditError(f"store {path} holds no `audit run`")
        alive = driver_running(path)
        state = latest["state"]
        if state == "running" and not alive:
            state = "stopped (the driver died; rerun the same `audit run` to resume)"
        lines = [f"run {latest['id']} ({latest['executor']}, {latest['workers']} workers, pid {latest['pid']} on "
                 f"{latest['host']}): started {latest['started_at']}, last update {latest['updated_at']}, {state}"]
        done = failed = total = 0
        left_seconds = 0.0
        per_dataset: dict[str, list[int]] = {}
        protocol = latest["plan"]["protocol"]
        for cell in latest["plan"]["cells"]:
            statuses = store.statuses(protocol, cell["dataset"], cell["strategy"], cell["fingerprint"])
            stored = [statuses[s] for s in cell["seeds"] if s in statuses]
            counts = per_dataset.setdefault(cell["dataset"], [0, 0, 0])
            counts[0] += len(stored)
            counts[1] += len(cell["seeds"])
            counts[2] += sum(s != "ok" for s in stored)
            measured = store.seconds_per_trial(protocol, cell["dataset"], cell["strategy"])
            left_seconds += (len(cell["seeds"]) - len(stored)) * (measured or cell["seconds_per_trial"])
        for d, t, f in per_dataset.values():
            done, total, failed = done + d, total + t, failed + f
        running = latest["running"] if alive else 0
        eta = left_seconds / max(1, latest["workers"]) if alive and done < total else None
        lines.append(format_progress(done, total, running, failed, eta))
        width = max(len(name) for name in per_dataset)
        lines += [f"  {name:{width}s}  {d}/{t}" + (f", {f} failed" if f else "")
                  for name, (d, t, f) in per_dataset.items()]
        return "\n".join(lines)
    finally:
        store.close()



def run_command(args) -> int:
    """`audit run`: the command line's arguments to a RunRequest."""
    def listed(text: str | None) -> list[str] | None:
        return [part.strip() for part in text.split(",") if part.strip()] if text else None

    outcome = run(RunRequest(
        protocol=args.protocol, datasets=listed(args.datasets), strategies=listed(args.strategies),
        trials=args.trials, executor=args.executor, workers=args.workers, scheduler=args.scheduler,
        retries=args.retries, max_trial_seconds=args.max_trial_seconds, data_dir=args.data_dir, store=args.store,
        retry_errors=args.retry_errors, progress=not args.no_progress))
    print(f"{outcome.ran} trials run ({outcome.failed} failed), {outcome.reused} already stored; "
          f"{format_duration(outcome.seconds)} wall; store {args.store}")
    return 0


def status_command(args) -> int:
    """`audit status`."""
    print(status(args.store))
    return 0
