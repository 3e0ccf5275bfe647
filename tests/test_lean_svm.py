"""LeanSVC must be SVC bit for bit, or be SVC."""
import warnings

import numpy as np
import pytest
from sklearn.svm import SVC

from audit.engine.datasets import load_dataset
from audit.engine.models import ModelSpec
from audit.fast import svc
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


def test_a_binary_rbf_or_linear_models_labels_come_through_blas_and_are_libsvms(monkeypatch):
    """LeanSVC.predict: binary_codes for plain rows of a binary RBF or linear model; SVC.predict
    for other kernels, three classes and rows the checks would convert."""
    routed = []
    original = svc.binary_codes
    monkeypatch.setattr(svc, "binary_codes", lambda *args: routed.append(args[0]["kernel"]) or original(*args))
    X_all, y_all = _sonar()
    for params in ({"kernel": "rbf", "gamma": "auto"}, {"kernel": "linear", "C": 0.1}, {"kernel": "poly"}):
        reference, lean = _fit_both(params, X_all[:60], y_all[:60])
        for X in (X_all, X_all.astype(np.float32), X_all[:9].tolist()):
            assert np.array_equal(reference.predict(X), lean.predict(X))
    assert routed == ["rbf", "linear"]
    wine = load_dataset("wine")
    reference, lean = _fit_both({"kernel": "rbf"}, wine.X, wine.y)
    assert np.array_equal(reference.predict(wine.X), lean.predict(wine.X)) and routed == ["rbf", "linear"]


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


# --- the oracles' binary labels through BLAS (audit.fast.svc.binary_codes) -----------------

def _libsvm_fit(X, codes, kernel, gamma, C=1.0):
    from sklearn.svm import _libsvm

    _libsvm.set_verbosity_wrap(0)
    return _libsvm.fit(X, codes, svm_type=0, sample_weight=np.empty(0), class_weight=np.ones(2), kernel=kernel,
                       C=C, nu=0.5, probability=False, degree=3, shrinking=True, tol=1e-3, cache_size=200,
                       coef0=0.0, gamma=gamma, epsilon=0.1, max_iter=5000, random_seed=0)  # capped: any model will do


_ARGS = {"degree": 3, "coef0": 0.0, "cache_size": 200}


def test_blas_binary_codes_are_libsvms_labels_on_random_problems():
    """Both kernels, either class first in the training rows, features from 0.01 to 50 in scale,
    C from 0.1 to 10: the rows BLAS decides carry libsvm's labels, and with libsvm's labels
    for the undecided rows every label is libsvm's."""
    rng = np.random.default_rng(33)
    decided = 0
    for i in range(150):
        n, d, kernel = int(rng.integers(4, 90)), int(rng.integers(1, 60)), ("rbf", "linear")[i % 2]
        X = np.ascontiguousarray(rng.normal(size=(n, d)) * rng.uniform(0.01, 50))
        codes = (rng.random(n) < rng.uniform(0.2, 0.8)).astype(np.float64)
        codes[:2] = (1.0, 0.0) if i % 4 < 2 else (0.0, 1.0)
        gamma = float(1.0 / (d * X.var()) * rng.choice([0.1, 1.0, 10.0]))
        fitted = _libsvm_fit(X, codes, kernel, gamma, C=float(10.0 ** rng.integers(-1, 2)))
        X_new = np.ascontiguousarray(np.vstack([rng.normal(size=(30, d)) * X.std(), X]))
        args = {**_ARGS, "kernel": kernel}
        expected = np.asarray(svc.libsvm_predict_codes(args, fitted, X_new, gamma), dtype=np.intp)
        blas, undecided = svc.blas_binary_codes(X_new, fitted[1], fitted[3], fitted[4], kernel, gamma)
        keep = np.setdiff1d(np.arange(X_new.shape[0]), undecided)
        assert np.array_equal(blas[keep], expected[keep])
        assert np.array_equal(svc.binary_codes(args, fitted, X_new, gamma), expected)
        decided += keep.size
    assert decided > 0.99 * 150 * 30  # the bound leaves almost every row to BLAS


def test_a_row_on_the_decision_boundary_is_left_to_libsvm():
    """The row at 0 has decision value 0 exactly: BLAS leaves it; the row at 1e-17 is tiny but its
    terms are as tiny, so its sign is certain."""
    X, codes = np.array([[-1.0], [1.0]]), np.array([0.0, 1.0])
    fitted = _libsvm_fit(X, codes, "linear", 1.0)
    X_new = np.array([[0.0], [1e-17], [3.0], [-3.0]])
    blas, undecided = svc.blas_binary_codes(X_new, fitted[1], fitted[3], fitted[4], "linear", 1.0)
    assert undecided.tolist() == [0] and blas[1:].tolist() == [1, 1, 0]
    args = {**_ARGS, "kernel": "linear"}
    assert np.array_equal(svc.binary_codes(args, fitted, X_new, 1.0), svc.libsvm_predict_codes(args, fitted, X_new, 1.0))


def test_blas_labels_that_fail_their_self_check_leave_every_label_to_libsvm(monkeypatch):
    original = svc.blas_binary_codes

    def flipped(*args):
        codes, undecided = original(*args)
        return 1 - codes, undecided

    monkeypatch.setattr(svc, "blas_binary_codes", flipped)
    svc.blas_binary_codes_verified.cache_clear()
    try:
        with pytest.warns(FastPathFallbackWarning, match="BLAS binary SVC labels: its self-check found a difference"):
            assert svc.blas_binary_codes_verified() is False
        rng = np.random.default_rng(4)
        X = np.ascontiguousarray(rng.normal(size=(40, 3)))
        fitted = _libsvm_fit(X, (X[:, 0] > 0).astype(np.float64), "rbf", 0.3)
        args = {**_ARGS, "kernel": "rbf"}
        assert np.array_equal(svc.binary_codes(args, fitted, X, 0.3), svc.libsvm_predict_codes(args, fitted, X, 0.3))
    finally:
        svc.blas_binary_codes_verified.cache_clear()
    monkeypatch.undo()
    assert svc.blas_binary_codes_verified() is True
