"""LeanLR: LogisticRegression's predictions, bit for bit, and its place in a libact replay."""
import dataclasses
import re
import warnings

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from adapters.libact import libact_model
from audit.engine.liblinear_ovr import OvRLogisticRegression
from audit.engine.models import ModelSpec
from audit.engine.runner import run_trial
from audit.fast import linear
from audit.fast.linear import LeanLR, fit_lbfgs_binary, lbfgs_binary_applies, minimize_lbfgsb
from audit.fast.policy import LIBRARY, FastPathFallbackWarning, fast_path_verified
from audit.protocols import load_protocol
from tests.conftest import assert_same_replay


def _fit_both(X, y, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return LogisticRegression(**params).fit(X, y), LeanLR(**params).fit(X, y)


def _assert_same(reference, lean, X_new):
    for name in ("coef_", "intercept_", "classes_", "n_iter_"):
        assert np.array_equal(getattr(reference, name), getattr(lean, name)), name
    for rows in (X_new, X_new[:1], X_new[2:3]):
        for method in ("decision_function", "predict", "predict_proba", "predict_log_proba"):
            expected, got = getattr(reference, method)(rows), getattr(lean, method)(rows)
            assert expected.dtype == got.dtype and np.array_equal(expected, got), method


def test_the_lean_lr_predicts_as_scikit_learns_on_random_problems():
    rng = np.random.default_rng(31)
    for i in range(25):
        n, d, k = int(rng.integers(8, 80)), int(rng.integers(1, 30)), int(rng.choice([2, 2, 3, 4]))
        X = rng.normal(size=(n, d)) * rng.uniform(0.1, 20)
        y = np.arange(n) % k
        rng.shuffle(y)
        labels = np.array([-1, 1, 5, 7])[y] if i % 2 else y
        params = {"C": float(10.0 ** rng.integers(-3, 3))}
        if i % 5 == 0 and k == 2:
            params["solver"] = "liblinear"
        reference, lean = _fit_both(X, labels, **params)
        assert lean.fast_path_ == "lean-lr"
        _assert_same(reference, lean, rng.normal(size=(9, d)) * 3)


def test_on_sonar_rows_one_at_a_time_the_predictions_are_identical(sonar):
    reference, lean = _fit_both(sonar.X[:150:3], sonar.y[:150:3], C=1.0)
    for row in sonar.X:
        assert np.array_equal(reference.predict(row.reshape(1, -1)), lean.predict(row.reshape(1, -1)))
    _assert_same(reference, lean, sonar.X)


@pytest.mark.parametrize("X_new", [np.ones((2, 3), dtype=np.float32), np.ones((2, 3), dtype=int),
                                   np.asfortranarray(np.ones((2, 3))), [[1.0, 2.0, 3.0]]],
                         ids=["float32", "int", "fortran", "list"])
def test_inputs_the_checks_would_change_or_accept_go_through_them(X_new):
    X = np.random.default_rng(1).normal(size=(30, 3))
    y = np.arange(30) % 2
    reference, lean = _fit_both(X, y)
    assert np.array_equal(reference.decision_function(X_new), lean.decision_function(X_new))
    assert np.array_equal(reference.predict(X_new), lean.predict(X_new))


@pytest.mark.parametrize("X_new", [np.full((2, 3), np.nan), np.ones((2, 4)), np.ones((0, 3))],
                         ids=["nan", "width", "empty"])
def test_bad_inputs_fail_with_scikit_learns_own_error(X_new):
    X = np.random.default_rng(1).normal(size=(30, 3))
    y = np.arange(30) % 2
    reference, lean = _fit_both(X, y)
    with pytest.raises(ValueError) as expected:
        reference.predict(X_new)
    message = str(expected.value).split("\n")[0].replace("LogisticRegression", "LeanLR")  # the class's own name
    with pytest.raises(ValueError, match=re.escape(message)):
        lean.predict(X_new)


def test_a_weighted_fit_is_scikit_learns_and_predicts_through_its_checks():
    X = np.random.default_rng(1).normal(size=(30, 3))
    y = np.arange(30) % 2
    lean = LeanLR().fit(X, y, sample_weight=np.linspace(0.5, 1.5, 30))
    assert lean.fast_path_ == LIBRARY
    reference = LogisticRegression().fit(X, y, sample_weight=np.linspace(0.5, 1.5, 30))
    assert np.array_equal(reference.decision_function(X), lean.decision_function(X))


def test_a_failed_self_check_warns_once_and_predicts_through_scikit_learn(monkeypatch):
    monkeypatch.setattr(LeanLR, "predict", lambda self, X: np.zeros(len(X), dtype=int))
    fast_path_verified.cache_clear()
    X = np.random.default_rng(1).normal(size=(30, 3))
    y = np.arange(30) % 2
    try:
        with pytest.warns(FastPathFallbackWarning, match="LeanLR"):
            assert LeanLR().fit(X, y).fast_path_ == LIBRARY
        with warnings.catch_warnings():
            warnings.simplefilter("error", FastPathFallbackWarning)
            assert LeanLR().fit(X, y).fast_path_ == LIBRARY
    finally:
        fast_path_verified.cache_clear()
    monkeypatch.undo()
    assert fast_path_verified(LeanLR) is True


def test_libacts_lr_wrapper_holds_a_lean_lr_with_the_specs_parameters():
    model = libact_model(ModelSpec("lr", {"C": 0.1}), 7)
    assert type(model.model) is LeanLR and model.model.C == 0.1 and model.model.random_state == 7


@pytest.mark.parametrize("strategy", ["albl", "us-nc"])
def test_a_libact_replay_with_the_lean_path_is_the_replay_without_it(sonar, monkeypatch, strategy):
    zhan = load_protocol("zhan2021")
    protocol = dataclasses.replace(zhan, budget_size=15, strategies={strategy: zhan.strategies[strategy]})
    fast = run_trial(protocol, "sonar", sonar.X, sonar.y, strategy, 2)
    monkeypatch.setattr(LeanLR, "_fast_path_verified", lambda self: False)
    library = run_trial(protocol, "sonar", sonar.X, sonar.y, strategy, 2)
    assert_same_replay(fast, library, "lean-lr+lean-svc", "lean-svc+library")


def test_the_lean_liblinear_fit_is_liblinears_own_on_random_problems():
    rng = np.random.default_rng(77)
    for i in range(20):
        n, d = int(rng.integers(4, 60)), int(rng.integers(1, 25))
        X = rng.normal(size=(n, d)) * rng.uniform(0.1, 30)
        y = np.r_[0, 1, rng.integers(0, 2, n - 2)] * (3 if i % 2 else 1) - (i % 3 == 0)  # labels 0/1, 2/-1, 3/0 ...
        params = {"solver": "liblinear", "C": float(10.0 ** rng.integers(-3, 3)),
                  "random_state": None if i % 4 == 0 else i, "fit_intercept": i % 5 != 0, "dual": i % 7 == 0,
                  "max_iter": 3 if i % 6 == 0 else 100}
        np.random.seed(i)  # random_state None: liblinear's seed comes from the global generator
        with warnings.catch_warnings(record=True) as expected_warnings:
            warnings.simplefilter("always")
            reference = LogisticRegression(**params).fit(X, y)
        expected_draw = np.random.randint(1 << 30)  # the global generator after the fit
        np.random.seed(i)
        with warnings.catch_warnings(record=True) as lean_warnings:
            warnings.simplefilter("always")
            lean = LeanLR(**params).fit(X, y)
        assert np.random.randint(1 << 30) == expected_draw
        assert lean.fast_path_ == "lean-lr" and lean._lean_liblinear_applies(X, np.unique(y).size)
        assert [str(w.message) for w in lean_warnings] == [str(w.message) for w in expected_warnings]
        _assert_same(reference, lean, rng.normal(size=(7, d)))


def test_the_lean_one_vs_rest_fit_is_ovr_logistic_regressions_on_random_problems():
    """Three to five classes, each random_state kind (an int, None: numpy's global generator,
    a RandomState: copied for every class), dual, intercept scaling, too few iterations."""
    rng = np.random.default_rng(78)
    for i in range(24):
        n, d, k = int(rng.integers(6, 70)), int(rng.integers(1, 25)), int(rng.integers(3, 6))
        X = rng.normal(size=(n, d)) * rng.uniform(0.1, 30)
        y = np.r_[np.arange(k), rng.integers(0, k, n - k)] * 2 - 1  # labels -1, 1, 3, ...
        params = {"solver": "liblinear", "C": float(10.0 ** rng.integers(-3, 3)), "dual": i % 4 == 0,
                  "intercept_scaling": 2.5 if i % 2 else 1.0, "max_iter": 3 if i % 6 == 0 else 100}
        seed = [lambda: None, lambda: i, lambda: np.random.RandomState(i)][i % 3]
        np.random.seed(i)
        with warnings.catch_warnings(record=True) as expected_warnings:
            warnings.simplefilter("always")
            reference = OvRLogisticRegression(random_state=seed(), **params).fit(X, y)
        expected_draw = np.random.randint(1 << 30)
        np.random.seed(i)
        with warnings.catch_warnings(record=True) as lean_warnings:
            warnings.simplefilter("always")
            lean = LeanLR(random_state=seed(), **params).fit(X, y)
        assert np.random.randint(1 << 30) == expected_draw
        assert lean.fast_path_ == "lean-lr" and lean._lean_liblinear_applies(X, np.unique(y).size)
        assert [str(w.message) for w in lean_warnings] == [str(w.message) for w in expected_warnings]
        for name in ("coef_", "intercept_", "n_iter_"):
            assert getattr(reference, name).dtype == getattr(lean, name).dtype, name
        _assert_same(reference, lean, rng.normal(size=(7, d)))


def test_a_random_state_generator_is_copied_for_each_class_and_left_as_it_was():
    X = np.random.default_rng(2).normal(size=(30, 4))
    y = np.arange(30) % 3
    generator = np.random.RandomState(9)
    LeanLR(solver="liblinear", random_state=generator).fit(X, y)
    assert generator.randint(1 << 30) == np.random.RandomState(9).randint(1 << 30)


def test_without_an_intercept_three_classes_fit_one_vs_rest_with_zero_intercepts():
    """scikit-learn <= 1.7 gave one zero intercept per class; LeanLR leaves this case to the library."""
    X = np.random.default_rng(2).normal(size=(30, 4))
    y = np.arange(30) % 3
    assert not LeanLR(solver="liblinear", fit_intercept=False)._lean_liblinear_applies(X, 3)
    reference = OvRLogisticRegression(solver="liblinear", fit_intercept=False).fit(X, y)
    assert reference.coef_.shape == (3, 4)
    assert np.array_equal(reference.intercept_, np.zeros(3))
    lean = LeanLR(solver="liblinear", fit_intercept=False).fit(X, y)
    assert np.array_equal(lean.coef_, reference.coef_)
    assert np.array_equal(lean.predict_proba(X), reference.predict_proba(X))


def test_a_one_vs_rest_fit_the_self_check_finds_different_sends_every_fit_to_the_library(monkeypatch):
    """The self-check covers the one-vs-rest route: break only that route, and LeanLR falls back."""
    honest = LeanLR._lean_liblinear_fit

    def off_by_one_ulp(self, X, classes, encoded):
        honest(self, X, classes, encoded)
        if self.classes_.size > 2:
            self.intercept_ = np.nextafter(self.intercept_, np.inf)

    monkeypatch.setattr(LeanLR, "_lean_liblinear_fit", off_by_one_ulp)
    fast_path_verified.cache_clear()
    X = np.random.default_rng(3).normal(size=(40, 5))
    y = np.arange(40) % 3
    try:
        with pytest.warns(FastPathFallbackWarning, match="LeanLR"):
            lean = LeanLR(solver="liblinear", random_state=1).fit(X, y)
        assert lean.fast_path_ == LIBRARY
        _assert_same(OvRLogisticRegression(solver="liblinear", random_state=1).fit(X, y), lean, X[:6])
    finally:
        fast_path_verified.cache_clear()
    monkeypatch.undo()
    assert fast_path_verified(LeanLR) is True


@pytest.mark.parametrize("params, X_kind", [({"solver": "liblinear", "class_weight": "balanced"}, "float64"),
                                            ({"solver": "liblinear", "l1_ratio": 1.0}, "float64"),
                                            ({"solver": "liblinear"}, "float32"),
                                            ({"solver": "liblinear", "class_weight": "balanced"}, "three classes")])
def test_what_the_lean_liblinear_fit_does_not_cover_is_logistic_regressions_fit(params, X_kind):
    rng = np.random.default_rng(5)
    X = rng.normal(size=(30, 4)).astype(np.float32 if X_kind == "float32" else np.float64)
    y = np.arange(30) % (3 if X_kind == "three classes" else 2)
    assert not LeanLR(**params)._lean_liblinear_applies(X, np.unique(y).size)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference = OvRLogisticRegression(random_state=0, **params).fit(X, y)  # one-vs-rest on three classes
        lean = LeanLR(random_state=0, **params).fit(X, y)
    _assert_same(reference, lean, rng.normal(size=(5, 4)))


def test_the_lr_spec_builds_a_lean_lr():
    model = ModelSpec("lr", {"solver": "liblinear"}).build(3)
    assert type(model) is LeanLR and model.solver == "liblinear" and model.random_state == 3


def test_alipys_eer_with_the_lean_lr_picks_what_it_picks_as_shipped(sonar):
    """zhan2021's EER refits a liblinear LR twice per candidate: the lean fit gives ALiPy's picks."""
    from tests.plain_libraries import plain_libraries

    zhan = load_protocol("zhan2021")
    protocol = dataclasses.replace(zhan, budget_size=3, strategies={"eer": zhan.strategies["eer"]})
    fast = run_trial(protocol, "sonar", sonar.X, sonar.y, "eer", 1)
    with plain_libraries():
        plain = run_trial(protocol, "sonar", sonar.X, sonar.y, "eer", 1)
    assert_same_replay(fast, plain, "lean-lr+lean-svc", "library")


@pytest.mark.parametrize("strategy", ["qbc", "albl", "us-nc"])
def test_libacts_lbfgs_lr_strategies_fit_through_the_lean_lbfgs_route_and_pick_as_without_it(sonar, strategy,
                                                                                             monkeypatch):
    """zhan2021's libact LR (lbfgs, two classes) is refitted every round by QBC's committee,
    ALBL's experts and uncertainty sampling: those fits take fit_lbfgs_binary, and the trial
    is the one LogisticRegression's own fit gives."""
    zhan = load_protocol("zhan2021")
    protocol = dataclasses.replace(zhan, budget_size=4, strategies={strategy: zhan.strategies[strategy]})
    lean_fits = []
    monkeypatch.setattr(linear, "fit_lbfgs_binary",
                        lambda model, X, y: lean_fits.append(type(model)) or fit_lbfgs_binary(model, X, y))
    fast = run_trial(protocol, "sonar", sonar.X, sonar.y, strategy, 2)
    assert lean_fits and set(lean_fits) == {LeanLR}
    monkeypatch.setattr(linear, "lbfgs_binary_applies", lambda model, X, y: False)
    lean_fits.clear()
    without = run_trial(protocol, "sonar", sonar.X, sonar.y, strategy, 2)
    assert not lean_fits
    assert_same_replay(fast, without, fast.fast_path, fast.fast_path)


def _lbfgs_both(X, y, **params):
    with warnings.catch_warnings(record=True) as expected_warnings:
        warnings.simplefilter("always")
        reference = LogisticRegression(**params).fit(X, y)
    with warnings.catch_warnings(record=True) as lean_warnings:
        warnings.simplefilter("always")
        lean = fit_lbfgs_binary(LogisticRegression(**params), X, y)
    assert [(w.category, str(w.message)) for w in lean_warnings] == \
        [(w.category, str(w.message)) for w in expected_warnings]
    return reference, lean


def test_the_lean_lbfgs_fit_is_logistic_regressions_fit_on_random_problems():
    rng = np.random.default_rng(44)
    for _ in range(20):
        n, d = int(rng.integers(6, 90)), int(rng.integers(1, 61))
        X = rng.normal(size=(n, d)) * rng.uniform(0.1, 20)
        y = np.r_[0, 1, rng.integers(0, 2, size=n - 2)] * 3 - 1  # labels -1 and 2
        params = {"C": float(10.0 ** rng.integers(-4, 5)), "max_iter": int(rng.choice([3, 200])),
                  "fit_intercept": bool(rng.integers(0, 2)), "random_state": 0}
        assert lbfgs_binary_applies(LogisticRegression(**params), X, y)
        reference, lean = _lbfgs_both(X, y, **params)
        assert set(vars(lean)) == set(vars(reference))
        for name in ("coef_", "intercept_", "classes_", "n_iter_"):
            expected, got = getattr(reference, name), getattr(lean, name)
            assert expected.dtype == got.dtype and expected.shape == got.shape and np.array_equal(expected, got), name
        X_new = rng.normal(size=(9, d))
        for method in ("decision_function", "predict", "predict_proba"):
            assert np.array_equal(getattr(reference, method)(X_new), getattr(lean, method)(X_new)), method


def _rosenbrock(x, scale):
    value = scale * float(np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2))
    grad = np.zeros_like(x)
    grad[:-1] = scale * (-400.0 * x[:-1] * (x[1:] - x[:-1] ** 2) - 2 * (1 - x[:-1]))
    grad[1:] += scale * 200.0 * (x[1:] - x[:-1] ** 2)
    return value, grad


@pytest.mark.parametrize("maxiter, ftol, gtol", [(3, 1e-12, 1e-5), (200, 64 * np.finfo(float).eps, 1e-4),
                                                 (15000, 1e-3, 1e-8), (200, 0.0, 0.0)])
def test_the_lean_lbfgsb_loop_is_scipys_minimize(maxiter, ftol, gtol):
    """Stops at maxiter, at the projected gradient and at the relative reduction of f: the same
    x, value, counts, status and message as SciPy's own."""
    from scipy import optimize
    rng = np.random.default_rng(5)
    for n in (2, 5, 30):
        x0, scale = rng.normal(size=n), float(rng.uniform(0.5, 3))
        options = {"maxiter": maxiter, "maxls": 50, "gtol": gtol, "ftol": ftol}
        expected = optimize.minimize(_rosenbrock, x0, args=(scale,), method="L-BFGS-B", jac=True, options=options)
        got = minimize_lbfgsb(_rosenbrock, x0, (scale,), options)
        assert np.array_equal(expected.x, got.x) and expected.fun == got.fun
        assert (expected.nit, expected.nfev, expected.status, expected.message) == \
            (got.nit, got.nfev, got.status, got.message)


def test_on_another_scipy_the_lean_lbfgsb_loop_is_scipys_minimize(monkeypatch):
    monkeypatch.setattr(linear.scipy, "__version__", "1.18.0")
    calls = []
    monkeypatch.setattr(linear, "_setulb", lambda *args: calls.append(args))
    result = minimize_lbfgsb(_rosenbrock, np.zeros(3), (1.0,), {"maxiter": 50, "maxls": 20, "gtol": 1e-5, "ftol": 1e-9})
    assert calls == [] and result.success and np.allclose(result.x, 1, atol=1e-3)


@pytest.mark.parametrize("params, X_kind", [({"C": np.inf}, "float64"), ({"class_weight": "balanced"}, "float64"),
                                            ({"solver": "newton-cg"}, "float64"), ({"warm_start": True}, "float64"),
                                            ({"l1_ratio": 0.5, "solver": "saga"}, "float64"),
                                            ({}, "float32"), ({}, "fortran"), ({}, "three classes")])
def test_what_the_lean_lbfgs_fit_does_not_cover_is_left_to_logistic_regression(params, X_kind):
    rng = np.random.default_rng(2)
    X = rng.normal(size=(30, 4))
    y = np.arange(30) % (3 if X_kind == "three classes" else 2)
    X = X.astype(np.float32) if X_kind == "float32" else np.asfortranarray(X) if X_kind == "fortran" else X
    assert not lbfgs_binary_applies(LogisticRegression(**params), X, y)


def test_the_lean_lbfgs_fit_rejects_bad_parameters_with_scikit_learns_error():
    X, y = np.random.default_rng(3).normal(size=(20, 3)), np.arange(20) % 2
    with pytest.raises(ValueError, match="'tol' parameter of LogisticRegression"):
        fit_lbfgs_binary(LogisticRegression(tol=-1.0), X, y)


def test_a_changed_loss_in_the_lean_lbfgs_fit_fails_the_grid_searchs_self_check(monkeypatch):
    from audit.fast import linear
    from audit.fast.grid import _agrees_with_grid_search

    assert _agrees_with_grid_search()
    original = linear._binary_loss_gradient

    def summed_the_other_way(coef, loss, X, target, l2_reg_strength):
        value, grad = original(coef, loss, X, target, l2_reg_strength)
        return value * (1 + 1e-15), grad

    monkeypatch.setattr(linear, "_binary_loss_gradient", summed_the_other_way)
    assert not _agrees_with_grid_search()
