"""The environment a trial is computed in, as one fingerprint for the store and the gate.

The store keys every trial by it (with the protocol and the code), so upgrading anything a
trial runs on recomputes the trial instead of reusing a stale one; the gate records it in a
baseline and lists what changed. It covers the interpreter, the platform, the numeric stack
every trial runs on, and each distribution an adapter declares (``QueryStrategy.library``
and ``QueryStrategy.distributions``): a new adapter's dependencies are fingerprinted by
declaring them on its class, not by editing a list here.
"""
from __future__ import annotations

import functools
import platform
from importlib import metadata

import adapters

NUMERIC_STACK = ("numpy", "scipy", "scikit-learn", "joblib", "threadpoolctl")
"""What every trial runs on: arrays, the models and scikit-learn's parallel and BLAS-thread helpers."""


@functools.lru_cache(maxsize=1)
def distributions() -> tuple[str, ...]:
    """The numeric stack, then every distribution an importable adapter declares."""
    names = dict.fromkeys(NUMERIC_STACK)
    for implementation in adapters.implementations():
        cls = adapters.strategy_class(implementation)
        names.update(dict.fromkeys(name for name in (cls.library, *cls.distributions) if name != "native"))
    return tuple(names)


def distribution_version(name: str) -> str:
    """The installed version of a distribution, from its package metadata."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "absent"


def environment_versions() -> dict[str, str]:
    """Interpreter, platform and the version of every distribution in :func:`distributions`."""
    versions = {"python": platform.python_version(), "platform": f"{platform.system()} {platform.machine()}"}
    versions.update((name, distribution_version(name)) for name in distributions())
    return versions
