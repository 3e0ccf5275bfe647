"""Trials at chance: runs whose task model never did better than predicting one class.

A mean AUBC with a large SD can hide two populations: trials that learned and trials
whose model stayed at chance (a network dead at initialisation, a fit that never left
its start). Such trials say nothing about the query strategy, and a published mean with a
small SD over the same number of runs cannot have contained them, so a report names them
beside the verdicts instead of leaving the reader to find them in per_trial.csv.

The rule is deliberately plain: a trial is at chance when its test accuracy, averaged over
its rounds, is at most the data set's majority-class share plus ``margin``. The margin
absorbs the test set's own class share (a random test split of a balanced set has a
majority share a little above one half)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

CHANCE_MARGIN = 0.05  # accuracy above the majority share a trial needs to count as learning


def majority_share(y: np.ndarray) -> float:
    """The largest class's share of the labels: what predicting that class scores."""
    counts = np.bincount(np.asarray(y))
    return float(counts.max() / counts.sum())


def seeds_at_chance(results: Sequence[Any], share: float, margin: float = CHANCE_MARGIN) -> list[int]:
    """Trial seeds of the successful trials whose mean test accuracy over the rounds is at
    most ``share + margin``."""
    return sorted(r.trial_seed for r in results
                  if r.status == "ok" and r.rounds
                  and float(np.mean([round_.accuracy for round_ in r.rounds])) <= share + margin)


def at_chance_entry(results: Sequence[Any], share: float, sd_ddof: int,
                    margin: float = CHANCE_MARGIN) -> dict[str, Any] | None:
    """The cell's at-chance trials and its mean and SD without them (None when there are none)."""
    seeds = seeds_at_chance(results, share, margin)
    if not seeds:
        return None
    return {"seeds": seeds, "threshold": share + margin, "majority_share": share,
            **without_seeds(results, seeds, sd_ddof)}


def without_seeds(results: Sequence[Any], seeds: Sequence[int], sd_ddof: int) -> dict[str, Any]:
    """The cell's successful trials (``n_ok``, ``seeds`` among them) and the mean and SD of
    those not in ``seeds`` (None when too few are left)."""
    rest = [float(r.aubc) for r in results if r.status == "ok" and r.trial_seed not in seeds]
    return {"n_ok": len(rest) + len(seeds),
            "mean_without": float(np.mean(rest)) if rest else None,
            "sd_without": float(np.std(rest, ddof=sd_ddof)) if len(rest) > sd_ddof else None}


def common_seeds(cells: Sequence[dict[str, Any]]) -> list[int]:
    """Seeds at chance in every cell that ran (a property of the trial seed: its data draw,
    split or initial weights, not of a strategy); empty with fewer than two cells."""
    ran = [c for c in cells if c.get("status") == "ok" and c.get("n_trials")]
    if len(ran) < 2 or any(not c.get("at_chance") for c in ran):
        return []
    shared = set(ran[0]["at_chance"]["seeds"])
    for cell in ran[1:]:
        shared &= set(cell["at_chance"]["seeds"])
    return sorted(shared)


def summary_line(cells: Sequence[dict[str, Any]]) -> str | None:
    """One line for the terminal: how many trials of each cell sat at chance, and the seeds
    every cell shares (None when no cell has any)."""
    marked = [c for c in cells if c.get("at_chance")]
    if not marked:
        return None
    threshold = marked[0]["at_chance"]["threshold"]
    counts = ", ".join(f"{c['strategy']} {len(c['at_chance']['seeds'])} of {c['at_chance']['n_ok']}" for c in marked)
    shared = common_seeds(cells)
    tail = f"; in every strategy: seeds {', '.join(map(str, shared))}" if shared else ""
    return f"trials at chance (mean test accuracy <= {threshold:.2f}): {counts}{tail}"
