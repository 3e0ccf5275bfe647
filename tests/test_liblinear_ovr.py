"""audit/engine/liblinear_ovr.py: liblinear on three or more classes fits one-vs-rest, as
scikit-learn did before 1.8, so the protocols that name LR(liblinear) run on multi-class
data (zhan2021's EER and VR query models); binary fits stay scikit-learn's own, bit for bit."""
from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.multiclass import OneVsRestClassifier

from adapters.native import VarianceReduction
from adapters.testing import toy_pool
from audit.engine.liblinear_ovr import OvRLogisticRegression
from audit.engine.models import ModelSpec
from audit.fast.linear import LeanLR

LIBLINEAR = ModelSpec("lr", {"solver": "liblinear"})


def problem(n_classes, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(80, 5))
    y = rng.integers(0, n_classes, size=80)
    X[np.arange(80), y % 5] += 1.5  # each class a little apart
    return X, y


def test_todays_scikit_learn_refuses_what_the_papers_ran():
    X, y = problem(3)
    with pytest.raises(ValueError, match="liblinear"):
        LogisticRegression(solver="liblinear").fit(X, y)


def test_three_classes_are_fitted_one_vs_rest():
    X, y = problem(3)
    model = LIBLINEAR.build(0).fit(X, y)
    reference = OneVsRestClassifier(LogisticRegression(solver="liblinear", random_state=0)).fit(X, y)
    assert model.coef_.shape == (3, 5) and model.classes_.tolist() == [0, 1, 2]
    for k, estimator in enumerate(reference.estimators_):
        assert np.array_equal(model.coef_[k], estimator.coef_[0])
        assert model.intercept_[k] == estimator.intercept_[0]
    np.testing.assert_allclose(model.decision_function(X), reference.decision_function(X), rtol=0, atol=1e-12)
    np.testing.assert_allclose(model.predict_proba(X), reference.predict_proba(X), rtol=0, atol=1e-12)
    assert np.array_equal(model.predict(X), reference.predict(X))
    # normalised sigmoids (scikit-learn <= 1.7's "ovr"), not today's softmax of the same scores
    sigmoids = 1 / (1 + np.exp(-model.decision_function(X)))
    np.testing.assert_allclose(model.predict_proba(X), sigmoids / sigmoids.sum(axis=1, keepdims=True), atol=1e-12)
    np.testing.assert_allclose(model.predict_log_proba(X), np.log(model.predict_proba(X)))


@pytest.mark.parametrize("params", [{"solver": "liblinear"}, {"C": 0.1}])
def test_binary_fits_and_other_solvers_are_scikit_learns_own(params):
    for n_classes in (2, 3):
        X, y = problem(n_classes, seed=1)
        if n_classes == 3 and params.get("solver") == "liblinear":
            continue
        ours = OvRLogisticRegression(random_state=0, **params).fit(X, y)
        plain = LogisticRegression(random_state=0, **params).fit(X, y)
        for attribute in ("coef_", "intercept_", "n_iter_"):
            assert np.array_equal(getattr(ours, attribute), getattr(plain, attribute))
        assert np.array_equal(ours.predict_proba(X), plain.predict_proba(X))


def test_lean_lr_equals_it_on_three_classes():
    X, y = problem(3, seed=2)
    lean = LeanLR(solver="liblinear", random_state=0).fit(X, y)
    plain = OvRLogisticRegression(solver="liblinear", random_state=0).fit(X, y)
    assert lean.fast_path_ == "lean-lr"
    for method in ("decision_function", "predict", "predict_proba"):
        assert np.array_equal(getattr(lean, method)(X), getattr(plain, method)(X))


def test_class_path_logistic_regression_runs_on_three_classes():
    X, y = problem(3)
    model = ModelSpec("sklearn.linear_model.LogisticRegression", {"solver": "liblinear"}).build(0).fit(X, y)
    assert model.predict_proba(X).shape == (80, 3)


def test_variance_reduction_with_zhan2021s_liblinear_query_model_runs():
    """libact's VR labels each candidate 0..K-1 beside the -1/+1 labels: three classes."""
    X, y, y_true = toy_pool(30, 6)
    strategy = VarianceReduction(query_model=LIBLINEAR, random_state=0, sigma=0.1)
    picks = [int(strategy.query(X, y, None, 1, np.flatnonzero(y == -1))[0]) for _ in range(2)]
    assert all(y[p] == -1 for p in picks)
