"""Rounds of work shared by this process and a team of worker processes, inside one trial.

The reference oracles (adapters/oracles.py) score thousands of candidate labeled sets a
round; with ``jobs`` > 1 a round is shared between this process and ``jobs - 1`` workers
that live as long as this process (each imports scikit-learn once, seconds, not once per
trial). The trial's shared object (the oracle's scorer) goes to a file once, which each
worker reads once; every round hands over index arrays only.

A round is cut into small chunks that every process takes from a shared counter (a lock
held for microseconds) until none is left, so the processes finish a round within one
chunk of each other whatever their speed (fixed shares left one waiting for the other
every round: the VM's cores vary in speed from one 100-ms round to the next). Results
come back in chunk order, so they do not depend on ``jobs``.

This module knows nothing of trials or strategies: the runner does not import it.
"""
from __future__ import annotations

import os
import pickle
import tempfile
import uuid
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Callable

from threadpoolctl import threadpool_limits

from audit.engine.workers import context as worker_context

_WORKER: dict[str, Any] = {}
_POOLS: dict[int, tuple[ProcessPoolExecutor, Any, Any]] = {}  # workers -> (pool, lock, [generation, next chunk])
CHUNKS_PER_PROCESS = 32  # a round is cut into about this many chunks per process
LOCK_SECONDS = 60.0  # the claim lock is held for microseconds: longer means its holder died


def _start_worker(lock: Any, state: Any) -> None:
    _WORKER["limits"] = threadpool_limits(1)  # the runner's single BLAS thread, for the worker's life
    _WORKER["lock"], _WORKER["state"] = lock, state


def _shared_in_worker(token: str, path: str) -> Any:
    """The trial's shared object, read from its file once per worker and trial."""
    if _WORKER.get("token") != token:
        with open(path, "rb") as f:
            _WORKER["shared"] = pickle.load(f)
        _WORKER["token"] = token
    return _WORKER["shared"]


def _chunk_work(shared: Any, function: Callable, fixed: tuple, items: Any, size: int) -> Callable[[int], Any]:
    """Chunk c of a round's work: ``function(shared, *fixed, items[c*size:(c+1)*size])``."""
    return lambda c: function(shared, *fixed, items[c * size:(c + 1) * size])


def _claim_chunks(lock: Any, state: Any, generation: int, n_chunks: int, work) -> dict[int, Any]:
    """Take the next unclaimed chunk of round ``generation`` and do it, until none is left or
    the round is over; every process of the team runs this loop on the same counter."""
    done = {}
    while True:
        if not lock.acquire(timeout=LOCK_SECONDS):
            raise BrokenProcessPool("a team worker died holding the chunk counter")
        try:
            if state[0] != generation or state[1] >= n_chunks:
                return done
            chunk = state[1]
            state[1] += 1
        finally:
            lock.release()
        done[chunk] = work(chunk)


def _claim_in_worker(token: str, path: str, generation: int, function: Callable, fixed: tuple, items: Any,
                     size: int, n_chunks: int) -> dict[int, Any]:
    work = _chunk_work(_shared_in_worker(token, path), function, fixed, items, size)
    return _claim_chunks(_WORKER["lock"], _WORKER["state"], generation, n_chunks, work)


def _next_round(lock: Any, state: Any) -> int:
    """Open a new round on the team's counter (which also ends any round still running)."""
    if not lock.acquire(timeout=LOCK_SECONDS):
        raise BrokenProcessPool("a team worker died holding the chunk counter")
    try:
        state[0] += 1
        state[1] = 0
        return int(state[0])
    finally:
        lock.release()


def _team(workers: int) -> tuple[ProcessPoolExecutor, Any, Any]:
    """Worker processes kept for the life of this process, with the lock and counter they
    share with this process."""
    if workers not in _POOLS:
        ctx = worker_context()
        lock, state = ctx.Lock(), ctx.RawArray("q", 2)
        pool = ProcessPoolExecutor(workers, mp_context=ctx, initializer=_start_worker, initargs=(lock, state))
        _POOLS[workers] = (pool, lock, state)
    return _POOLS[workers]


class SharedRounds:
    """Rounds of ``function(shared, *fixed, chunk of items)`` over a trial's ``shared``
    object, here alone (``jobs`` = 1) or with ``jobs - 1`` team workers; a context manager
    (closing ends a round cut short, e.g. by the trial's time limit)."""

    def __init__(self, shared: Any, jobs: int = 1):
        self.shared, self.jobs = shared, jobs
        self._futures: list[Future] = []
        self._path = None
        if jobs > 1:
            fd, self._path = tempfile.mkstemp(prefix="al-audit-team-", suffix=".pickle")
            with os.fdopen(fd, "wb") as f:
                pickle.dump(shared, f, protocol=pickle.HIGHEST_PROTOCOL)
            self._token = uuid.uuid4().hex

    def map_chunks(self, function: Callable, fixed: tuple, items: Any) -> list[Any]:
        """The chunk results of one round over all the items, in order. ``function`` must be
        a module-level function (the workers receive it by name)."""
        if self._path is None or len(items) < self.jobs:
            return [function(self.shared, *fixed, items)]
        size = max(1, len(items) // (self.jobs * CHUNKS_PER_PROCESS))
        n_chunks = -(-len(items) // size)
        pool, lock, state = _team(self.jobs - 1)
        try:
            generation = _next_round(lock, state)
            self._futures = [pool.submit(_claim_in_worker, self._token, self._path, generation, function, fixed,
                                         items, size, n_chunks) for _ in range(self.jobs - 1)]
            done = _claim_chunks(lock, state, generation, n_chunks,
                                 _chunk_work(self.shared, function, fixed, items, size))
            for future in self._futures:
                done.update(future.result())
        except BrokenProcessPool:
            del _POOLS[self.jobs - 1]  # a worker died: the next trial starts fresh workers
            raise
        return [done[chunk] for chunk in range(n_chunks)]

    def close(self) -> None:
        if self._futures and self.jobs - 1 in _POOLS:  # stopped mid-round (time limit): end the round
            _, lock, state = _POOLS[self.jobs - 1]
            _next_round(lock, state)
        for future in self._futures:  # and leave no queued work
            future.cancel()
        if self._path is not None:
            os.unlink(self._path)

    def __enter__(self) -> "SharedRounds":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
