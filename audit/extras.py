"""The optional extras of pyproject.toml and the one-line error when one is missing.

Every feature beyond the base install names its extra here: a model (audit.engine.models.REQUIRES),
a protocol (its ``requires`` key), an adapter, a data source or a claims command. Each checks
up front (before any work) and, when a module is missing, reports the command that installs
it: the CLI prints it as one ``audit: error: ...`` line and exits 2.
"""
from __future__ import annotations

import importlib.util

from audit.errors import AuditError

EXTRAS: dict[str, tuple[str, tuple[str, ...]]] = {
    # PyTorch for CDALBench's classifiers (audit/engine/torch_models.py)
    "deep": ("PyTorch", ("torch",)),
    # ALPBench's package and what al-audit imports beside it (its learners, OpenML data sets by ID)
    "alpbench": ("ALPBench's package", ("alpbench", "openml", "xgboost", "catboost")),
}
"""Extra name -> (what it installs, in words; the top-level modules it must make importable)."""


def install_line(extra: str) -> str:
    """The commands that install ``extra`` into the project's environment."""
    return f"`uv sync --extra {extra}` (or `uv run --extra {extra} audit ...`)"


def missing_modules(extra: str) -> list[str]:
    """The modules of ``extra`` that cannot be imported here (found without importing them)."""
    if extra not in EXTRAS:
        raise AuditError(f"unknown optional extra '{extra}'; known: {', '.join(sorted(EXTRAS))}")
    return [module for module in EXTRAS[extra][1] if importlib.util.find_spec(module) is None]


def missing(extra: str, feature: str) -> str | None:
    """None when ``extra`` is installed, else the one line saying that ``feature`` needs it and how
    to install it."""
    modules = missing_modules(extra)
    if not modules:
        return None
    return (f"{feature} needs the optional extra '{extra}' ({EXTRAS[extra][0]}; {', '.join(modules)} not "
            f"installed): {install_line(extra)}")


def require(extra: str, feature: str) -> None:
    """Raise the one-line install hint when ``feature`` needs ``extra`` and it is not installed."""
    line = missing(extra, feature)
    if line:
        raise AuditError(line)
