"""LeanSVC must be SVC bit for bit, or be SVC."""
import warnings

import numpy as np
import pytest
from sklearn.svm import SVC

from audit.engine.datasets import load_dataset
from audit.engine.models import ModelSpec
from audit.fast.policy import LIBRARY, FastPathFallbackWarning, fast_path_verified
from audit.fast.svc import _FITTED, LeanSVC


def _same_svc(reference, lean, X, proba):
    for key in _FITTED:
        assert np.array_equal(np.asarray(getattr(reference, key)), np.asarray(getattr(lean, key))), key
    assert np.array_equal(reference.predict(X), lean.predict(X))
    assert np.array_equal(reference.decision_function(X), lean.decision_function(X))
    if proba:
        assert np.array_equal(reference.predict_proba(X), lean.predict_proba(X))


def _sonar():
    """sonar's rows shuffled (in file order its first 97 rows are one class)."""
    data = load_dataset("sonar")
    rows = np.random.default_rng(11).permutation(data.y.size)
    return data.X[rows], data.y[rows]


def _fit_both(params, X, y, **fit_kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        np.random.seed(0)
        reference = SVC(**params).fit(X, y, **fit_kwargs)
        np.random.seed(0)
        lean = LeanSVC(**params).fit(X, y, **fit_kwargs)
    return reference, lean


@pytest.mark.parametrize("name", ["sonar", "ionosphere", "wine"])
@pytest.mark.parametrize("params", [
    {"kernel": "rbf", "gamma": "auto", "probability": True, "random_state": 6211},  # lu2023's EER query model
    {"kernel": "rbf", "gamma": "scale"},
    {"kernel": "linear", "probability": True, "random_state": None},
    {"kernel": "poly", "degree": 2, "C": 3.0, "decision_function_shape": "ovo"},
])
def test_the_lean_svc_fits_and_predicts_as_scikit_learns_on_real_data(name, params):
    data = load_dataset(name)
    rows = np.random.default_rng(7).permutation(data.y.size)[:60]
    reference, lean = _fit_both(params, data.X[rows], data.y[rows])
    assert lean.fast_path_ == "lean-svc"
    _same_svc(reference, lean, data.X, params.get("probability", False))


def test_the_global_generator_is_drawn_from_as_scikit_learn_draws():
    """random_state=None: the libsvm seed comes from numpy's global generator, once a fit."""
    X_all, y_all = _sonar()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        np.random.seed(3)
        SVC(probability=True).fit(X_all[:50], y_all[:50])
        after_reference = np.random.random()
        np.random.seed(3)
        LeanSVC(probability=True).fit(X_all[:50], y_all[:50])
        after_lean = np.random.random()
    assert after_reference == after_lean


@pytest.mark.parametrize("params, fit_kwargs, X_dtype", [
    ({"class_weight": "balanced"}, {}, np.float64),
    ({}, {"sample_weight": np.linspace(1, 2, 60)}, np.float64),
    ({"kernel": "precomputed"}, {}, np.float64),
    ({}, {}, np.float32),
])
def test_cases_the_lean_path_does_not_cover_go_through_scikit_learn(params, fit_kwargs, X_dtype):
    X_all, y_all = _sonar()
    X = X_all[:60].astype(X_dtype)
    if params.get("kernel") == "precomputed":
        X = X @ X.T
    reference, lean = _fit_both(params, X, y_all[:60], **fit_kwargs)
    # float32 is converted, as scikit-learn converts it
    assert lean.fast_path_ == ("lean-svc" if X_dtype is np.float32 else LIBRARY)
    _same_svc(reference, lean, X, False)


def test_lean_predictions_on_inputs_the_checks_would_change_go_through_them():
    X_all, y_all = _sonar()
    reference, lean = _fit_both({"probability": True, "random_state": 1}, X_all[:60], y_all[:60])
    for X in (X_all[60:80].astype(np.float32), np.asfortranarray(X_all[60:80]), X_all[60:80].tolist()):
        assert np.array_equal(reference.predict_proba(X), lean.predict_proba(X))
    with pytest.raises(ValueError, match="features"):
        lean.predict(X_all[60:80, :5])
    with pytest.raises(ValueError, match="NaN"):
        lean.predict(np.full((2, X_all.shape[1]), np.nan))


def test_bad_parameters_and_one_class_fail_as_in_scikit_learn():
    X_all, y_all = _sonar()
    with pytest.raises(ValueError, match="kernel"):
        LeanSVC(kernel="cubic").fit(X_all[:40], y_all[:40])
    model = LeanSVC().fit(X_all[:40], y_all[:40])
    model.C = -1.0  # changed after a fit: validated again
    with pytest.raises(ValueError, match="'C' parameter"):
        model.fit(X_all[:40], y_all[:40])
    with pytest.raises(ValueError, match="greater than one"):
        LeanSVC().fit(X_all[:40], np.zeros(40, dtype=np.int64))


def test_a_failed_self_check_warns_once_and_sends_every_fit_through_scikit_learn(monkeypatch):
    original = LeanSVC._lean_fit

    def other_gamma(self, X, classes, codes):
        original(self, X, classes, codes)
        self._gamma = self._gamma * 1.0000001

    monkeypatch.setattr(LeanSVC, "_lean_fit", other_gamma)
    fast_path_verified.cache_clear()
    try:
        X_all, y_all = _sonar()
        with pytest.warns(FastPathFallbackWarning, match="LeanSVC: its self-check found a difference from SVC"):
            model = LeanSVC().fit(X_all[:60], y_all[:60])
        assert model.fast_path_ == LIBRARY
        _same_svc(SVC().fit(X_all[:60], y_all[:60]), model, X_all, False)
        with warnings.catch_warnings():
            warnings.simplefilter("error", FastPathFallbackWarning)  # once per process, not once a fit
            assert LeanSVC().fit(X_all[:60], y_all[:60]).fast_path_ == LIBRARY
    finally:
        fast_path_verified.cache_clear()
    monkeypatch.undo()
    assert fast_path_verified(LeanSVC) is True


def test_the_svm_specs_build_the_lean_svc():
    assert type(ModelSpec("svm-rbf", {"gamma": "auto"}).build(1)) is LeanSVC
    assert type(ModelSpec("svm-linear").build(1)) is LeanSVC
    assert type(ModelSpec("sklearn.svm.SVC").build(1)) is SVC  # a class path is taken as written


@pytest.mark.parametrize("bad", ["complex", "beyond float64"])
def test_features_svc_refuses_fail_with_scikit_learns_own_error(bad):
    """Not the real part, or an infinity, fitted in silence."""
    X_all, y_all = _sonar()
    X = X_all[:40] + 1j if bad == "complex" else X_all[:40].astype(np.longdouble) * np.longdouble("1e400")
    with pytest.raises(ValueError) as reference:
        SVC().fit(X, y_all[:40])
    with pytest.raises(ValueError) as lean:
        LeanSVC().fit(X, y_all[:40])
    assert str(lean.value) == str(reference.value)
