"""One run's scratch directory, for work that several of its trials would repeat.

The diagnosis replays a cell's trial seeds under several protocols, and some of a trial's
work depends on its seed alone: ALiPy's LAL trains its 2,000-tree selector forest from a
fixed file with a seed drawn from the strategy's seed, the same forest in every replay of
that trial seed. An adapter may keep such a result here (adapters/reuse.py) and read it
back in a later trial instead of computing it again.

:func:`run_scratch` makes the directory (``tempfile.mkdtemp`` in the system's temporary
directory, so ``TMPDIR`` moves it) for the command that runs the trials and removes it,
with all it holds, when that command ends, however it ends short of a kill. A trial learns
the path from its task (:class:`audit.engine.runner.TrialTask`), so a worker process or a
Dask worker sees it too; where the path is not a directory (another machine), the trial
computes everything itself. Nothing outside the directory is written.
"""
from __future__ import annotations

import contextlib
import contextvars
import os
import shutil
import tempfile
from typing import Iterator

PREFIX = "al-audit-run-"
"""How :func:`run_scratch` names its directories; :func:`current` accepts no other."""

_PATH: contextvars.ContextVar[str | None] = contextvars.ContextVar("run_scratch", default=None)


@contextlib.contextmanager
def run_scratch() -> Iterator[str]:
    """A new scratch directory for the run inside (removed at its end); inside another run's,
    that one (the outer run removes it)."""
    outer = _PATH.get()
    if outer is not None:
        yield outer
        return
    path = tempfile.mkdtemp(prefix=PREFIX)
    token = _PATH.set(path)
    try:
        yield path
    finally:
        _PATH.reset(token)
        shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def using(path: str | None) -> Iterator[None]:
    """Run the trial inside with ``path`` (its task's) as the scratch directory; None: none."""
    token = _PATH.set(path)
    try:
        yield
    finally:
        _PATH.reset(token)


def current() -> str | None:
    """The scratch directory of the run this code runs in, if it has one on this machine: a
    directory named as :func:`run_scratch` names them (never one of the user's)."""
    path = _PATH.get()
    if path is None or not os.path.basename(os.path.normpath(path)).startswith(PREFIX):
        return None
    return path if os.path.isdir(path) else None
