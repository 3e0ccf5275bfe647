"""Adapters: every query strategy behind one interface (:class:`adapters.base.QueryStrategy`).

Protocols name implementations ``library.name``. Each adapter module
(``adapters/<library>.py``) lists its strategies in a module-level ``STRATEGIES`` dict;
this registry imports a module (and so its library) only on demand, so a library that is
missing or broken makes its strategies unavailable, not the tool. The reference oracles
import no AL library; they are "library" ``oracle`` (``adapters/oracles.py``).
"""
from __future__ import annotations

import importlib

from adapters.base import MISSING, QueryStrategy
from audit.errors import AuditError

LIBRARIES: dict[str, str] = {
    "native": "adapters.native",
    "libact": "adapters.libact",
    "alipy": "adapters.alipy",
    "skactiveml": "adapters.skactiveml",
    "oracle": "adapters.oracles",
}

__all__ = ["LIBRARIES", "MISSING", "QueryStrategy", "implementations", "strategy_class", "unavailable_reason",
           "uses_test_labels"]


def _module(library: str):
    try:
        module_name = LIBRARIES[library]
    except KeyError:
        raise AuditError(f"unknown library '{library}'; known: {', '.join(sorted(LIBRARIES))}") from None
    try:
        return importlib.import_module(module_name)
    except Exception as exc:  # ImportError, or a library that breaks while importing
        raise AuditError(f"{library} cannot be imported here: {type(exc).__name__}: {exc}") from None


def implementations() -> list[str]:
    """Every registered implementation name whose adapter module imports."""
    names = []
    for library in LIBRARIES:
        try:
            names += [f"{library}.{name}" for name in _module(library).STRATEGIES]
        except AuditError:
            continue
    return names


def strategy_class(implementation: str) -> type[QueryStrategy]:
    library, _, name = implementation.partition(".")
    strategies = _module(library).STRATEGIES if library in LIBRARIES else {}
    if name not in strategies:
        raise AuditError(
            f"unknown implementation '{implementation}'; known: {', '.join(sorted(implementations()))}"
        )
    return strategies[name]


def unavailable_reason(implementation: str) -> str | None:
    """None when the implementation can run here, else why not."""
    try:
        cls = strategy_class(implementation)
    except AuditError as exc:
        return str(exc)
    return cls.availability()


def uses_test_labels(implementation: str) -> bool:
    """Does the implementation choose by the test labels (a reference oracle)? False for one
    that cannot be loaded here: it runs nothing."""
    try:
        return strategy_class(implementation).uses_test_labels
    except AuditError:
        return False
