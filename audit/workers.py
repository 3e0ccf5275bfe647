"""The process context of every worker pool: forkserver, with the replay modules preloaded.

Forking the driver after OpenMP/BLAS threads have run is unsafe, so pools use a
forkserver. Importing scikit-learn costs seconds; preloaded in the forkserver, it is
paid once per run instead of once per worker and pool, and :func:`start_early` lets the
CLI start the forkserver while the driver is still importing and planning.
"""
from __future__ import annotations

import multiprocessing
from multiprocessing.context import BaseContext

PRELOAD = ("audit.runner", "audit.executors", "adapters.oracles", "adapters.native")


def context() -> BaseContext:
    """The forkserver context, preload set (effective if the forkserver is not running yet)."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(list(PRELOAD))
    return ctx


def start_early() -> None:
    """Start the forkserver now, so its imports overlap with the driver's."""
    from multiprocessing import forkserver

    context()
    forkserver.ensure_running()
