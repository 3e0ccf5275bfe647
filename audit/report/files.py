"""Writing a report directory: every file into a temporary sibling, renamed into place,
so a failed run never leaves half a report (audit/engine/destinations.py keeps the rules)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from audit.engine.destinations import csv_table, write_directory
from audit.report.html import render_html
from audit.report.plots import plot_forest, plot_learning_curves
from audit.report.sections import CURVES_PNG, FOREST_PNG, markdown


def _text_files(report: dict[str, Any], per_trial: list[dict[str, Any]]) -> dict[str, Any]:
    """report.json, report.md and per_trial.csv: what a partial and a final report share."""
    return {"report.json": json.dumps(report, indent=2, default=_json_default) + "\n",
            "report.md": markdown(report),
            "per_trial.csv": csv_table(["strategy", "trial_seed", "aubc", "status", "query_hash"], per_trial)}


def write_report(report: dict[str, Any], per_trial: list[dict[str, Any]],
                 curves: dict[str, tuple[np.ndarray, np.ndarray]], out_dir: Path, holds: dict[str, Any],
                 create_parents: bool = False) -> list[str]:
    """Write report.json, report.md, report.html, per_trial.csv and the two figures into
    ``out_dir`` atomically (all or nothing), its manifest saying what it ``holds``;
    returns the names written."""
    return write_directory(out_dir, {
        **_text_files(report, per_trial),
        CURVES_PNG: lambda path: plot_learning_curves(report, curves, path),
        FOREST_PNG: lambda path: plot_forest(report, path),
        "report.html": lambda path: path.write_text(
            render_html(report, path.parent / FOREST_PNG, path.parent / CURVES_PNG)),
    }, holds, create_parents=create_parents)


def write_partial_report(report: dict[str, Any], per_trial: list[dict[str, Any]], out_dir: Path,
                         holds: dict[str, Any], create_parents: bool = False) -> list[str]:
    """A partial report (``report["partial"]``, written while the run goes on): report.json,
    report.md and per_trial.csv only, through the same atomic writer; the final report
    replaces it."""
    return write_directory(out_dir, _text_files(report, per_trial), holds, create_parents=create_parents)


def _json_default(value: Any) -> Any:
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot serialise {type(value).__name__}")
