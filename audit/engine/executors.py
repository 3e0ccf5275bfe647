"""Where trials run: a local process pool or a Dask cluster, behind one interface.

An executor takes a list of :class:`~audit.engine.runner.TrialTask` (the unit of work: one data
set, strategy and trial seed) and yields each :class:`~audit.engine.runner.TrialResult` as it
finishes; the caller alone writes the results store. Each data set is loaded once on the
driver and shipped once to every worker (a pool initializer, a Dask scatter), never per
task. A trial's result depends only on its seeds, so both executors give identical
results.

An exception escaping the trial function (outside the runner's own error handling) fails
the attempt: a task is attempted at most ``1 + retries`` times, then yielded as an error
result. A worker process that dies mid-trial: on Dask the scheduler reruns its task on
another worker; a local pool breaks as a whole, so the local executor starts a new one
and reruns the lost tasks, each alone (another task in flight may have been the one that
killed the pool): a task counts a failed attempt only when its worker died while it ran
alone. A library failing inside a trial is not retried: the runner already records it as
that trial's error, and the same seeds would fail the same way.
"""
from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter, deque
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from audit.engine.runner import TrialResult, TrialTask, execute_task
from audit.engine.synthetic import Draw
from audit.engine.workers import context as worker_context
from audit.engine.workers import kept_pool, run_on_dask_worker
from audit.errors import AuditError

Arrays = tuple[np.ndarray, np.ndarray, Draw | None]  # X, y and a train/test set's own split
TrialFunction = Callable[[TrialTask, Arrays], TrialResult]
EXECUTORS = ("local", "dask")
DEFAULT_RETRIES = 2


def load_task_data(tasks: Iterable[TrialTask]) -> dict[str, Arrays]:
    """(X, y, own split) of every data set the tasks name, each loaded (and checksum-verified) once."""
    from audit.engine.datasets import load_dataset

    data: dict[str, Arrays] = {}
    for task in tasks:
        if task.dataset not in data:
            loaded = load_dataset(task.dataset, task.data_dir)
            data[task.dataset] = (loaded.X, loaded.y, loaded.given)
    return data


class LostWorker(Exception):
    """An attempt lost with the worker process running it. ``alone``: no other attempt
    was lost with it, so this task's run is the one its worker died in (a counted
    attempt); otherwise any of the lost attempts may have killed the worker, and each is
    rerun alone before one is counted against it."""

    def __init__(self, alone: bool):
        super().__init__("its worker process died")
        self.alone = alone


def failed_result(task: TrialTask, attempts: int, reason: str) -> TrialResult:
    """The error result of a task that could not be run to completion."""
    return TrialResult(task.protocol.name, task.dataset, task.strategy, task.trial_seed, "error",
                       error=f"failed after {attempts} attempt{'s' * (attempts > 1)}: {reason}")


class Executor:
    """Runs tasks with a bounded number in flight and retries failed attempts.

    Subclasses say how a task is submitted, waited for and collected; this class owns
    the policy (window, retries, order), so both executors behave the same.
    """

    def __init__(self, retries: int = DEFAULT_RETRIES, trial_function: TrialFunction = execute_task):
        """``retries``: extra attempts of a task whose attempt failed outside the trial's
        own code. ``trial_function(task, (X, y, given))`` runs one task on a worker (tests
        inject faults through it; it must be importable by the workers)."""
        if retries < 0:
            raise AuditError(f"--retries must be 0 or more, not {retries}")
        self.retries = retries
        self.trial_function = trial_function
        self._in_flight: dict[Any, TrialTask] = {}

    # -- what a subclass provides --------------------------------------------------
    @property
    def workers(self) -> int:
        """Trials that can run at once."""
        raise NotImplementedError

    @property
    def window(self) -> int:
        """Tasks kept in flight: two per worker, so no worker idles between trials."""
        return 2 * self.workers

    def _open(self, data: dict[str, Arrays]) -> None:
        """Make workers ready and ship them the data sets."""

    def _submit(self, task: TrialTask) -> Any:
        raise NotImplementedError

    def _wait(self, handles: list[Any]) -> Iterable[Any]:
        raise NotImplementedError

    def _collect(self, handle: Any) -> TrialResult:
        """The handle's result; raises the exception the attempt raised."""
        raise NotImplementedError

    def _cancel(self, handles: list[Any]) -> None:
        """Give up the attempts in flight when the run stops early, without waiting for
        any of them (``handles`` may lack one submitted just as the run stopped)."""

    def close(self) -> None:
        """Release workers and any cluster this executor started."""

    # -- the shared policy -----------------------------------------------------------
    @property
    def running(self) -> int:
        """Trials being run now (in flight, at most one per worker)."""
        return min(len(self._in_flight), self.workers)

    def run(self, tasks: Sequence[TrialTask]) -> Iterator[TrialResult]:
        """Yield one result per task, in completion order; tasks start in the given order."""
        pending = deque(tasks)
        if not pending:
            return
        self._open(load_task_data(pending))
        failures: Counter[tuple[str, str, int]] = Counter()
        suspects: set[tuple[str, str, int]] = set()  # lost with a worker: rerun alone, at the front
        in_flight = self._in_flight
        try:
            while pending or in_flight:
                while pending and len(in_flight) < (1 if suspects else self.window):
                    task = pending.popleft()
                    in_flight[self._submit(task)] = task
                for handle in self._wait(list(in_flight)):
                    task = in_flight.pop(handle)
                    key = (task.dataset, task.strategy, task.trial_seed)
                    try:
                        result = self._collect(handle)
                    except AuditError:  # the executor itself cannot go on
                        raise
                    except Exception as exc:  # raised outside the trial's own error handling
                        lost = isinstance(exc, LostWorker)
                        if lost:
                            suspects.add(key)
                        if not lost or exc.alone:  # an attempt lost with others is not counted
                            failures[key] += 1
                        if failures[key] <= self.retries:
                            pending.appendleft(task)
                            continue
                        result = failed_result(task, failures[key], f"{type(exc).__name__}: {exc}")
                    suspects.discard(key)
                    yield result
        except BaseException:  # stopped early: an error, Ctrl-C, or the caller closing this generator
            self._cancel(list(in_flight))
            in_flight.clear()
            raise

    def __enter__(self) -> "Executor":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


# --- local: a process pool (or this process) ---------------------------------------

_SHIPPED: dict[str, Arrays] = {}  # a local worker's data sets, received once at its start


def _alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (a zombie, killed but not yet reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: ask the kernel, which counts a zombie as alive
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


def _exit_with(driver_pid: int, interval: float = 1.0) -> None:
    """End this worker once the driver is gone: a killed driver must not leave workers
    running trials nobody will store (their parent is the forkserver, not the driver)."""
    while _alive(driver_pid):
        time.sleep(interval)
    os._exit(1)


def _start_worker(data: dict[str, Arrays], driver_pid: int) -> None:
    # Ctrl-C is the driver's to handle (it ends the workers), even from a forkserver that
    # multiprocessing restarted without audit.engine.workers' care
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _SHIPPED.update(data)
    threading.Thread(target=_exit_with, args=(driver_pid,), daemon=True, name="driver-watch").start()


def _run_shipped(trial_function: TrialFunction, task: TrialTask) -> TrialResult:
    return trial_function(task, _SHIPPED[task.dataset])


class LocalExecutor(Executor):
    """``workers`` processes of a forkserver pool on this machine; 1 runs trials in this
    process (no pool, so code registered at run time, e.g. by tests, is seen)."""

    def __init__(self, workers: int = 1, retries: int = DEFAULT_RETRIES,
                 trial_function: TrialFunction = execute_task):
        super().__init__(retries, trial_function)
        if workers < 1:
            raise AuditError(f"--workers must be a positive number, not {workers}")
        self._workers = workers
        self._data: dict[str, Arrays] = {}
        self._pool: ProcessPoolExecutor | None = None
        self._generation = 0  # pools replaced so far (one per dead worker)
        self._generation_of: dict[Future, int] = {}  # in-flight futures -> the pool that runs them
        self._lost: dict[int, int] = {}  # generation -> attempts lost when its pool broke

    @property
    def workers(self) -> int:
        return self._workers

    @property
    def window(self) -> int:
        """In this process a trial runs when submitted: running ahead would only delay results."""
        return 1 if self._workers == 1 else super().window

    def _open(self, data: dict[str, Arrays]) -> None:
        if self._pool is not None and data.keys() <= self._data.keys():
            return  # a later run on the same data sets: the workers hold them already
        self.close()
        self._data = data
        if self._workers > 1:
            self._pool = self._new_pool()

    def _new_pool(self) -> ProcessPoolExecutor:
        # forkserver: forking after OpenMP/BLAS threads have run is unsafe
        return ProcessPoolExecutor(self._workers, mp_context=worker_context(),
                                   initializer=_start_worker, initargs=(self._data, os.getpid()))

    def _replace_broken_pool(self) -> None:
        """A worker died, which breaks the whole pool: count what it took with it, start anew."""
        futures = [f for f, g in self._generation_of.items() if g == self._generation]
        wait(futures, timeout=60)  # the pool fails every attempt it still had
        self._lost[self._generation] = sum(
            f.done() and not f.cancelled() and isinstance(f.exception(), BrokenProcessPool) for f in futures)
        _end_pool(self._pool)
        self._generation += 1
        self._pool = self._new_pool()

    def _submit(self, task: TrialTask) -> Future:
        if self._pool is not None:
            try:
                future = self._pool.submit(_run_shipped, self.trial_function, task)
            except BrokenProcessPool:  # broke since the last collect
                self._replace_broken_pool()
                future = self._pool.submit(_run_shipped, self.trial_function, task)
            self._generation_of[future] = self._generation
            return future
        future: Future = Future()
        try:
            future.set_result(self.trial_function(task, self._data[task.dataset]))
        except Exception as exc:
            future.set_exception(exc)
        return future

    def _wait(self, handles: list[Future]) -> Iterable[Future]:
        return wait(handles, return_when=FIRST_COMPLETED).done

    def _collect(self, handle: Future) -> TrialResult:
        generation = self._generation_of.get(handle)
        try:
            return handle.result()
        except BrokenProcessPool:
            if generation == self._generation:  # the first attempt seen lost with this pool
                self._replace_broken_pool()
            raise LostWorker(alone=self._lost[generation] == 1) from None
        finally:
            self._generation_of.pop(handle, None)

    def _cancel(self, handles: list[Future]) -> None:
        """End the pool: its workers run trials whose results nobody will collect (after a
        Ctrl-C they would run on, as they ignore it); the next run starts a new pool."""
        for future in handles:
            future.cancel()
        self._generation_of.clear()
        if self._pool is not None:
            _end_pool(self._pool)
            self._pool = None

    def close(self) -> None:
        if self._pool is not None:
            if getattr(self._pool, "_broken", False):  # broke after its last collect
                _end_pool(self._pool)
            else:  # no trial in flight: the workers exit as soon as they are told
                self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


def _end_pool(pool: ProcessPoolExecutor) -> None:
    """Shut down a pool now, terminating its workers: never wait for a trial in flight.

    For a pool a dead worker broke, the pool's own clean-up terminates the workers it
    knows of, then waits for them; a worker that a submit racing with the break started
    is not among them, so it idles for ever and the pool's shutdown never returns
    (CPython 3.11). Terminating every worker of the pool (an internal mapping) avoids
    both, and ends the trials of a run stopped early.
    """
    for process in list(getattr(pool, "_processes", {}).values()):
        if process.is_alive():
            process.terminate()
    pool.shutdown(wait=False, cancel_futures=True)


# --- Dask: a scheduler given by address, or a LocalCluster started here ---------------

class DaskExecutor(Executor):
    """Trials as tasks of a dask.distributed cluster.

    ``scheduler``: the address of a running scheduler (its workers should run one thread
    each, ``dask worker ADDRESS --nthreads 1``: a trial limits BLAS to one thread for the
    whole process); None starts a LocalCluster of ``workers`` single-threaded processes,
    closed with this executor. Dask itself reschedules a task whose worker died (up to its
    ``distributed.scheduler.allowed-failures``, set to ``retries`` for a LocalCluster);
    past that the task counts as one failed attempt here. The LocalCluster sets
    ``distributed.scheduler.worker-saturation: inf``: with Dask's default, the scheduler
    holds tasks back until a worker slot frees, and each sub-second trial then waits for
    a scheduler round trip (the executor bounds what is in flight itself); a scheduler of
    your own should be configured the same.
    """

    WORKERS_TTL = 2.0

    def __init__(self, scheduler: str | None = None, workers: int = 2, retries: int = DEFAULT_RETRIES,
                 trial_function: TrialFunction = execute_task):
        super().__init__(retries, trial_function)
        import dask
        from distributed import Client, LocalCluster

        self._cluster = None
        try:
            if scheduler:
                self._client = Client(scheduler, timeout="20s")
            else:
                if workers < 1:
                    raise AuditError(f"--workers must be a positive number, not {workers}")
                with dask.config.set({"distributed.scheduler.allowed-failures": retries,
                                      "distributed.scheduler.worker-saturation": float("inf")}):
                    self._cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                                 dashboard_address=None)
                self._client = Client(self._cluster)
        except (OSError, TimeoutError) as exc:
            self.close()
            raise AuditError(f"cannot reach Dask scheduler {scheduler}: {exc}") from None
        self._data_futures: dict[str, Any] = {}
        self._workers_asked: tuple[float, int] | None = None  # (when, threads)

    @property
    def workers(self) -> int:
        """Threads of the cluster's workers, asked of the scheduler at most every
        ``WORKERS_TTL`` seconds (the run loop reads it per result: a round trip each time
        was a measurable share of a sub-second trial's cost)."""
        now = time.monotonic()
        if self._workers_asked is None or now - self._workers_asked[0] > self.WORKERS_TTL:
            self._workers_asked = (now, max(1, sum(self._client.nthreads().values())))
        return self._workers_asked[1]

    def _open(self, data: dict[str, Arrays]) -> None:
        for name, arrays in data.items():
            if name not in self._data_futures:
                # broadcast: every worker holds a copy, so one dying does not lose the data
                [self._data_futures[name]] = self._client.scatter([arrays], broadcast=True, hash=False)

    def _submit(self, task: TrialTask) -> Any:
        return self._client.submit(run_on_dask_worker, self.trial_function, task, self._data_futures[task.dataset],
                                   pure=False)

    def _wait(self, handles: list[Any]) -> Iterable[Any]:
        from distributed import wait as dask_wait

        return dask_wait(handles, return_when="FIRST_COMPLETED").done

    def _collect(self, handle: Any) -> TrialResult:
        try:
            return handle.result()
        finally:
            handle.release()

    def _cancel(self, handles: list[Any]) -> None:
        if handles:
            self._client.cancel(handles)

    def close(self) -> None:
        client = getattr(self, "_client", None)
        if client is not None:
            client.close()
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None


def make_executor(name: str, workers: int, scheduler: str | None = None,
                  retries: int = DEFAULT_RETRIES) -> Executor:
    """The executor the command line asked for (``--executor``, ``--workers``, ``--scheduler``)."""
    if name not in EXECUTORS:
        raise AuditError(f"unknown executor '{name}'; known: {', '.join(EXECUTORS)}")
    if scheduler and name != "dask":
        raise AuditError("--scheduler needs --executor dask")
    if name == "local":
        return LocalExecutor(workers, retries)
    return DaskExecutor(scheduler, workers, retries)


def run_tasks(tasks: Iterable[TrialTask], jobs: int = 1) -> Iterator[TrialResult]:
    """Run tasks and yield results as they finish (jobs > 1: in a local process pool, kept
    open for the next call inside :func:`audit.engine.workers.pools_kept`).

    Results do not depend on ``jobs``: each trial draws only from its own seeds.
    """
    kept = kept_pool(jobs, LocalExecutor) if jobs > 1 else None
    if kept is not None:
        yield from kept.run(list(tasks))
        return
    with LocalExecutor(jobs) as executor:
        yield from executor.run(list(tasks))
