"""The lean StandardScaler route (audit/fast/scaler.py) against StandardScaler itself, its
fallback, and the labeled-set views the oracles score candidate sets with (FeatureViews.views_for)."""
from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest
from sklearn.preprocessing import StandardScaler

from adapters import oracles
from audit.engine import runner as runner_module
from audit.engine.models import ModelSpec
from audit.engine.runner import _Features, run_trial
from audit.engine.splits import make_split
from audit.fast import scaler
from audit.fast.policy import FastPathFallbackWarning


def random_rows(rng: np.random.Generator, case: int) -> np.ndarray:
    """Rows of every kind a labeled set can have: 1 to 60 rows, scales from 1e-8 to 1e8,
    offsets far from zero, rounded values (ties), constant and near-constant columns."""
    n, d = int(rng.integers(1, 60)), int(rng.integers(1, 30))
    X = rng.normal(size=(n, d)) * 10 ** rng.uniform(-8, 8, size=d) + rng.normal(size=d) * 10 ** rng.uniform(-3, 6)
    if case % 3 == 0:
        X = np.round(X, 1)
    if case % 5 == 0:
        X[:, 0] = X[0, 0]
    if case % 7 == 0:
        X[:, -1] = X[0, -1] * (1 + 1e-15 * rng.normal(size=n))
    return X


def test_the_lean_route_gives_standard_scalers_statistics_and_transforms_bit_for_bit():
    rng = np.random.default_rng(7)
    for case in range(600):
        fit_rows = random_rows(rng, case)
        other = rng.normal(size=(5, fit_rows.shape[1])) * 100
        reference = StandardScaler().fit(fit_rows)
        mean, scale = scaler._statistics(fit_rows)
        assert np.array_equal(mean, reference.mean_) and np.array_equal(scale, reference.scale_), case
        assert np.array_equal(np.signbit(mean), np.signbit(reference.mean_)), case
        for got, X in zip(scaler.standard_scaled(fit_rows, fit_rows, other), (fit_rows, other)):
            expected = reference.transform(X)
            assert got.dtype == expected.dtype and np.array_equal(got, expected), case


@pytest.mark.parametrize("fit_rows", [np.arange(12, dtype=np.float32).reshape(4, 3),
                                      np.arange(12).reshape(4, 3),
                                      np.array([[1.0, np.nan], [2.0, 3.0], [4.0, 5.0]])],
                         ids=["float32", "integers", "nan"])
def test_inputs_the_route_does_not_cover_go_to_standard_scaler(fit_rows):
    reference = StandardScaler().fit(fit_rows)
    (got,) = scaler.standard_scaled(fit_rows, fit_rows)
    expected = reference.transform(fit_rows)
    assert got.dtype == expected.dtype and np.array_equal(got, expected, equal_nan=True)


def test_a_failed_self_check_warns_once_and_standard_scaler_scales(monkeypatch):
    monkeypatch.setattr(scaler, "_statistics", lambda X: (X.mean(axis=0), X.std(axis=0) + 1.0))
    scaler.lean_scaler_verified.cache_clear()
    try:
        X = np.random.default_rng(0).normal(size=(8, 3)) * 5
        with pytest.warns(FastPathFallbackWarning, match="lean-scaler: its self-check found a difference"):
            (got,) = scaler.standard_scaled(X, X)
        assert np.array_equal(got, StandardScaler().fit_transform(X))
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # once per process: no second warning
            scaler.standard_scaled(X, X)
    finally:
        scaler.lean_scaler_verified.cache_clear()


def blobs(n: int = 90, d: int = 4, seed: int = 5) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 2
    X = rng.normal(size=(n, d)) * [1.0, 30.0, 0.01, 5.0] + [0.0, 100.0, -3.0, 1.0] + y[:, None]
    return X, y.astype(np.int64)


@pytest.mark.parametrize("kind, test_fit", [("standard", "train"), ("minmax", "train"), ("standard", "test")])
def test_views_for_a_labeled_set_are_the_runners_views_after_that_round(lu2023, monkeypatch, kind, test_fit):
    """views_for against the runner's round scaled by scikit-learn's scalers (the lean route off)."""
    X, y = blobs()
    split = make_split(lu2023, y, 0)
    features = _Features("labeled", X, split, kind, test_fit)
    before = (features.X_train.copy(), features.X_test.copy())
    rng = np.random.default_rng(2)
    for size in (2, 20, 45):
        positions = np.sort(rng.choice(split.train.size, size=size, replace=False))
        with monkeypatch.context() as off:
            off.setattr(scaler, "lean_scaler_verified", lambda: False)
            runner = _Features("labeled", X, split, kind, test_fit)
            runner.update(positions)  # the runner's own round: the protocol's scaler, as scikit-learn fits it
        X_rows, X_test = features.views_for(positions, positions)
        assert np.array_equal(X_rows, runner.X_train[positions]) and np.array_equal(X_test, runner.X_test)
        X_all, _ = features.views_for(positions, slice(None))
        assert np.array_equal(X_all, runner.X_train)
        # the oracle's scorer predicts what a model fitted on the runner's views predicts
        spec = ModelSpec("svm-rbf", {"gamma": "scale"})
        scorer = oracles.Scorer(spec, 3, features, y[split.train], y[split.test])
        model = spec.build(3).fit(runner.X_train[positions], y[split.train][positions]) if size > 2 else None
        if model is not None:
            assert np.array_equal(scorer.predict(positions), model.predict(runner.X_test))
    assert np.array_equal(features.X_train, before[0]) and np.array_equal(features.X_test, before[1])


@pytest.mark.parametrize("strategy, scaling", [("bso", {"task": "labeled", "query": "train"}),
                                               ("us-c", {"task": "labeled", "query": "labeled"}),
                                               ("uniform", {"task": "train", "query": "train"})])
def test_a_trial_is_the_same_with_the_lean_scaler_off(lu2023, monkeypatch, strategy, scaling):
    """The runner's scalings (once a round in scope "labeled", once a trial in "train"; the task
    and the query model's) and the oracle's candidate sets, with and without the lean route."""
    X, y = blobs(50)
    protocol = dataclasses.replace(lu2023, scaling=scaling)
    routed = []
    lean_scaled = runner_module.standard_scaled
    monkeypatch.setattr(runner_module, "standard_scaled", lambda *a: routed.append(1) or lean_scaled(*a))
    lean = run_trial(protocol, "blobs", X, y, strategy, 1)
    assert len(routed) >= (1 if scaling["task"] == "train" else lean.rounds[-1].round)
    monkeypatch.setattr(scaler, "lean_scaler_verified", lambda: False)
    library = run_trial(protocol, "blobs", X, y, strategy, 1)
    assert lean.status == library.status == "ok"
    assert (lean.query_hash, lean.aubc, lean.aubc_by_metric) == (library.query_hash, library.aubc, library.aubc_by_metric)
