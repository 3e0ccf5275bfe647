"""Results an adapter computes again and again within one run, kept in the run's scratch
directory (audit/engine/scratch.py) and read back instead of recomputed.

An entry is keyed by everything its computation reads (the caller's ``key``: inputs, seeds,
library versions), so a later trial that would compute it gets the very object, not a look-
alike. Each entry also stores ``probe(object)`` as computed before it was written; a reader
recomputes it on the loaded object and uses the object only when the two are equal, so a
damaged or foreign file means a fresh computation, never a different result. Files are
written whole (a temporary name, then a rename), and not at all when the directory's file
system has less than :data:`MIN_FREE_BYTES` free or a write fails.
"""
from __future__ import annotations

import hashlib
import os
import pickle
import shutil
from typing import Any, Callable

import numpy as np

from audit.engine import scratch

MIN_FREE_BYTES = 2 * 1024**3
"""Free space the scratch directory's file system keeps: below it nothing more is written."""


def _entry_path(directory: str, kind: str, key: tuple) -> str:
    digest = hashlib.sha256(repr(key).encode()).hexdigest()[:32]
    return os.path.join(directory, f"{kind}-{digest}.pickle")


def reused(kind: str, key: tuple, compute: Callable[[], Any], probe: Callable[[Any], np.ndarray]) -> tuple[Any, bool]:
    """(``compute()``'s result, False), or (the equal object this run stored earlier, True).

    ``kind`` names the entry's file; ``key`` (its ``repr`` hashed) must change whenever the
    result could; ``probe`` maps the object to an array that a damaged copy would not give."""
    directory = scratch.current()
    if directory is None:
        return compute(), False
    path = _entry_path(directory, kind, key)
    try:
        with open(path, "rb") as f:
            stored_key, stored_probe, obj = pickle.load(f)
        if stored_key == key and np.array_equal(probe(obj), stored_probe):
            return obj, True
    except Exception:  # none stored yet, or not readable as ours: computed afresh
        pass
    obj = compute()
    _store(path, key, obj, probe)
    return obj, False


def _store(path: str, key: tuple, obj: Any, probe: Callable[[Any], np.ndarray]) -> None:
    """Write the entry whole into the run's directory: a ``.part`` file this call creates
    (exclusively), renamed onto ``path``; after a failed write, that file removed again."""
    temporary = f"{path}.{os.getpid()}.part"
    created = False
    try:
        if shutil.disk_usage(os.path.dirname(path)).free < MIN_FREE_BYTES:
            return
        entry = (key, probe(obj), obj)
        with open(temporary, "xb") as f:
            created = True
            pickle.dump(entry, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(temporary, path)
    except OSError:
        if created:
            try:
                os.remove(temporary)
            except OSError:
                pass
