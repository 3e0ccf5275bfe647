"""The processes trials run in: the local pools' forkserver context, and the check a Dask
worker makes before it runs a trial.

Forking the driver after OpenMP/BLAS threads have run is unsafe, so pools use a
forkserver. Importing scikit-learn costs seconds; preloaded in the forkserver, it is
paid once per run instead of once per worker and pool, and :func:`start_early` lets the
CLI start the forkserver while the driver is still importing and planning.

A terminal sends Ctrl-C (SIGINT) to its whole process group: the forkserver and every
worker as well as the driver. Only the driver acts on it (it ends the workers itself):
the forkserver is started with SIGINT ignored, a disposition that survives its exec and
is inherited by every worker it forks. Otherwise a Ctrl-C while the forkserver imports
its preloads ends it with a traceback, and one that reaches a worker waiting for work
kills it holding the pool's queue lock, on which the pool's shutdown then waits for ever.

A Dask worker may run several trials at once, one per thread of the same process; an
adapter that changes process-wide state while it answers (``process_wide_state``: numpy's
global RNG, the stdout file descriptor) would change it under the others' feet, so such a
worker refuses it (:func:`run_on_dask_worker`).
"""
from __future__ import annotations

import contextlib
import multiprocessing
import signal
import threading
from multiprocessing.context import BaseContext
from typing import Any, Callable, Iterator

from audit.errors import AuditError

PRELOAD = ("audit.engine.runner", "audit.engine.executors", "adapters.oracles", "adapters.native")


def context() -> BaseContext:
    """The forkserver context, its forkserver running with SIGINT ignored (started here if
    it is not running yet, with the preload set)."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(list(PRELOAD))
    _start_forkserver()
    return ctx


def _start_forkserver() -> None:
    """Start the forkserver (and the resource tracker it starts first) deaf to SIGINT.

    SIGINT is blocked meanwhile, so a Ctrl-C in that moment is delivered to the driver
    afterwards instead of being lost. Signal dispositions belong to the main thread; from
    another one the forkserver starts as multiprocessing starts it.
    """
    from multiprocessing import forkserver

    if threading.current_thread() is not threading.main_thread():
        forkserver.ensure_running()
        return
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    handler = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        forkserver.ensure_running()
    finally:
        signal.signal(signal.SIGINT, handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def start_early() -> None:
    """Start the forkserver now, so its imports overlap with the driver's."""
    context()


_KEPT: dict[int, Any] | None = None  # inside pools_kept: the open local executor of each jobs count


@contextlib.contextmanager
def pools_kept() -> Iterator[None]:
    """Inside, the local pools of :func:`audit.engine.executors.run_tasks` stay open from
    call to call (one per jobs count) and close on leaving. A command that runs many short
    batches of trials (the rounds of ``--until-settled``, a diagnosis's replays, a claims
    check's cells) then pays the workers' start, lazy imports and fast-path self-checks
    once, not once per batch. Results do not change: a trial draws only from its own seeds,
    and a worker runs one trial after another within a batch already."""
    global _KEPT
    if _KEPT is not None:  # nested: the outer one keeps them
        yield
        return
    _KEPT = {}
    try:
        yield
    finally:
        kept, _KEPT = _KEPT, None
        for executor in kept.values():
            executor.close()


def kept_pool(jobs: int, make: Callable[[int], Any]) -> Any | None:
    """Inside :func:`pools_kept`, the kept executor of ``jobs`` workers (``make(jobs)`` the
    first time); outside, None."""
    if _KEPT is None:
        return None
    if jobs not in _KEPT:
        _KEPT[jobs] = make(jobs)
    return _KEPT[jobs]


def run_on_dask_worker(trial_function: Callable[[Any, Any], Any], task: Any, arrays: Any) -> Any:
    """``trial_function(task, arrays)`` on this Dask worker, unless the task's adapter needs
    the process to itself and the worker runs more than one thread: then an AuditError, which
    stops the run with one line (no trial is stored for it)."""
    from distributed import get_worker

    import adapters

    implementation = task.protocol.strategy(task.strategy).implementation
    if implementation.partition(".")[0] in adapters.LIBRARIES:  # the oracles are not adapters
        threads = get_worker().state.nthreads
        if threads > 1 and adapters.strategy_class(implementation).process_wide_state:
            raise AuditError(f"{implementation} changes process-wide state while it runs and cannot share a "
                             f"Dask worker with {threads - 1} other thread(s); start the workers with "
                             f"`dask worker ADDRESS --nthreads 1`")
    return trial_function(task, arrays)
