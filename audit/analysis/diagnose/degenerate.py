"""Degenerate trials: runs in which a strategy's scores were undefined and it took the first
unlabeled entry every round (adapters.base.DegenerateQueryWarning).

Such a trial measures pool-order sampling, not the strategy: libact's DWUS on standardised
sonar, whose density estimate is NaN when one row lies too far from every k-means centre
(most trials at sigma = 0.1), or VarianceReduction at a sigma libact reads as 0. The mean of
a cell mixes both kinds of trial, so a report counts them and gives the mean of the rest."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from audit.analysis.diagnose.at_chance import without_seeds

PREFIX = "DegenerateQueryWarning: "  # how the runner records the warning with a trial


def degenerate_entry(results: Sequence[Any], sd_ddof: int) -> dict[str, Any] | None:
    """The cell's degenerate trials, why, and its mean and SD without them (None when there
    are none)."""
    marked = [r for r in results if r.status == "ok" and any(w.startswith(PREFIX) for w in r.warnings)]
    if not marked:
        return None
    seeds = sorted(r.trial_seed for r in marked)
    reasons = sorted({w.removeprefix(PREFIX) for r in marked for w in r.warnings if w.startswith(PREFIX)})
    return {"seeds": seeds, "reasons": reasons, **without_seeds(results, seeds, sd_ddof)}


def summary_line(cells: Sequence[dict[str, Any]]) -> str | None:
    """One line for the terminal: how many trials of each cell were degenerate (None when none were)."""
    marked = [c for c in cells if c.get("degenerate")]
    if not marked:
        return None
    counts = ", ".join(f"{c['strategy']} {len(c['degenerate']['seeds'])} of {c['degenerate']['n_ok']}" for c in marked)
    return (f"degenerate trials (scores undefined, every query the first unlabeled entry: pool-order sampling): "
            f"{counts}; the report gives why and each cell's mean without them")
