"""audit/analysis/stats.py against hand-computed and scipy reference values, plus one CLI run."""
from __future__ import annotations

import csv
import math

import numpy as np
import pytest
from scipy import stats as sps

from audit.analysis import stats
from audit.analysis import strategy_stats as analyses
from audit.cli.main import main


def _table(columns: dict[str, list[float]]) -> dict[str, dict[int, float]]:
    return {s: dict(enumerate(v)) for s, v in columns.items()}


def test_trial_ranks_average_ties_best_is_one():
    ranks = stats.trial_ranks(np.array([[0.8, 0.7, 0.7], [0.6, 0.6, 0.6], [0.5, 0.9, 0.7]]))
    assert ranks.tolist() == [[1, 2.5, 2.5], [2, 2, 2], [3, 1, 2]]


def test_average_rank_mean_sd_and_friedman_match_scipy():
    rng = np.random.default_rng(3)
    cols = {"uniform": rng.normal(0.70, 0.02, 10), "us-c": rng.normal(0.74, 0.02, 10),
            "mcm": rng.normal(0.72, 0.02, 10)}
    cols["mcm"][0] = cols["uniform"][0]  # a tie inside one trial
    result = stats.average_rank({"d": _table(cols)}, list(cols))["datasets"]["d"]
    ranks = sps.rankdata(-np.column_stack(list(cols.values())), axis=1)
    for j, s in enumerate(cols):
        assert result["ranks"][s]["mean"] == pytest.approx(ranks[:, j].mean())
        assert result["ranks"][s]["sd"] == pytest.approx(ranks[:, j].std(ddof=1))
    reference = sps.friedmanchisquare(*cols.values())
    assert result["friedman"]["statistic"] == pytest.approx(reference.statistic)
    assert result["friedman"]["p"] == pytest.approx(reference.pvalue)
    assert result["n"] == 10 and result["cd"] == pytest.approx(stats.nemenyi_cd(3, 10))


def test_nemenyi_cd_by_hand_k3_n10():
    # Demsar (2006) Table 5: q_0.05 = 2.343 for k = 3; CD = 2.343 * sqrt(3*4 / (6*10))
    assert stats.nemenyi_cd(3, 10) == pytest.approx(2.343 * math.sqrt(12 / 60), abs=1e-3)
    assert stats.nemenyi_cd(3, 10) == pytest.approx(1.0478, abs=1e-3)


def test_paired_improvement_matches_ttest_rel_one_sided():
    rng = np.random.default_rng(0)
    base = rng.normal(0.7, 0.02, 12)
    q = base + rng.normal(0.01, 0.01, 12)
    r = stats.paired_improvement(q, base)
    ref = sps.ttest_rel(q, base, alternative="greater")
    assert r["t"] == pytest.approx(ref.statistic) and r["p"] == pytest.approx(ref.pvalue)
    assert r["p"] == pytest.approx(sps.ttest_rel(q, base).pvalue / 2)  # t > 0 here
    assert r["mean_tau"] == pytest.approx(np.mean(q - base))
    assert r["sd_tau"] == pytest.approx(np.std(q - base, ddof=1))
    assert math.isnan(stats.paired_improvement(base + 0.01, base)["p"])  # constant difference: no test


def test_holm_by_hand():
    # sorted 0.005, 0.01, 0.03, 0.04 -> 4*0.005, 3*0.01, 2*0.03, max(0.06, 1*0.04)
    adjusted = stats.holm([0.01, 0.04, 0.03, 0.005, math.nan])
    assert adjusted[:4] == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert math.isnan(adjusted[4])
    assert stats.holm([0.6, 0.9]) == pytest.approx([1.0, 1.0])
    assert stats.holm([0.02, math.nan, 0.04]) == pytest.approx([0.04, math.nan, 0.04], nan_ok=True)  # m = 2


def test_seed_ranges():
    assert stats.seed_ranges([5, 0, 1, 2, 7, 8]) == "0-2,5,7-8" and stats.seed_ranges([]) == "none"


def test_usefulness_counts_and_holm_column():
    rng = np.random.default_rng(1)
    base = rng.normal(0.7, 0.02, 20)
    table = {
        "a": _table({"uniform": base, "good": base + 0.02 + rng.normal(0, 0.005, 20),
                     "same": base + rng.normal(0, 0.005, 20)}),
        "b": _table({"uniform": base, "good": base + 0.0015 + rng.normal(0, 0.005, 20),
                     "same": base - 0.01 + rng.normal(0, 0.005, 20)}),
    }
    result = stats.usefulness(table, ["uniform", "good", "same"])
    rows = {(r["dataset"], r["strategy"]): r for r in result["rows"]}
    assert rows[("a", "good")]["significant_holm"] and not rows[("b", "same")]["significant"]
    assert [r["p_holm"] for r in result["rows"]] == pytest.approx(stats.holm([r["p"] for r in result["rows"]]))
    assert result["counts"]["by_dataset"]["b"]["tests"] == 2
    assert result["counts"]["by_strategy"]["same"]["significant"] == 0


def test_win_tie_loss_half_percent_band_boundary():
    table = {
        "d1": _table({"x": [0.700], "y": [0.705], "z": [0.7051]}),  # x-y exactly 0.5%: tie; x-z: loss
        "d2": _table({"x": [0.800], "y": [0.790], "z": [0.800]}),
    }
    result = stats.win_tie_loss(table, ["x", "y", "z"])
    assert result["pairs"]["x vs y"] == [1, 1, 0]
    assert result["pairs"]["x vs z"] == [0, 1, 1]
    assert result["pairs"]["y vs z"] == [0, 1, 1]
    totals = {r["strategy"]: r for r in result["totals"]}
    assert (totals["z"]["win"], totals["z"]["tie"], totals["z"]["loss"], totals["z"]["score"]) == (2, 2, 0, 6)
    assert [r["strategy"] for r in result["totals"]] == ["z", "x", "y"]
    assert [r["score"] for r in result["totals"]] == [6, 4, 2]


def test_runs_needed_flip_rates_known_answers():
    rng = np.random.default_rng(2)
    base = rng.normal(0.7, 0.03, 400)
    per = _table({"uniform": base, "twin": rng.normal(0.7, 0.03, 400), "far": base + 0.2})
    result = stats.runs_needed(per, ["uniform", "twin", "far"], samples=2000)
    assert [r["k"] for r in result["rows"]] == [3, 5, 10, 20, 50]
    k3 = result["rows"][0]
    assert 0.35 < k3["sign_flips"]["twin"] < 0.55  # identical distributions: a coin toss
    assert all(r["sign_flips"]["far"] == 0 for r in result["rows"])
    assert k3["ranking_differs"] == pytest.approx(k3["sign_flips"]["twin"])  # only twin/uniform can swap
    small = stats.runs_needed(_table({"uniform": base[:10], "far": base[:10] + 0.2}), ["uniform", "far"], 50)
    assert [r["k"] for r in small["rows"]] == [3, 5]
    assert stats.runs_needed(per, ["uniform", "twin"], 100, seed=0) == stats.runs_needed(per, ["uniform", "twin"], 100, seed=0)


def test_cli_end_to_end_sonar(tmp_path, capsys):
    store, out = tmp_path / "store.sqlite", tmp_path / "useful"
    common = ["--protocol", "lu2023", "--strategies", "uniform,us-c", "--trials", "3",
              "--store", str(store), "--no-progress"]
    assert main(["usefulness", "--datasets", "sonar", *common, "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("protocol lu2023 (spec ") and "trial seeds: sonar 0-2 (3)" in text
    rows = list(csv.DictReader((out / "usefulness.csv").read_text().splitlines()))
    assert [(r["dataset"], r["strategy"], r["n"]) for r in rows] == [("sonar", "us-c", "3")]
    assert main(["rank", "--datasets", "sonar", *common, "--out", str(tmp_path / "rank")]) == 0
    assert "0 to run, 6 already stored" in capsys.readouterr().err  # the rerun reuses the store
    ranks = list(csv.DictReader((tmp_path / "rank" / "rank.csv").read_text().splitlines()))
    assert float(ranks[0]["sonar mean"]) + float(ranks[1]["sonar mean"]) == pytest.approx(3.0)
    assert main(["runs-needed", "--dataset", "sonar", "--protocol", "lu2023", "--strategies", "us-c",
                 "--trials", "3", "--store", str(store), "--no-progress", "--out", str(tmp_path / "rn")]) == 0
    assert "no k in" in capsys.readouterr().out  # k = 3 is not below n = 3
    assert main(["wtl", "--datasets", "nosuch", *common]) == 2


def test_help_renders_the_four_commands():
    from audit.cli.main import build_parser

    text = build_parser().format_help()  # a bare % in a help string would raise here
    assert all(name in text for name in ("usefulness", "rank", "wtl", "runs-needed"))


def test_by_default_the_oracles_are_left_out_and_unavailable_strategies_named(tmp_path):
    """lu2023 ranks and counts query strategies; BSO, which picks by the test labels, is
    analysed only when named."""
    import dataclasses

    from audit.protocols import load_protocol

    lu = load_protocol("lu2023")
    libact_vr = dataclasses.replace(lu.strategy("vr"), implementation="libact.vr")  # its extension is not built
    protocol = dataclasses.replace(lu, budget_size=3, strategies={**{s: lu.strategy(s) for s in
                                                                 ("uniform", "us-c", "bso")}, "vr": libact_vr})
    store = tmp_path / "store.sqlite"
    default = analyses.collect(protocol, ["sonar"], trials=2, store=store, progress=False, log=lambda line: None)
    assert default.strategies == ["uniform", "us-c"] and set(default.table["sonar"]) == {"uniform", "us-c"}
    assert any(line.startswith("reference oracles left out: bso") for line in default.provenance)
    assert any(line.startswith("not run here: vr") for line in default.provenance)
    named = analyses.collect(protocol, ["sonar"], ["uniform", "bso"], trials=2, store=store, progress=False,
                          log=lambda line: None)
    assert named.strategies == ["uniform", "bso"] and len(named.table["sonar"]["bso"]) == 2
    assert not any("oracles left out" in line for line in named.provenance)
