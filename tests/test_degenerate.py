"""Degenerate trials (audit/analysis/diagnose/degenerate.py): a strategy whose scores are
undefined takes the first unlabeled entry every round; the adapter says so, and reports count it."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from adapters.base import DegenerateQueryWarning
from adapters.native import VarianceReduction
from audit.analysis.diagnose.degenerate import PREFIX, degenerate_entry, summary_line
from audit.engine.models import ModelSpec
from audit.engine.runner import TrialResult, run_trial
from audit.engine.splits import seed_split
from audit.protocols import load_protocol
from audit.report.sections import report_sections
from tests.conftest import toy_pool


def queries_in_pool_order(protocol, data, trial_seed, result) -> bool:
    """Is every query of the trial the first pool row not yet queried (the pool in its order)?"""
    pool = seed_split(protocol, data, trial_seed)[2].pool
    queried = [row for r in result.rounds for row in r.queried]
    return queried == pool[:len(queried)].tolist()


def test_dwus_on_sonar_under_zhan2021_says_when_its_scores_are_nan_and_then_queries_in_pool_order(sonar):
    """zhan2021's DWUS (sigma = 0.1) on standardised sonar: on seed 0 one row lies so far from every
    k-means centre that its densities underflow to 0, every score is NaN and numpy's argmax takes the
    first unlabeled entry, round after round. The adapter's warning is recorded with the trial."""
    zhan2021 = load_protocol("zhan2021")
    result = run_trial(zhan2021, "sonar", sonar.X, sonar.y, "dwus", 0)
    assert result.status == "ok"
    assert [w for w in result.warnings if w.startswith(PREFIX + "DWUS scores are NaN")]
    assert queries_in_pool_order(zhan2021, sonar, 0, result)


def test_dwus_with_finite_densities_scores_and_does_not_warn(heart):
    """On heart (13 features) no row is that far from every centre: DWUS scores its candidates."""
    zhan2021 = load_protocol("zhan2021")
    result = run_trial(zhan2021, "heart", heart.X, heart.y, "dwus", 0)
    assert result.status == "ok"
    assert not [w for w in result.warnings if w.startswith(PREFIX)]
    assert not queries_in_pool_order(zhan2021, heart, 0, result)


@pytest.mark.parametrize("sigma, degenerate", [(100.0, True), (0.1, False)])
def test_variance_reduction_warns_only_at_a_sigma_libact_reads_as_zero(sigma, degenerate):
    X, y, _ = toy_pool(30, 6)
    strategy = VarianceReduction(query_model=ModelSpec("lr"), sigma=sigma)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        strategy.query(X, y, None, 1, np.flatnonzero(y == -1))
    assert any(issubclass(w.category, DegenerateQueryWarning) for w in caught) == degenerate


def trial(seed: int, aubc: float, warnings: list[str], status: str = "ok") -> TrialResult:
    return TrialResult("p", "d", "dwus", seed, status, aubc=aubc, warnings=warnings)


def test_the_entry_counts_the_degenerate_trials_and_gives_the_cell_without_them():
    why = PREFIX + "DWUS scores are NaN: ..."
    results = [trial(0, 0.70, [why]), trial(1, 0.80, ["RuntimeWarning: x"]), trial(2, 0.90, []),
               trial(3, 0.60, [why, "RuntimeWarning: x"]), trial(4, 0.0, [why], status="error")]
    entry = degenerate_entry(results, sd_ddof=1)
    assert entry["seeds"] == [0, 3] and entry["n_ok"] == 4  # a failed trial is not counted
    assert entry["reasons"] == ["DWUS scores are NaN: ..."]
    assert entry["mean_without"] == pytest.approx(0.85) and entry["sd_without"] == pytest.approx(np.std([0.8, 0.9], ddof=1))
    assert degenerate_entry(results[1:3], sd_ddof=1) is None


def test_the_terminal_line_and_the_report_section_name_the_cells():
    entry = {"seeds": [0, 2, 3, 4], "reasons": ["DWUS scores are NaN: ..."], "n_ok": 10,
             "mean_without": 0.78, "sd_without": 0.02}
    cells = [{"strategy": "dwus", "degenerate": entry, "warnings": [PREFIX + "DWUS scores are NaN: ...", "RuntimeWarning: x"]},
             {"strategy": "uniform", "degenerate": None, "warnings": []}]
    assert summary_line(cells).startswith("degenerate trials (scores undefined, every query the first unlabeled entry: "
                                          "pool-order sampling): dwus 4 of 10;")
    assert summary_line(cells[1:]) is None
    report = {"protocol": {"scale": "fraction"}, "strategies": cells, "seeds": {"skipped": []}}
    sections = {s.title: s for s in report_sections(report)}
    (item,) = sections["Degenerate trials"].items
    assert item.text == "dwus: 4 of 10 trials (seeds 0,2-4); without them: mean 0.7800, SD 0.0200"
    assert item.sub == ("DWUS scores are NaN: ...",)
    # the warning is not listed twice: the library-warnings section keeps only the others
    assert [i.text for i in sections["Library warnings (recorded during trials)"].items] == ["dwus: RuntimeWarning: x"]
