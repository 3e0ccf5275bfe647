"""`audit claims`: per-run ranks and draws of k runs against hand-computed cases, and the
CDALBench claims' verdicts on stores whose trials say yes or no."""
import numpy as np
import pytest

from audit.analysis.claims import VERDICTS, ClaimRow, evaluate
from audit.analysis.stats import draw_rank_changes, mean_run_ranks, runs_needed, subset_below
from audit.cli.main import main
from audit.engine.runner import TrialResult
from audit.engine.store import ResultStore, fingerprint_details
from audit.protocols import load_protocol


def test_mean_of_per_run_ranks_is_not_the_rank_of_means():
    # run 0: a 0.9 > b 0.8 > c 0.7 -> ranks 1, 2, 3; run 1: b 0.8 > c 0.7 > a 0.6 -> ranks 3, 1, 2
    runs = np.array([[0.9, 0.8, 0.7], [0.6, 0.8, 0.7]])
    assert mean_run_ranks(runs).tolist() == [2.0, 1.5, 2.5]
    # the rank of the means (0.75, 0.8, 0.7) would be 2, 1, 3: c's 2.5 is not 3
    assert mean_run_ranks(np.array([[0.5, 0.5, 0.4]])).tolist() == [1.5, 1.5, 3.0]  # ties averaged


def test_draws_of_all_runs_never_change_a_rank_and_draws_are_seeded():
    per = {"a": {s: 0.9 if s < 3 else 0.1 for s in range(6)}, "b": {s: 0.5 for s in range(6)}}
    full = draw_rank_changes(per, ["a", "b"], k=6, samples=20)
    assert full["largest"].tolist() == [0.0] * 20 and full["full_ranks"] == {"a": 1.5, "b": 1.5}
    one = draw_rank_changes(per, ["a", "b"], k=1, samples=200, seed=3)
    # a single run ranks a first (seeds 0-2) or last (3-5): two draws differ by 0 or 1 rank
    assert set(one["largest"].tolist()) == {0.0, 1.0}
    assert np.array_equal(one["largest"], draw_rank_changes(per, ["a", "b"], k=1, samples=200, seed=3)["largest"])


def test_subset_below_by_hand():
    assert subset_below([0.0, 1.0], 0.5, k=2) == 0.0  # the mean of both is 0.5, not below
    assert subset_below([0.0, 0.0, 0.0], 0.5, k=3) == 1.0
    assert subset_below([0.0, 1.0], 0.5, k=1, samples=4000) == pytest.approx(0.5, abs=0.05)


def test_runs_needed_takes_the_papers_baseline_name():
    per = {"random": {s: 0.5 + 0.01 * (s % 2) for s in range(10)}, "margin": {s: 0.52 for s in range(10)}}
    result = runs_needed(per, ["random", "margin"], samples=50, ks=(3,), baseline="random")
    assert "sign_flips" in result["rows"][0] and "margin" in result["rows"][0]["sign_flips"]


def _store(tmp_path, margin_offset, run_sd=0.03):
    """A store with 50 runs of random, margin and entropy on threeclust under the current fingerprint;
    ``run_sd``: how much a run's data set moves every method alike."""
    protocol = load_protocol("cdalbench")
    store = ResultStore(tmp_path / "store.sqlite")
    fingerprint = store.register(fingerprint_details(protocol))
    rng = np.random.default_rng(0)
    for seed in range(50):
        base = 0.72 + run_sd * rng.standard_normal()
        for strategy, offset in (("random", 0.0), ("margin", margin_offset), ("entropy", margin_offset)):
            value = base + offset + 0.005 * rng.standard_normal()
            store.save(TrialResult("cdalbench", "threeclust", strategy, seed, "ok", aubc=value), fingerprint)
    store.close()
    return tmp_path / "store.sqlite"


def _row(rows, claim):
    return next(r for r in rows if r.claim == claim)


def test_honeypot_claim_supported_when_uncertainty_falls_below_random(tmp_path):
    rows = evaluate("cdalbench", store=_store(tmp_path, -0.02), samples=200)
    assert all(isinstance(r, ClaimRow) and r.verdict in VERDICTS for r in rows)
    honeypot = _row(rows, "honeypot-uncertainty-below-random")
    assert honeypot.verdict == "support"
    assert "margin - random: mean -0.02" in honeypot.figures and "Holm p" in honeypot.figures
    assert "not replayed here: bald, leastconfident" in honeypot.figures
    assert "published (Table 8): margin 0.704 < random 0.721" in honeypot.figures


def test_honeypot_claim_contradicted_when_uncertainty_is_above_random(tmp_path):
    rows = evaluate("cdalbench", store=_store(tmp_path, +0.02), samples=200)
    assert _row(rows, "honeypot-uncertainty-below-random").verdict == "contradiction"
    # margin 0.02 above random, but each run's draw moves both by SD 0.03: a 3-run mean of margin
    # falls below random's 50-run mean about P(Z < -0.02 / (0.03 / sqrt 3)) = 12% of the time
    below = _row(rows, "three-runs-margin-below-random")
    p = float(below.figures.split("P(3-run mean of margin < random's) = ")[1][:5])
    assert below.verdict == "support" and 0.05 < p < 0.25
    assert "splice-full: fewer than" in below.figures and "--dataset splice-full" in below.figures  # no Splice runs stored


@pytest.mark.parametrize("offset", [-0.0005, +0.0005])
def test_honeypot_claim_inconclusive_when_the_paired_test_rejects_neither_direction(tmp_path, offset):
    """A difference of 0.0005 in per-run noise of SD 0.005 (t about 0.5): no evidence either way,
    which is not a contradiction of the claim."""
    honeypot = _row(evaluate("cdalbench", store=_store(tmp_path, offset), samples=50),
                    "honeypot-uncertainty-below-random")
    assert honeypot.verdict == "inconclusive"
    holm = [float(line.split("Holm p = ")[1].split()[0]) for line in honeypot.figures.splitlines() if "Holm p" in line]
    assert len(holm) == 2 and min(holm) >= 0.05


def test_three_run_claim_contradicted_when_runs_do_not_vary(tmp_path):
    rows = evaluate("cdalbench", store=_store(tmp_path, +0.02, run_sd=0.0), samples=200)
    below = _row(rows, "three-runs-margin-below-random")
    assert below.verdict == "contradiction" and "P(3-run mean of margin < random's) = 0.000" in below.figures


def test_claims_without_trials_are_not_testable_and_the_papers_own_figures_are_checked(tmp_path):
    rows = evaluate("cdalbench", store=tmp_path / "absent.sqlite", samples=10)
    assert _row(rows, "runs-needed").verdict == "not testable here"
    ranks = _row(rows, "three-run-rank-change")
    # Tables 4 and 5 move TypiClust on Splice by 4.3 ranks (5.7 vs 10.0) and Core-GCN by 4.4; the text says 4.7
    assert "largest |Table 4 - Table 5| = 4.4 (coregcn on splice-full); typiclust on splice-full: 4.3" in ranks.figures
    assert ranks.verdict == "contradiction"
    assert "oracle - best method = +0.0320 AUC on average" in _row(rows, "oracle-lift").figures


def test_unknown_paper_is_one_line(capsys):
    assert main(["claims", "nosuchpaper"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["audit: error: no claims are registered for 'nosuchpaper'; known: alpbench, cdalbench"]


def test_an_option_the_paper_does_not_take_is_one_line_before_any_work(capsys, tmp_path):
    store = tmp_path / "store.sqlite"
    assert main(["claims", "cdalbench", "--trials", "2", "--datasets", "wdbc", "--store", str(store)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["audit: error: audit claims cdalbench does not take --datasets, --trials"]
    assert not store.exists()
