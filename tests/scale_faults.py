"""Trial functions that fail on purpose, run by executor workers in tests/test_scale.py.

Each takes a marker directory first (bind it with functools.partial): it leaves a file
per attempt there, named with the worker's pid, so a test sees which process ran what
and how many times.
"""
import os
import signal
import subprocess
import time
from pathlib import Path

from audit.engine.runner import execute_task

SLOW_SECONDS = 1.5
POISON_SEED = 1


def mark_attempt(directory: Path, task) -> None:
    (Path(directory) / f"{task.dataset}.{task.strategy}.{task.trial_seed}.{os.getpid()}.{time.time_ns()}").touch()


def attempts(directory: Path) -> list[tuple[str, str, int, int]]:
    """(data set, strategy, trial seed, pid) of every attempt marked, oldest first."""
    found = []
    for path in sorted(directory.iterdir(), key=lambda p: int(p.name.rsplit(".", 1)[1])):
        dataset, strategy, seed, pid, _ = path.name.split(".")
        found.append((dataset, strategy, int(seed), int(pid)))
    return found


def marked_trial(directory, task, arrays):
    """Marks the attempt, runs the trial."""
    mark_attempt(directory, task)
    return execute_task(task, arrays)


def slow_trial(directory, task, arrays):
    """Marks the attempt, waits SLOW_SECONDS (a window to kill its worker mid-trial), runs the trial."""
    mark_attempt(directory, task)
    time.sleep(SLOW_SECONDS)
    return execute_task(task, arrays)


def raises_on_poison_seed(directory, task, arrays):
    """Raises outside the trial's own error handling, every time, for POISON_SEED."""
    mark_attempt(directory, task)
    if task.trial_seed == POISON_SEED:
        raise RuntimeError("deliberate failure outside the trial")
    return execute_task(task, arrays)


def hangs(directory, task, arrays):
    """Marks the attempt, then never finishes: a trial running when its driver is killed."""
    mark_attempt(directory, task)
    time.sleep(3600)


def dies_on_poison_seed(directory, task, arrays):
    """Kills its own worker process, every time, for POISON_SEED (after a moment, so that
    other trials are in flight with it); runs the other trials after the same moment."""
    mark_attempt(directory, task)
    time.sleep(0.5)
    if task.trial_seed == POISON_SEED:
        os._exit(1)
    return execute_task(task, arrays)


def end_process_group(process: subprocess.Popen) -> None:
    """Kill a process started in its own session, and whatever it started (workers, forkserver)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait(timeout=10)
