"""LeanGridLR: GridSearchCV over LogisticRegression's C, bit for bit, and its place in a replay."""
import dataclasses
import warnings

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV

from audit.engine.models import ModelSpec
from audit.engine.runner import run_trial
from audit.fast.grid import LeanGridLR
from audit.fast.policy import LIBRARY, FastPathFallbackWarning, fast_path_verified
from audit.protocols import load_protocol
from tests.conftest import assert_same_replay

GRID = [10.0**k for k in range(-4, 5)]


def _both(X, y, grid=GRID, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference = GridSearchCV(LogisticRegression(max_iter=200, random_state=1, **params), {"C": grid},
                                 cv=3).fit(X, y)
        lean = LeanGridLR(LogisticRegression(max_iter=200, random_state=1, **params), {"C": grid}, cv=3).fit(X, y)
    return reference, lean


def _assert_identical(reference, lean, X_new):
    assert lean.best_index_ == reference.best_index_
    assert lean.best_params_ == reference.best_params_
    assert np.array_equal(lean.best_score_, reference.best_score_, equal_nan=True)
    for key in reference.cv_results_:
        if "time" not in key and key != "params":
            expected, got = np.asarray(reference.cv_results_[key]), np.asarray(lean.cv_results_[key])
            assert np.array_equal(expected, got, equal_nan=expected.dtype.kind == "f"), key
    for name in ("coef_", "intercept_", "n_iter_", "classes_"):
        assert np.array_equal(getattr(reference.best_estimator_, name), getattr(lean.best_estimator_, name)), name
    assert np.array_equal(reference.predict(X_new), lean.predict(X_new))
    assert np.array_equal(reference.decision_function(X_new), lean.decision_function(X_new))
    assert np.array_equal(reference.predict_proba(X_new), lean.predict_proba(X_new))


def test_the_lean_grid_search_is_grid_search_cv_bit_for_bit_on_random_problems():
    rng = np.random.default_rng(20)
    for _ in range(12):
        n, d, k = int(rng.integers(9, 60)), int(rng.integers(1, 8)), int(rng.choice([2, 2, 3]))
        X = rng.normal(size=(n, d)) * rng.uniform(0.5, 5)
        y = np.arange(n) % k  # every class in every training fold
        rng.shuffle(y)
        reference, lean = _both(X, y)
        assert lean.fast_path_ == "lean-grid-lr"
        _assert_identical(reference, lean, rng.normal(size=(7, d)))


def test_ties_are_broken_as_grid_search_cv_breaks_them():
    # Separable, well-spread data: many C values reach the same mean fold accuracy.
    rng = np.random.default_rng(3)
    X = np.vstack([rng.normal(-3, 1, size=(15, 2)), rng.normal(3, 1, size=(15, 2))])
    y = np.repeat([0, 1], 15)
    reference, lean = _both(X, y)
    means = reference.cv_results_["mean_test_score"]
    assert (means == means.max()).sum() > 1  # a tie, broken by grid order
    _assert_identical(reference, lean, X)
    reference, lean = _both(X, y, grid=GRID[::-1])
    _assert_identical(reference, lean, X)


def test_on_the_real_rows_of_a_replay_the_fits_are_identical(sonar):
    rng = np.random.default_rng(5)
    for size in (30, 90):
        rows = rng.choice(sonar.y.size, size=size, replace=False)
        if np.bincount(sonar.y[rows]).min() < 3:
            continue
        reference, lean = _both(sonar.X[rows], sonar.y[rows])
        assert lean.fast_path_ == "lean-grid-lr"
        _assert_identical(reference, lean, sonar.X)


def test_a_fold_without_both_classes_goes_to_grid_search_cv():
    rng = np.random.default_rng(8)
    X = rng.normal(size=(12, 3))
    y = np.zeros(12, dtype=int)
    y[0] = 1  # one row of class 1: two training folds hold class 0 only, their fits fail
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference = GridSearchCV(LogisticRegression(max_iter=200), {"C": GRID}, cv=3).fit(X, y)
        lean = LeanGridLR(LogisticRegression(max_iter=200), {"C": GRID}, cv=3).fit(X, y)
    assert lean.fast_path_ == LIBRARY
    _assert_identical(reference, lean, X)


@pytest.mark.parametrize("options", [{"scoring": "accuracy"}, {"n_jobs": 1}, {"refit": False},
                                     {"return_train_score": True}, {"param_grid": {"C": GRID, "tol": [1e-4]}}])
def test_options_the_lean_path_does_not_cover_go_through_grid_search_cv(options):
    X = np.random.default_rng(1).normal(size=(30, 3))
    y = np.arange(30) % 2
    params = {"param_grid": {"C": GRID}, **options}
    assert LeanGridLR(LogisticRegression(), cv=3, **params).fit(X, y).fast_path_ == LIBRARY


def test_bad_parameters_fail_as_in_grid_search_cv():
    X = np.random.default_rng(1).normal(size=(30, 3))
    y = np.arange(30) % 2
    for bad in ({"cv": "three"}, {"param_grid": 3}):
        params = {"param_grid": {"C": GRID}, "cv": 3, **bad}
        with pytest.raises(Exception) as expected:
            GridSearchCV(LogisticRegression(), **params).fit(X, y)
        with pytest.raises(type(expected.value)):
            LeanGridLR(LogisticRegression(), **params).fit(X, y)


def test_a_failed_self_check_warns_once_and_sends_every_fit_through_grid_search_cv(monkeypatch):
    original = LeanGridLR._fast_fit

    def wrong_index(self, X, y):
        original(self, X, y)
        self.best_index_ = (self.best_index_ + 1) % len(GRID)

    monkeypatch.setattr(LeanGridLR, "_fast_fit", wrong_index)
    fast_path_verified.cache_clear()
    X = np.random.default_rng(1).normal(size=(30, 3))
    y = np.arange(30) % 2
    try:
        with pytest.warns(FastPathFallbackWarning, match="LeanGridLR"):
            assert LeanGridLR(LogisticRegression(), {"C": GRID}, cv=3).fit(X, y).fast_path_ == LIBRARY
        with warnings.catch_warnings():
            warnings.simplefilter("error", FastPathFallbackWarning)  # warned once only
            assert LeanGridLR(LogisticRegression(), {"C": GRID}, cv=3).fit(X, y).fast_path_ == LIBRARY
    finally:
        fast_path_verified.cache_clear()
    monkeypatch.undo()
    assert fast_path_verified(LeanGridLR) is True


def test_the_lr_grid_spec_builds_the_lean_grid_search():
    model = ModelSpec("lr-grid").build(4)
    assert type(model) is LeanGridLR and model.cv == 3 and model.param_grid == {"C": GRID}
    assert model.estimator.max_iter == 200 and model.estimator.random_state == 4


@pytest.mark.parametrize("strategy", ["margin", "mcm"])
def test_a_replay_with_the_lean_path_is_the_replay_without_it(sonar, monkeypatch, strategy):
    zhan = load_protocol("zhan2021")
    protocol = dataclasses.replace(zhan, budget_size=12, strategies={strategy: zhan.strategies[strategy]})
    fast = run_trial(protocol, "sonar", sonar.X, sonar.y, strategy, 3)
    monkeypatch.setattr(LeanGridLR, "_fast_path_verified", lambda self: False)
    library = run_trial(protocol, "sonar", sonar.X, sonar.y, strategy, 3)
    assert_same_replay(fast, library, "lean-grid-lr+lean-svc", "lean-svc+library")
