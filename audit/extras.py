"""The optional extras of pyproject.toml and the one-line error when one is missing.

A feature that needs an extra checks for it up front (before any work) and, when a module
is missing, raises AuditError with the command that installs it: the CLI prints it as one
``audit: error: ...`` line and exits 2.
"""
from __future__ import annotations

import importlib.util

from audit.errors import AuditError

EXTRAS: dict[str, tuple[str, ...]] = {
    # ALPBench's package and what al-audit imports beside it (OpenML data sets by ID)
    "alpbench": ("alpbench", "openml", "xgboost", "catboost"),
}
"""Extra name -> the top-level modules it must make importable."""


def missing_modules(extra: str) -> list[str]:
    """The modules of ``extra`` that cannot be imported here (found without importing them)."""
    if extra not in EXTRAS:
        raise AuditError(f"unknown optional extra '{extra}'; known: {', '.join(sorted(EXTRAS))}")
    return [module for module in EXTRAS[extra] if importlib.util.find_spec(module) is None]


def require(extra: str, feature: str) -> None:
    """Raise the one-line install hint when ``feature`` needs ``extra`` and it is not installed."""
    missing = missing_modules(extra)
    if missing:
        raise AuditError(f"{feature} needs the optional extra '{extra}' ({', '.join(missing)} not installed): "
                         f"run it as `uv run --extra {extra} audit ...` (or `uv sync --extra {extra}` first)")
