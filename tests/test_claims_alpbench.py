"""ALPBench's claims: each test on pipelines with known AUBCs (no replay), and the registry's input checks."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from audit.analysis.claims import alpbench as claims
from audit.analysis.claims import evaluate, format_claims
from audit.errors import AuditError

ALPHA = 0.05


def pipelines(means: dict[tuple[str, str], float], datasets=("a", "b", "c"), spread=0.01, n=10):
    """Pipelines whose AUBCs have the given means (the same on every data set), small noise."""
    learners = sorted({l for l, _ in means})
    strategies = sorted({q for _, q in means})
    r = claims.Pipelines(learners, strategies, list(datasets))
    rng = np.random.default_rng(0)
    for d in datasets:
        for (l, q), m in means.items():
            r.aubc[l, q, d] = m + spread * rng.standard_normal(n)
            r.first_last[l, q, d] = (np.full(n, 0.8) + 0.01 * rng.standard_normal(n), np.full(n, m))
    return r


def test_dominant_learners_support_and_contradiction():
    claim = {"learners": ["rf_entropy", "catboost", "tabpfn"]}
    strong = pipelines({("rf_entropy", "random"): 0.9, ("catboost", "random"): 0.9, ("knn_3", "random"): 0.7,
                        ("mlp", "random"): 0.6})
    verdict, figures = claims.dominant_learners(claim, strong, ALPHA)
    assert verdict == "support" and "rf_entropy 3" in figures and "tabpfn" in figures
    weak = pipelines({("rf_entropy", "random"): 0.6, ("catboost", "random"): 0.9, ("knn_3", "random"): 0.9,
                      ("mlp", "random"): 0.9})
    assert claims.dominant_learners(claim, weak, ALPHA)[0] == "contradiction"


def test_learner_over_strategy():
    learner_matters = pipelines({("x", "p"): 0.9, ("x", "q"): 0.88, ("y", "p"): 0.7, ("y", "q"): 0.69})
    assert claims.learner_over_strategy({}, learner_matters, ALPHA)[0] == "support"
    strategy_matters = pipelines({("x", "p"): 0.9, ("x", "q"): 0.7, ("y", "p"): 0.89, ("y", "q"): 0.69})
    assert claims.learner_over_strategy({}, strategy_matters, ALPHA)[0] == "contradiction"


def test_random_outperforms_counts_significant_wins_per_data_set():
    claim = {"learner": "svm_rbf", "others": ["catboost", "tabpfn"], "share": [0.2, 0.5], "min_datasets": 3}
    r = pipelines({("svm_rbf", "random"): 0.8, ("svm_rbf", "margin"): 0.8, ("svm_rbf", "entropy"): 0.8,
                   ("catboost", "random"): 0.8, ("catboost", "margin"): 0.9, ("catboost", "entropy"): 0.9})
    for q in ("margin", "entropy"):  # on one data set of three, Rand beats both for SVM
        r.aubc["svm_rbf", q, "a"] = r.aubc["svm_rbf", q, "a"] - 0.1
    verdict, figures = claims.random_outperforms(claim, r, ALPHA)
    assert verdict == "support" and "svm_rbf: Rand beats most others on 1 of 3" in figures
    assert "tabpfn: not tested" in figures
    r.datasets = ["a", "b"]
    assert claims.random_outperforms(claim, r, ALPHA)[0] == "not testable here"


def test_deteriorates_and_needs():
    r = pipelines({("knn_3", "core_set"): 0.7, ("rf_entropy", "margin"): 0.9})
    verdict, figures = claims.deteriorates({}, r, ALPHA)
    assert verdict == "support" and "knn_3 x core_set" in figures and "rf_entropy" not in figures
    assert "3 of 6 pipelines" in figures and "Holm p=" in figures
    # one pipeline a little below on one data set: significant alone, not among many pipelines
    rng = np.random.default_rng(1)
    many = claims.Pipelines(["l"], [f"q{i}" for i in range(200)], ["a"])
    for i in range(200):
        first = 0.8 + 0.01 * rng.standard_normal(10)
        many.first_last["l", f"q{i}", "a"] = (first, first + 0.01 + 0.01 * rng.standard_normal(10))
    first = 0.8 + 0.01 * rng.standard_normal(10)
    drop = np.array([-0.016, 0.004, -0.014, 0.002, -0.012, 0.004, -0.010, 0.0, -0.008, -0.010])  # mean -0.006
    many.first_last["l", "q0", "a"] = (first, first + drop)
    assert stats.ttest_rel(many.first_last["l", "q0", "a"][1], first, alternative="less").pvalue < ALPHA
    verdict, figures = claims.deteriorates({}, many, ALPHA)
    assert verdict == "inconclusive" and "none of the 200 pipelines" in figures and "1 below at an unadjusted" in figures
    verdict, figures = claims.needs({"openml_id": 334, "learners": ["tabpfn"]}, r, ALPHA)
    assert verdict == "not testable here" and "334 is not present" in figures and "tabpfn" in figures


def test_welch_p_of_constant_samples():
    assert claims.welch_p(np.ones(3), np.ones(3)) == 1.0 and claims.welch_p(np.ones(3), np.zeros(3)) == 0.0


def test_registry_refuses_unknown_papers_and_options():
    with pytest.raises(AuditError, match="no claims are registered for 'nope'"):
        evaluate("nope")
    with pytest.raises(AuditError, match="does not take --samples"):
        evaluate("alpbench", samples=3)
    assert format_claims([]).endswith("0 support, 0 contradiction, 0 inconclusive, 0 not testable here")


def test_the_default_data_sets_are_the_local_copies():
    assert claims.default_datasets() == ["australian", "breast", "diabetes", "german", "phishing", "phoneme",
                                         "spambase", "tic", "vehicle", "wdbc"]
