"""Model-compatibility grids: Holm correction, column verdicts, lu2023 groups, end to end on sonar."""
from __future__ import annotations

import csv

import numpy as np
import pytest
from scipy import stats

from audit.analysis.compat import (
    NON_COMPATIBLE,
    PAPER_GROUPS,
    CompatRequest,
    analyse,
    format_grid,
    format_summary,
    grid_group,
    grid_protocol,
    judge_column,
    run_compat,
    strategy_id,
    summarise_grids,
)
from audit.analysis.stats import adjust_pvalues
from audit.engine.datasets import names
from audit.engine.models import BUILDERS, OPTIONAL_MODELS, ModelSpec, parse_model, split_specs
from audit.engine.runner import RoundRecord, TrialResult, run_trial
from audit.errors import AuditError
from audit.protocols import load_protocol


def column(diag, **others):
    return {"svm-rbf": dict(enumerate(diag)), **{q: dict(enumerate(v)) for q, v in others.items()}}


BASE = np.array([0.70, 0.74, 0.72, 0.78, 0.75, 0.71, 0.73, 0.77])
NOISE = np.array([0.004, -0.003, 0.002, -0.001, 0.003, -0.004, 0.001, -0.002])


def test_column_where_the_diagonal_is_best_and_beats_both_off_diagonal_cells():
    result = judge_column("svm-rbf", column(BASE + 0.03, lr=BASE + NOISE, rf=BASE - NOISE + 0.01))
    assert result["compatible_best"] is True and result["best_query_model"] == "svm-rbf"
    assert result["verdict"] == "compatible best, significant vs 2/2"
    raw = [stats.ttest_rel(BASE + NOISE, BASE + 0.03).pvalue, stats.ttest_rel(BASE - NOISE + 0.01, BASE + 0.03).pvalue]
    assert [c["p"] for c in result["comparisons"]] == pytest.approx(raw)
    assert [c["p_holm"] for c in result["comparisons"]] == pytest.approx(adjust_pvalues(raw))
    assert result["comparisons"][0]["mean_difference"] == pytest.approx(np.mean(NOISE) - 0.03)


def test_column_where_the_diagonal_is_best_but_one_difference_is_noise():
    result = judge_column("svm-rbf", column(BASE + 0.01, lr=BASE + np.roll(NOISE, 1), rf=BASE + 0.009 - NOISE * 3))
    assert result["compatible_best"] is True
    assert result["verdict"] == "compatible best, significant vs 1/2"


def test_column_where_a_non_compatible_query_model_is_better():
    lr, rf = BASE - 0.05 + np.roll(NOISE, 1), BASE + 0.002 + NOISE * 4
    result = judge_column("svm-rbf", column(BASE, lr=lr, rf=rf))
    assert result["compatible_best"] is False and result["best_query_model"] == "rf"
    p_holm = adjust_pvalues([stats.ttest_rel(lr, BASE).pvalue, stats.ttest_rel(rf, BASE).pvalue])[1]
    assert result["verdict"] == f"non-compatible rf query better, p = {p_holm:.3g} (Holm; not significant)"
    clear = judge_column("svm-rbf", column(BASE, lr=BASE + 0.02 + NOISE, rf=BASE - 0.01 + NOISE))
    assert clear["verdict"].startswith("non-compatible lr query better, p = ") and clear["verdict"].endswith(
        "(Holm; significant)")


def test_column_ties_go_to_the_diagonal_and_too_few_trials_are_not_judged():
    tie = judge_column("svm-rbf", column(BASE, lr=BASE, rf=BASE - 0.01 + NOISE))
    assert tie["compatible_best"] is True and tie["comparisons"][0]["p"] == 1.0
    few = judge_column("svm-rbf", column([0.7], lr=[0.8]))
    assert few["compatible_best"] is None and few["verdict"] == "too few paired trials to test"


def test_paper_groups_cover_lu2023s_26_binary_sets_22_of_them_compatible():
    assert set(PAPER_GROUPS) == set(names(task="binary"))
    assert sum(group != NON_COMPATIBLE for group, _ in PAPER_GROUPS.values()) == 22
    assert PAPER_GROUPS["sonar"] == ("compatible SVM best", "Figure 9")
    assert PAPER_GROUPS["banana"] == (NON_COMPATIBLE, "Figure 12")
    assert PAPER_GROUPS["splice"][0] == NON_COMPATIBLE  # named in Section 5.1
    assert PAPER_GROUPS["twonorm"] == ("compatible LR best", "Figure 8")
    assert PAPER_GROUPS["phishing"] == ("compatible RF best", "Figure 11")


def test_grid_group_is_where_the_grids_best_mean_lies():
    means = {(q, t): 0.7 for q in ("lr", "svm-rbf", "rf") for t in ("lr", "svm-rbf", "rf")}
    assert grid_group({**means, ("rf", "rf"): 0.8}) == ("compatible RF best", ("rf", "rf"))
    assert grid_group({**means, ("lr", "rf"): 0.8}) == (NON_COMPATIBLE, ("lr", "rf"))
    assert grid_group({**means, ("lr", "rf"): 0.8, ("svm-rbf", "svm-rbf"): 0.8}) == \
        ("compatible SVM best", ("svm-rbf", "svm-rbf"))


def synthetic_report(dataset, best):
    """A 3x3 grid report whose cell `best` has the highest mean."""
    models = ["lr", "svm-rbf", "rf"]
    results = {}
    for i, q in enumerate(models):
        for j, t in enumerate(models):
            shift = 0.05 if (q, t) == best else (0.01 if q == t else 0.0)
            rounds = [RoundRecord(1, 21, (q == "lr", ), 0.7, 0.7, 0.7, 0, 0)]
            results[(q, t)] = [TrialResult("p", dataset, strategy_id(q), s, "ok", float(v + shift), {}, rounds)
                               for s, v in enumerate(BASE + np.roll(NOISE, 3 * i + j))]
    report = analyse(results, models)
    report.update(dataset={"name": dataset}, trial_seeds=list(range(len(BASE))), paper_group=PAPER_GROUPS.get(dataset),
                  protocol={"name": "lu2023", "scale": "percent", "aubc_variant": "lu2023_code"})
    return report


def test_cross_data_set_summary_counts_the_diagonal_and_compares_groups_with_lu2023():
    reports = [synthetic_report("sonar", ("svm-rbf", "svm-rbf")),        # paper: compatible SVM best
               synthetic_report("banana", ("rf", "lr")),                  # paper: non-compatible best
               synthetic_report("ionosphere", ("lr", "lr"))]              # paper: compatible SVM best
    assert reports[0]["row_queries"][0] == {"query_model": "lr", "trials": 8, "identical": 8}
    summary = summarise_grids(reports)
    rows = {r["dataset"]: r for r in summary["datasets"]}
    assert rows["sonar"]["group"] == "compatible SVM best" and rows["sonar"]["matches_paper"] is True
    assert rows["banana"]["group"] == NON_COMPATIBLE and rows["banana"]["matches_paper"] is True
    assert rows["banana"]["columns_compatible_best"] == 2  # only the lr column has a better off-diagonal cell
    assert rows["ionosphere"]["group"] == "compatible LR best" and rows["ionosphere"]["matches_paper"] is False
    assert (summary["diagonal_best"], summary["matches_paper"], summary["compared"]) == (2, 2, 3)
    text = format_summary(summary)
    assert "diagonal best (the grid's best mean is a compatible pair) on 2 of 3 data sets (lu2023: 22 of 26)" in text
    assert "compatible SVM best (Figure 9)" in text and "non-compatible best (Figure 12)" in text


def test_bad_input_fails_before_any_work(tmp_path):
    store = tmp_path / "store.sqlite"
    for kwargs, message in [({"models": ["lr"]}, "at least two models"),
                            ({"models": ["lr", "lr", "rf"]}, "named twice"),
                            ({"models": ["lr", "nosuchmodel"]}, "unknown model 'nosuchmodel'"),
                            ({"strategy": "us-entropy"}, "unknown --strategy"),
                            ({"datasets": ["sonar", "nope"]}, "nope"),
                            ({"datasets": ["iris"]}, "binary")]:
        request = CompatRequest("lu2023", **{"datasets": ["sonar"], "store": store, "out": tmp_path / "out", **kwargs})
        with pytest.raises(AuditError, match=message):
            run_compat(request, log=lambda line: None)
    assert not store.exists() and not (tmp_path / "out").exists()


def test_grid_end_to_end_on_sonar_then_a_rerun_reuses_every_trial(tmp_path, sonar, lu2023):
    request = CompatRequest("lu2023", ["sonar"], models=["lr", "svm-rbf"], trials=3, store=tmp_path / "s.sqlite",
                            out=tmp_path / "out", progress=False)
    lines = []
    (report,), summary = run_compat(request, log=lines.append)
    assert summary is None
    # A row (query model) per trial: 2 rows x 3 seeds cover the 12 cells.
    assert any("12 cells to run as 6 row trials" in line for line in lines), lines
    out = tmp_path / "out"
    with open(out / "compat.csv") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ["query_model", "task_model", "n", "mean", "sd", "ci95_low", "ci95_high"]
    assert [(r["query_model"], r["task_model"], r["n"]) for r in rows] == [
        ("lr", "lr", "3"), ("lr", "svm-rbf", "3"), ("svm-rbf", "lr", "3"), ("svm-rbf", "svm-rbf", "3")]
    assert (out / "compat.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "![query x task heatmap](compat.png)" in (out / "report.md").read_text()
    assert all(r["ran"] == 6 for r in report["runs"].values())
    # A row's queries depend only on its query model, never on the task model it is scored with.
    assert report["row_queries"] == [{"query_model": "lr", "trials": 3, "identical": 3},
                                     {"query_model": "svm-rbf", "trials": 3, "identical": 3}]
    # The SVM diagonal is lu2023's US-C, trial by trial.
    seed = report["trial_seeds"][0]
    us_c = run_trial(lu2023, "sonar", sonar.X, sonar.y, "us-c", seed)
    assert [us_c.aubc] == [float(a) for a in _per_trial(out, "svm-rbf", "svm-rbf", seed)]
    assert "task lr: " in format_grid(report) and "lu2023: compatible SVM best (Figure 9)" in format_grid(report)

    (again,), _ = run_compat(request, log=lambda line: None)
    assert all(r["ran"] == 0 and r["reused"] == 6 for r in again["runs"].values())
    assert again["cells"] == report["cells"]


def _per_trial(out, query, task, seed):
    with open(out / "per_trial.csv") as f:
        return [r["aubc"] for r in csv.DictReader(f)
                if (r["query_model"], r["task_model"], r["trial_seed"]) == (query, task, str(seed))]


def test_a_larger_grid_reuses_the_cells_of_a_smaller_one(tmp_path, sonar):
    request = CompatRequest("lu2023", ["sonar"], models=["lr", "knn"], trials=2, store=tmp_path / "s.sqlite",
                            out=tmp_path / "out", progress=False)
    (small,), _ = run_compat(request, log=lambda line: None)
    request.models = ["lr", "knn", "lda"]
    (large,), _ = run_compat(request, log=lambda line: None)
    # lr and knn columns: only the new lda query row runs; the lda column runs whole.
    assert {t: (r["ran"], r["reused"]) for t, r in large["runs"].items()} == \
        {"lr": (2, 4), "knn": (2, 4), "lda": (6, 0)}
    assert [c for c in large["cells"] if c["query_model"] != "lda" and c["task_model"] != "lda"] == small["cells"]


def test_a_grid_holds_the_models_of_an_optional_extra_only_when_named():
    assert {"torch-linear", "torch-mlp", "xgboost", "catboost", "tabpfn", "tabnet"} <= OPTIONAL_MODELS
    lr = ModelSpec("lr")
    plain = grid_protocol(load_protocol("lu2023"), "lr", {"lr": lr}, "native.uncertainty")
    assert set(plain.strategies) == {strategy_id(q) for q in BUILDERS if q not in OPTIONAL_MODELS}
    named = grid_protocol(load_protocol("lu2023"), "lr", {"lr": lr, "xgboost": ModelSpec("xgboost")},
                          "native.uncertainty")
    assert set(named.strategies) - set(plain.strategies) == {strategy_id("xgboost")}


def test_model_specs_are_read_as_names_calls_or_scikit_learn_class_paths():
    assert split_specs("lr, knn(n_neighbors=3, weights='distance'),sklearn.naive_bayes.GaussianNB") == \
        ["lr", "knn(n_neighbors=3, weights='distance')", "sklearn.naive_bayes.GaussianNB"]
    assert parse_model("knn(n_neighbors=3, weights='distance')") == \
        ModelSpec("knn", {"n_neighbors": 3, "weights": "distance"})
    tree = parse_model("sklearn.tree.DecisionTreeClassifier(max_depth=3)").build(6211)
    assert type(tree).__name__ == "DecisionTreeClassifier" and tree.get_params()["random_state"] == 6211
    assert tree.get_params()["max_depth"] == 3
    assert type(parse_model("sklearn.naive_bayes.GaussianNB").build(1)).__name__ == "GaussianNB"
    for text, message in [("knn(3)", "cannot read the parameters"), ("knn(k=len)", "cannot read the parameters"),
                          ("knn(p=0)", "'p' parameter"), ("knn(leaf=1)", "unexpected keyword argument 'leaf'"),
                          ("sklearn.nope.Model", "scikit-learn has no such class"), ("k nn", "cannot read model spec"),
                          ("sklearn.linear_model.LinearRegression", "not a scikit-learn classifier")]:
        with pytest.raises(AuditError, match=message):
            parse_model(text)


def test_a_grid_of_written_out_specs_scores_them_as_their_own_replays(tmp_path, sonar, lu2023):
    """Specs with parameters and class paths are grid models like the named ones; the
    GaussianNB diagonal equals a replay with GaussianNB as task model queried by its own margin."""
    import dataclasses

    models = ["knn(n_neighbors=3)", "sklearn.naive_bayes.GaussianNB"]
    request = CompatRequest("lu2023", ["sonar"], models=models, trials=2, store=tmp_path / "s.sqlite",
                            out=tmp_path / "out", progress=False)
    (report,), _ = run_compat(request, log=lambda line: None)
    with open(tmp_path / "out" / "compat.csv") as f:
        assert [(r["query_model"], r["task_model"], r["n"]) for r in csv.DictReader(f)] == \
            [(q, t, "2") for q in models for t in models]
    assert report["model_specs"] == {"knn(n_neighbors=3)": "knn(n_neighbors=3)",
                                     "sklearn.naive_bayes.GaussianNB": "sklearn.naive_bayes.GaussianNB()"}
    nb = ModelSpec("sklearn.naive_bayes.GaussianNB")
    own = dataclasses.replace(lu2023, task_model=nb, strategies={
        "us-nb": dataclasses.replace(lu2023.strategy("us-c"), id="us-nb")})
    seed = report["trial_seeds"][0]
    assert [run_trial(own, "sonar", sonar.X, sonar.y, "us-nb", seed).aubc] == \
        [float(a) for a in _per_trial(tmp_path / "out", models[1], models[1], seed)]
    (again,), _ = run_compat(request, log=lambda line: None)
    assert all(r["ran"] == 0 for r in again["runs"].values())
