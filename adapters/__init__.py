"""Adapters: every query strategy behind one interface (:class:`adapters.base.QueryStrategy`).

Implementations are named ``library.name`` in protocols; this registry maps a name to
its adapter class and imports the adapter module (and so the library) only on demand,
so a library that is missing makes its strategies unavailable, not the tool.
"""
from __future__ import annotations

import importlib

from adapters.base import MISSING, QueryStrategy
from audit.errors import AuditError

IMPLEMENTATIONS: dict[str, tuple[str, str]] = {
    "native.uniform": ("adapters.native", "Uniform"),
    "native.margin": ("adapters.native", "Margin"),
    "libact.uncertainty": ("adapters.libact", "Uncertainty"),
}

__all__ = ["IMPLEMENTATIONS", "MISSING", "QueryStrategy", "strategy_class", "unavailable_reason"]


def strategy_class(implementation: str) -> type[QueryStrategy]:
    try:
        module_name, class_name = IMPLEMENTATIONS[implementation]
    except KeyError:
        raise AuditError(
            f"unknown implementation '{implementation}'; known: {', '.join(sorted(IMPLEMENTATIONS))}"
        ) from None
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise AuditError(f"{implementation} is unavailable: {exc}") from None
    return getattr(module, class_name)


def unavailable_reason(implementation: str) -> str | None:
    """None when the implementation can run here, else why not."""
    try:
        cls = strategy_class(implementation)
    except AuditError as exc:
        return str(exc)
    return cls.availability()
