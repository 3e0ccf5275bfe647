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
from audit.errors import AuditError


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
    adjusted = stats.adjust_pvalues([0.01, 0.04, 0.03, 0.005, math.nan])
    assert adjusted[:4] == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert math.isnan(adjusted[4])
    assert stats.adjust_pvalues([0.6, 0.9]) == pytest.approx([1.0, 1.0])
    assert stats.adjust_pvalues([0.02, math.nan, 0.04]) == pytest.approx([0.04, math.nan, 0.04], nan_ok=True)  # m = 2


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
    assert [r["p_holm"] for r in result["rows"]] == pytest.approx(stats.adjust_pvalues([r["p"] for r in result["rows"]]))
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
    refs = tmp_path / "refs.csv"
    refs.write_text("paper,table,dataset,strategy,metric,mean,scale,aubc_variant\n"
                    "mine,T1,sonar,uniform,accuracy,70.0,percent,lu2023_code\n"
                    "mine,T1,sonar,us-c,accuracy,75.5,percent,lu2023_code\n")
    assert main(["rank", "--datasets", "sonar", *common, "--out", str(tmp_path / "rank"), "--references", str(refs)]) == 0
    captured = capsys.readouterr()
    assert "0 to run, 6 already stored" in captured.err  # the rerun reuses the store
    assert "published: rank of each strategy's published mean AUBC" in captured.out and "sonar published" in captured.out
    ranks = list(csv.DictReader((tmp_path / "rank" / "rank.csv").read_text().splitlines()))
    assert float(ranks[0]["sonar mean"]) + float(ranks[1]["sonar mean"]) == pytest.approx(3.0)
    assert [(r["strategy"], r["sonar published rank"]) for r in ranks] == [("uniform", "2"), ("us-c", "1")]
    assert main(["usefulness", "--datasets", "sonar", *common, "--out", str(tmp_path / "u2"), "--references", str(refs)]) == 0
    rows = list(csv.DictReader((tmp_path / "u2" / "usefulness.csv").read_text().splitlines()))
    assert [r["published_gain"] for r in rows] == ["0.05500"]
    refs.write_text(refs.read_text() + "mine,T1,nosuch,us-c,accuracy,75.5,percent,lu2023_code\n")
    assert main(["usefulness", "--datasets", "sonar", *common, "--out", str(tmp_path / "u3"), "--references", str(refs)]) == 2
    assert "refs.csv:4: unknown data set 'nosuch'" in capsys.readouterr().err and not (tmp_path / "u3").exists()
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


# --- against statsmodels' own documented cases ---------------------------------------------
# statsmodels/stats/tests/test_tost.py (statsmodels 0.14/0.15): the "clinic" data, columns
# var1 and var2, rows 1-15 group 1 and rows 16-30 group 2, and the results of R's
# equivalence::tost(..., eps = 0.6) stored there as tost_clinic_paired_1, tost_clinic_paired,
# tost_clinic_indep_1 and tost_clinic_indep (statsmodels checks ttost_paired and ttost_ind
# against them).
CLINIC_VAR1 = [2.84, 2.51, 2.41, 2.95, 3.14, 3.79, 4.14, 3.85, 3.02, 3.45, 5.37, 3.81, 4.19, 3.16, 3.84,
               2.60, 2.82, 2.18, 3.46, 4.01, 3.04, 3.47, 4.06, 2.91, 3.59, 4.51, 3.16, 3.86, 3.31, 3.02]
CLINIC_VAR2 = [4.00, 3.26, 4.14, 3.42, 3.25, 4.34, 4.97, 4.31, 3.11, 3.41, 5.02, 4.21, 4.59, 5.30, 4.32,
               3.76, 3.66, 3.65, 3.60, 3.48, 2.87, 3.24, 3.92, 3.99, 4.21, 4.21, 3.31, 3.61, 2.97, 2.73]


@pytest.mark.parametrize("column, p_value, ci_diff, se_diff, verdict", [
    # tost_clinic_paired_1: t = tost(-clinic$var1[16:30] + clinic$var1[1:15], eps=0.6), "rejected"
    (CLINIC_VAR1, 0.003166881489265175, (-0.0744336620516462, 0.4037669953849797), 0.1357514067862445,
     "equivalent"),
    # tost_clinic_paired: the same on var2, "not rejected"
    (CLINIC_VAR2, 0.4412034046017588, (0.1261653305099018, 0.999168002823431), 0.2478276410785118,
     "inconclusive"),
])
def test_gate_tost_reproduces_r_equivalence_tost_paired(column, p_value, ci_diff, se_diff, verdict):
    d = np.subtract(column[:15], column[15:])
    result = stats.paired_tests(d, margin=0.6, alpha=0.05)
    assert result.p_tost == pytest.approx(p_value, rel=1e-10)
    assert result.ci == pytest.approx(ci_diff, rel=1e-10)  # R's ci_diff is the 1 - 2 alpha interval
    assert result.verdict == verdict
    assert stats.t_interval(d, 0.90) == pytest.approx(ci_diff, rel=1e-10)
    assert result.p_difference == pytest.approx(2 * sps.t.sf(abs(d.mean()) / se_diff, 14), rel=1e-10)


@pytest.mark.parametrize("column, df, se_diff", [
    (CLINIC_VAR1, 26.7484787582315, 0.2531625991083627),  # tost_clinic_indep_1 (Welch)
    (CLINIC_VAR2, 24.11000151062728, 0.2149871904637392),  # tost_clinic_indep (Welch)
])
def test_welch_reproduces_r_equivalence_tost_independent(column, df, se_diff):
    x, y = np.array(column[:15]), np.array(column[15:])
    result = stats.welch(x.mean(), x.std(ddof=1), 15, y.mean(), y.std(ddof=1), 15)
    assert result.df == pytest.approx(df, rel=1e-10)
    assert result.t == pytest.approx((x.mean() - y.mean()) / se_diff, rel=1e-10)
    assert result.p == pytest.approx(2 * sps.t.sf(abs(result.t), df), rel=1e-10)


def test_paired_difference_test_matches_ttest_rel_and_its_edge_rules():
    after, before = [0.70, 0.74, 0.78, 0.71], [0.70, 0.72, 0.75, 0.71]
    reference = sps.ttest_rel(after, before)
    assert stats.paired_difference_test(after, before) == pytest.approx((reference.statistic, reference.pvalue))
    assert stats.paired_difference_test([0.7], [0.7]) == (0.0, 1.0)  # nothing moved, even one pair
    assert all(math.isnan(v) for v in stats.paired_difference_test([0.71, 0.81], [0.70, 0.80]))  # no spread
    assert all(math.isnan(v) for v in stats.paired_difference_test([0.71], [0.70]))


# --- Friedman and Nemenyi by hand ------------------------------------------------------------

def test_friedman_and_nemenyi_hand_computed():
    # 4 trials x 3 strategies; per-trial ranks (1 = best AUBC): a 1,1,1,2  b 2,3,2,1  c 3,2,3,3
    # rank sums R = 5, 8, 11; chi2 = 12 / (N k (k+1)) * sum R^2 - 3 N (k+1)
    #                             = 12 / 48 * (25 + 64 + 121) - 48 = 4.5, df 2: p = exp(-4.5 / 2)
    # CD = 2.343 * sqrt(3 * 4 / (6 * 4)) = 1.657 > 2.75 - 1.25: no pair differs
    table = {"d": _table({"a": [0.9, 0.9, 0.9, 0.8], "b": [0.8, 0.7, 0.8, 0.9], "c": [0.7, 0.8, 0.7, 0.7]})}
    result = stats.average_rank(table, ["a", "b", "c"])["datasets"]["d"]
    assert [result["ranks"][s]["mean"] for s in "abc"] == [1.25, 2.0, 2.75]
    assert result["friedman"]["statistic"] == pytest.approx(4.5)
    assert result["friedman"]["p"] == pytest.approx(math.exp(-2.25))
    assert result["cd"] == pytest.approx(2.343 * math.sqrt(0.5), abs=1e-3) and result["different"] == []


@pytest.mark.parametrize("alpha, q_table", [
    # Demsar (2006), JMLR 7, Table 5(a): critical values q_alpha of the Nemenyi test, k = 2..10
    (0.05, [1.960, 2.343, 2.569, 2.728, 2.850, 2.949, 3.031, 3.102, 3.164]),
    (0.10, [1.645, 2.052, 2.291, 2.459, 2.589, 2.693, 2.780, 2.855, 2.920]),
])
def test_nemenyi_q_alpha_is_demsar_table_5(alpha, q_table):
    for k, q in zip(range(2, 11), q_table):
        n = 7
        assert stats.nemenyi_cd(k, n, alpha) / math.sqrt(k * (k + 1) / (6 * n)) == pytest.approx(q, abs=1e-3)


def test_published_columns_beside_the_reproduced_figures():
    base = [0.70, 0.72, 0.71, 0.69]
    table = {"d": _table({"uniform": base, "a": [v + 0.02 for v in base], "b": [v - 0.01 for v in base]})}
    c = analyses.Collected(table, ["uniform", "a", "b"], ["provenance"], 1, "lu2023",
                           published={"d": {"uniform": 0.80, "a": 0.8125, "b": None}}, references="refs.csv")
    text, header, rows = analyses.usefulness_text(c, stats.usefulness(table, c.strategies))
    assert header[-1] == "published_gain" and [r[-1] for r in rows] == ["0.01250", "-"]  # b has no published mean
    assert "from refs.csv" in text
    text, header, rows = analyses.rank_text(c, stats.average_rank(table, c.strategies))
    assert header[-1] == "d published rank" and [r[-1] for r in rows] == ["2", "1", "-"]
    assert analyses.published_ranks({"x": 0.7, "y": 0.7, "z": 0.9}, ["x", "y", "z"]) == {"x": 2.5, "y": 2.5, "z": 1.0}
    plain, header, _ = analyses.rank_text(analyses.Collected(table, c.strategies, ["provenance"], 1, "lu2023"),
                                          stats.average_rank(table, c.strategies))
    assert "published" not in plain and "published" not in " ".join(header)  # without --references: as before


def test_published_means_pick_as_reproduce_does(tmp_path):
    from audit.analysis.references import read_user_table
    from audit.engine.datasets import REGISTRY
    from audit.protocols import load_protocol

    lu = load_protocol("lu2023")
    path = tmp_path / "refs.csv"
    path.write_text("paper,table,dataset,strategy,metric,mean,scale,aubc_variant\n"
                    "mine,T1,heart,uniform,accuracy,0.8051,fraction,lu2023_code\n"
                    "mine,T1,heart,us-c,roc_auc,0.90,fraction,lu2023_code\n"  # another metric: not this protocol's
                    "mine,T1,heart,qbc,accuracy,81.30,percent,lu2023_code\n")
    refs = read_user_table(path, REGISTRY, lu.strategies)
    published = analyses.published_means(lu, {"heart": {}}, ["uniform", "us-c", "qbc"], refs)
    assert published == {"heart": {"uniform": 0.8051, "us-c": None, "qbc": pytest.approx(0.8130)}}
    with pytest.raises(AuditError, match="--references is for usefulness and rank"):
        analyses.run_command("wtl", "lu2023", ["heart"], references=path)
