"""Trials at chance (audit/analysis/diagnose/at_chance.py) and their report section."""
from __future__ import annotations

import numpy as np
import pytest

from audit.analysis.diagnose.at_chance import (
    at_chance_entry,
    common_seeds,
    majority_share,
    seeds_at_chance,
    summary_line,
)
from audit.engine.runner import RoundRecord, TrialResult
from audit.report.sections import report_sections


def trial(seed: int, accuracies: list[float], status: str = "ok") -> TrialResult:
    rounds = [RoundRecord(i, 2 + i, (i,) if i else (), a, a, a, 0.0, 0.0) for i, a in enumerate(accuracies)]
    return TrialResult("p", "d", "s", seed, status, aubc=float(np.mean(accuracies)), rounds=rounds)


def test_majority_share_is_the_largest_class_share():
    assert majority_share(np.array([0, 0, 0, 1])) == 0.75
    assert majority_share(np.array([2, 2, 1, 0, 1, 2])) == 0.5


def test_a_trial_is_at_chance_when_its_mean_accuracy_is_within_the_margin_of_the_majority_share():
    results = [trial(0, [0.48, 0.52, 0.48]),        # a constant prediction flipping class: at chance
               trial(1, [0.50, 0.93, 0.95]),        # learned after one round
               trial(2, [0.61, 0.50, 0.51, 0.52]),  # mean 0.535: at chance
               trial(3, [0.56, 0.56]),              # just above 0.50 + 0.05
               trial(4, [0.40], status="error")]    # failed trials are not judged
    assert seeds_at_chance(results, 0.5) == [0, 2]
    assert seeds_at_chance(results, 0.5, margin=0.1) == [0, 2, 3]


def test_the_entry_gives_the_cell_without_its_trials_at_chance():
    results = [trial(0, [0.5, 0.5]), trial(1, [0.9, 0.9]), trial(2, [0.8, 1.0])]
    entry = at_chance_entry(results, 0.5, sd_ddof=0)
    assert entry["seeds"] == [0] and entry["n_ok"] == 3
    assert entry["mean_without"] == pytest.approx(0.9)
    assert entry["sd_without"] == pytest.approx(0.0)
    assert at_chance_entry(results[1:], 0.5, sd_ddof=0) is None


def cells(*seed_lists):
    return [{"strategy": f"s{i}", "status": "ok", "n_trials": 10,
             "at_chance": {"seeds": seeds, "n_ok": 10, "threshold": 0.55, "majority_share": 0.5,
                           "mean_without": 0.93, "sd_without": 0.02} if seeds else None}
            for i, seeds in enumerate(seed_lists)]


def test_seeds_at_chance_in_every_strategy_point_at_the_seed_not_the_strategy():
    assert common_seeds(cells([1, 4, 7], [4, 7, 9], [0, 4, 7])) == [4, 7]
    assert common_seeds(cells([1, 4], [])) == []       # a clean cell: nothing is common
    assert common_seeds(cells([1, 4])) == []           # one cell: nothing to share
    line = summary_line(cells([1, 4, 7], [4, 7]))
    assert line == "trials at chance (mean test accuracy <= 0.55): s0 3 of 10, s1 2 of 10; in every strategy: seeds 4, 7"
    assert summary_line(cells([], [])) is None


def test_the_report_has_a_section_for_them():
    report = {"protocol": {"scale": "fraction"}, "strategies": cells([1, 4, 7], [4, 7]), "seeds": {"skipped": []}}
    (section,) = [s for s in report_sections(report) if s.title == "Trials at chance"]
    texts = [item.text for item in section.items]
    assert texts[0] == "s0: 3 of 10 trials (seeds 1,4,7); without them: mean 0.9300, SD 0.0200"
    assert texts[-1].startswith("at chance in every strategy: seeds 4,7")
    assert "0.50 + 0.05" in section.intro
    report["strategies"] = cells([], [])
    assert not [s for s in report_sections(report) if s.title == "Trials at chance"]
