"""A LogisticRegression that predicts exactly like scikit-learn's, without its per-call input checks.

libact's ALBL scores its reward every round by predicting the label of every queried row
one row at a time (``model.predict(x.reshape(1, -1))``): about 7,600 predictions per
zhan2021 sonar trial, each spending most of its time in ``validate_data`` on a 1-by-60
array. :class:`LeanLR` is a ``LogisticRegression`` fitted by scikit-learn's own ``fit``
whose ``decision_function`` (and so ``predict`` and ``predict_proba``) skips the input
checks for inputs those checks would pass unchanged (a non-empty 2-D float64 ndarray of
finite numbers of the fitted width) and computes the same ``X @ coef_.T + intercept_``
through scikit-learn's ``safe_sparse_dot``; ``predict`` takes the same class indices from
the scores. Every prediction is bit-identical.

ALiPy's expected error reduction under zhan2021 refits a liblinear LR twice per candidate
per round (about 11,000 fits per sonar trial), and most of each fit was scikit-learn's
Python around liblinear (input and target checks, the label encoder, the class weights).
For a binary liblinear fit of the default penalty on float64 rows (no class or sample
weights, no callbacks) LeanLR calls liblinear's ``train_wrap`` itself with the arguments
``_fit_liblinear`` hands it (labels encoded as 0/1, unit class and sample weights, the
same seed drawn from ``random_state``, the same solver type, bias and tolerance), so the
coefficients, intercept and iteration count are liblinear's own. On three or more classes
(with an intercept) it makes the same calls as ``OvRLogisticRegression.fit``'s
``OneVsRestClassifier``, one binary problem per class: libact's variance reduction
(zhan2021's VR) refits on a third, hypothetical label for every candidate, about 5,500
one-vs-rest fits per sonar trial, each three ``LogisticRegression`` fits behind a label
binariser, clones and joblib. A binary lbfgs fit (libact's LR under QBC, ALBL and
uncertainty sampling: hundreds a trial, refitted every round) goes through
:func:`fit_lbfgs_binary` below. Every other fit is ``OvRLogisticRegression``'s.

zhan2021's grid-searched query model (:mod:`audit.fast.grid`) fits about 2,900 binary
lbfgs LogisticRegressions per sonar trial; :func:`fit_lbfgs_binary` fits one with the calls
``LogisticRegression.fit`` and ``_logistic_regression_path`` make for it (the same
``scipy.optimize.minimize`` call, options and starting point, the same loss object's pointwise
loss and penalty), without their input checks, callback context and array-API look-ups (two
per loss evaluation, about 55,000 evaluations per trial); :func:`minimize_lbfgsb` drives
SciPy's own L-BFGS-B routine with ``minimize``'s loop, without its wrappers around each of
those evaluations.

It follows :mod:`audit.fast.policy` (supported scikit-learn releases, LogisticRegression's
own parameter and input validation, a once-per-process self-check); its fast path is the
lean liblinear or lbfgs fit when one applies and the prediction route, taken after a fit
without ``sample_weight`` on plain inputs.
"""
from __future__ import annotations

import copy
import warnings
from typing import Callable

import numpy as np
import scipy
from scipy import optimize
from scipy.special import expit
from sklearn._loss.loss import HalfBinomialLoss
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.linear_model._linear_loss import LinearModelLoss
from sklearn.linear_model._logistic import _LOGISTIC_SOLVER_CONVERGENCE_MSG
from sklearn.utils.extmath import safe_sparse_dot
from sklearn.utils.fixes import _get_additional_lbfgs_options_dict
from sklearn.utils.optimize import _check_optimize_result

from audit.engine.liblinear_ovr import OvRLogisticRegression
from audit.fast.policy import FastPathMixin, native_seed, release_in, validate_params_once

try:  # SciPy's private L-BFGS-B routine and messages, for minimize_lbfgsb
    from scipy.optimize._lbfgsb import setulb as _setulb
    from scipy.optimize._lbfgsb_py import status_messages as _LBFGSB_STATUS
    from scipy.optimize._lbfgsb_py import task_messages as _LBFGSB_TASK
except ImportError:
    _setulb = None

SUPPORTED_SCIPY = ((1, 17), (1, 18))  # from, up to not including: the releases whose _minimize_lbfgsb loop it makes

_LIBLINEAR_MAX_X = 1e30  # LogisticRegression refuses liblinear beyond this value (a frozen fit)


class LeanLR(FastPathMixin, OvRLogisticRegression):
    """``LogisticRegression`` (liblinear one-vs-rest on 3+ classes, as `lr` builds it) with lean
    predictions (see the module docstring)."""

    fast_path_name = "lean-lr"

    def _fast_options(self, X, y, sample_weight) -> bool:
        return sample_weight is None

    def _fast_fit(self, X: np.ndarray, y: np.ndarray) -> None:
        classes, encoded = np.unique(y, return_inverse=True)
        if self._lean_liblinear_applies(X, classes.size):
            self._lean_liblinear_fit(X, classes, encoded)
        elif lbfgs_binary_applies(self, X, y):
            fit_lbfgs_binary(self, X, y)
        else:
            OvRLogisticRegression.fit(self, X, y)  # scikit-learn's own fit: only the predictions are lean

    def _lean_liblinear_applies(self, X: np.ndarray, n_classes: int) -> bool:
        """The options of LogisticRegression.fit (two classes) and OvRLogisticRegression.fit (three
        or more, with an intercept: without one its stacking fails) whose liblinear calls the lean
        fit makes alike."""
        return (self.solver == "liblinear" and self.penalty == "deprecated" and type(self.l1_ratio) in (int, float)
                and self.l1_ratio == 0 and np.isfinite(self.C) and self.class_weight is None and self.n_jobs is None
                and self.verbose == 0 and not getattr(self, "_skl_callbacks", None) and X.dtype == np.float64
                and (not self.fit_intercept or self.intercept_scaling > 0)
                and (n_classes == 2 or (n_classes > 2 and self.fit_intercept)) and not np.max(X) > _LIBLINEAR_MAX_X)

    def _lean_liblinear_fit(self, X: np.ndarray, classes: np.ndarray, encoded: np.ndarray) -> None:
        """LogisticRegression.fit's liblinear branch and ``_fit_liblinear`` for the case above:
        the same ``train_wrap`` calls with the same arguments, in the same order of draws
        (``classes`` and ``encoded``: ``np.unique(y, return_inverse=True)``).

        Three or more classes: OvRLogisticRegression.fit's OneVsRestClassifier, one binary
        problem per class in sorted order (that class 1, the others 0), each fitted by a clone
        of the estimator, whose ``random_state`` is a deep copy of this one's (an int, a copy of
        a RandomState: the same seed for every class; None: successive draws from numpy's
        global generator); coefficients, intercepts and iteration counts stacked in class order.
        """
        X = np.ascontiguousarray(X)
        self.n_features_in_ = X.shape[1]
        self.__dict__.pop("feature_names_in_", None)  # an array has none, as validate_data resets it
        self.classes_ = classes
        if self.classes_.size == 2:
            raw_coef, self.n_iter_ = self._train_liblinear(X, encoded, native_seed(self.random_state))
            if self.fit_intercept:
                self.coef_, self.intercept_ = raw_coef[:, :-1], self.intercept_scaling * raw_coef[:, -1]
            else:
                self.coef_, self.intercept_ = raw_coef, 0.0
            return
        fits = [self._train_liblinear(X, encoded == k, native_seed(copy.deepcopy(self.random_state)))
                for k in range(self.classes_.size)]
        self.coef_ = np.vstack([raw_coef[:, :-1] for raw_coef, _ in fits])
        self.intercept_ = np.concatenate([self.intercept_scaling * raw_coef[:, -1] for raw_coef, _ in fits])
        self.n_iter_ = np.concatenate([n_iter for _, n_iter in fits])

    def _train_liblinear(self, X: np.ndarray, binary: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
        """``_fit_liblinear``'s ``train_wrap`` call on labels ``binary`` (0/1, or False/True) with its
        arguments (unit class and sample weights), and its convergence warning."""
        from sklearn.svm import _liblinear as liblinear
        from sklearn.svm._base import _get_liblinear_solver_type

        bias = self.intercept_scaling if self.fit_intercept else -1.0
        liblinear.set_verbosity_wrap(0)
        raw_coef, n_iter = liblinear.train_wrap(
            X, np.require(binary.astype(np.float64), requirements="W"), False,
            _get_liblinear_solver_type("ovr", "l2", "logistic_regression", self.dual), self.tol, bias, self.C,
            np.ones(2, dtype=np.float64), self.max_iter, seed, 0.1, np.ones(X.shape[0], dtype=np.float64))
        if max(n_iter) >= self.max_iter:
            warnings.warn("Liblinear failed to converge, increase the number of iterations.", ConvergenceWarning)
        return raw_coef, n_iter

    @classmethod
    def _agrees_with_parent(cls) -> bool:
        return _agrees_with_lr()

    def _plain(self, X) -> bool:
        """Would ``validate_data(self, X, reset=False)`` return X itself, unchanged, without a warning?"""
        return (self.__dict__.get("fast_path_") == self.fast_path_name and type(X) is np.ndarray
                and X.dtype == np.float64 and X.ndim == 2 and X.shape[0] > 0
                and X.shape[1] == self.n_features_in_ and bool(np.isfinite(X).all()))

    def decision_function(self, X):
        if not self._plain(X):
            return super().decision_function(X)
        return lean_decision_function(self, X)

    def predict(self, X):
        if not self._plain(X):
            return super().predict(X)
        return lean_predict(self, X)

    def predict_proba(self, X):
        if not (self._plain(X) and self.classes_.size == 2):
            return super().predict_proba(X)
        # _predict_proba_lr for two classes: the logistic of the decision values, as columns (1 - p, p)
        prob = expit(lean_decision_function(self, X))
        return np.stack([1 - prob, prob], axis=1)


def lbfgs_binary_applies(model: LogisticRegression, X: np.ndarray, y: np.ndarray) -> bool:
    """Does :func:`fit_lbfgs_binary` make ``model.fit(X, y)``'s calls: a plain LogisticRegression
    or LeanLR (whose fit of two classes is LogisticRegression's)
    (lbfgs, the default L2 penalty at a finite C, no class weights, no warm start, no
    verbosity, no callbacks) on C-ordered finite float64 rows with exactly two classes? The
    caller has checked the rest of :func:`audit.fast.policy.plain_inputs`."""
    return (type(model) in (LogisticRegression, LeanLR) and model.solver == "lbfgs" and model.penalty == "deprecated"
            and type(model.l1_ratio) in (int, float) and model.l1_ratio == 0
            and type(model.C) in (int, float) and 0 < model.C < np.inf and model.class_weight is None
            and not model.warm_start and model.n_jobs is None and model.verbose == 0
            and not getattr(model, "_skl_callbacks", None)
            and X.dtype == np.float64 and X.flags.c_contiguous and np.unique(y).size == 2)


def fit_lbfgs_binary(model: LogisticRegression, X: np.ndarray, y: np.ndarray) -> LogisticRegression:
    """``model.fit(X, y)`` for the case of :func:`lbfgs_binary_applies`: LogisticRegression's
    parameter validation (once per parameter values), then ``_logistic_regression_path``'s
    lbfgs branch for two classes (targets 1.0 for ``classes_[1]``, else 0.0; a zero start;
    ``l2_reg_strength = 1 / (C * n_samples)``), and the fitted attributes as fit sets them."""
    validate_params_once(LogisticRegression, {name: getattr(model, name) for name in LogisticRegression._parameter_constraints})
    classes = np.unique(y)
    target = np.ones(y.shape, dtype=X.dtype)
    target[~(y == classes[1])] = 0.0
    loss = LinearModelLoss(base_loss=HalfBinomialLoss(), fit_intercept=model.fit_intercept)
    n_features = X.shape[1]
    result = minimize_lbfgsb(
        _binary_loss_gradient, np.zeros(n_features + int(model.fit_intercept), dtype=X.dtype),
        args=(loss, X, target, 1.0 / (model.C * X.shape[0])),
        options={"maxiter": model.max_iter, "maxls": 50, "gtol": model.tol, "ftol": 64 * np.finfo(float).eps})
    n_iter = _check_optimize_result("lbfgs", result, model.max_iter, extra_warning_msg=_LOGISTIC_SOLVER_CONVERGENCE_MSG)
    coef = np.stack([np.asarray(result.x.copy(order="K"), dtype=X.dtype)])[0, ...]
    model.n_features_in_ = n_features
    model.__dict__.pop("feature_names_in_", None)  # an array has none, as validate_data resets it
    model.classes_ = classes
    model.n_iter_ = np.asarray([n_iter], dtype=np.int32)
    if model.fit_intercept:
        model.intercept_, model.coef_ = coef[-1:], coef[:-1][None, :]
    else:
        model.intercept_, model.coef_ = np.zeros(1, dtype=X.dtype), coef[None, :]
    return model


def minimize_lbfgsb(fun_and_grad: Callable, x0: np.ndarray, args: tuple, options: dict) -> optimize.OptimizeResult:
    """``optimize.minimize(fun_and_grad, x0, args, method="L-BFGS-B", jac=True, options=options)``
    for an unbounded float64 problem without callback: SciPy's own ``setulb`` routine driven by
    the loop of ``_minimize_lbfgsb`` (the same workspace, the same f and g at each requested x,
    the same iteration and evaluation counts and stopping rules), without the wrappers around
    each evaluation (``ScalarFunction``, ``MemoizeJac``: about 40% of a sonar-sized fit).

    Where SciPy is not a release this loop was written from (:data:`SUPPORTED_SCIPY`), its
    own ``minimize`` runs. Returns ``x``, ``fun``, ``nit``, ``nfev``, ``status`` and ``message``
    (what scikit-learn's ``_check_optimize_result`` reads)."""
    if _setulb is None or not release_in(scipy.__version__, SUPPORTED_SCIPY):
        return optimize.minimize(fun_and_grad, x0, method="L-BFGS-B", jac=True, args=args, callback=None,
                                 options={**options, **_get_additional_lbfgs_options_dict("iprint", -1)})
    maxcor, maxfun = 10, 15000  # _minimize_lbfgsb's defaults (sklearn passes neither)
    maxiter, maxls = options["maxiter"], options["maxls"]
    factr, pgtol = options["ftol"] / np.finfo(float).eps, options["gtol"]
    x = np.array(np.asarray(x0).ravel(), dtype=np.float64)
    n = x.size
    lower, upper, bound_kinds = np.zeros(n, np.float64), np.zeros(n, np.float64), np.zeros(n, np.int32)
    wa = np.zeros(2 * maxcor * n + 5 * n + 11 * maxcor * maxcor + 8 * maxcor, np.float64)
    iwa, task, ln_task = np.zeros(3 * n, np.int32), np.zeros(2, np.int32), np.zeros(2, np.int32)
    lsave, isave, dsave = np.zeros(4, np.int32), np.zeros(44, np.int32), np.zeros(29, np.float64)
    # ScalarFunction evaluates at x0 when built, and again only at an x unequal to the last one
    evaluated_at = x.copy()
    value, grad = fun_and_grad(x.copy(), *args)
    nfev, n_iterations = 1, 0
    f, g = np.array(0.0, dtype=np.float64), np.zeros(n, np.float64)
    while True:
        g = g.astype(np.float64)
        _setulb(maxcor, x, lower, upper, bound_kinds, f, g, factr, pgtol, wa, iwa, task, lsave, isave, dsave,
                maxls, ln_task)
        if task[0] == 3:  # FG: the value and gradient at x
            if not (x == evaluated_at).all():  # np.array_equal of two float64 vectors of one length
                evaluated_at = x.copy()
                value, grad = fun_and_grad(x.copy(), *args)
                nfev += 1
            f, g = value, np.atleast_1d(grad)
        elif task[0] == 1:  # NEW_X: an iteration ended
            n_iterations += 1
            if n_iterations >= maxiter:
                task[0], task[1] = 5, 504
            elif nfev > maxfun:
                task[0], task[1] = 5, 502
        else:
            break
    status = 0 if task[0] == 4 else 1 if (nfev > maxfun or n_iterations >= maxiter) else 2
    return optimize.OptimizeResult(x=x, fun=f, nit=n_iterations, nfev=nfev, status=status, success=status == 0,
                                   message=f"{_LBFGSB_STATUS[task[0]]}: {_LBFGSB_TASK[task[1]]}")


def _binary_loss_gradient(coef, loss: LinearModelLoss, X, target, l2_reg_strength):
    """``LinearModelLoss.loss_gradient`` for a binary loss, numpy rows, no sample weights and
    one thread: the same arithmetic in the same order, without its array-API look-ups."""
    n_samples, n_features = X.shape
    weights, intercept = (coef[:-1], coef[-1]) if loss.fit_intercept else (coef, 0.0)  # loss.weight_intercept
    raw_prediction = X @ np.asarray(weights, dtype=X.dtype) + np.asarray(intercept, dtype=X.dtype)
    pointwise, grad_pointwise = loss.base_loss.loss_gradient(
        y_true=target, raw_prediction=raw_prediction, sample_weight=None, n_threads=1)
    # np.sum(a) is a.sum(); loss.l2_penalty of a 1-D weight vector
    value = float(pointwise.sum() / n_samples) + float(0.5 * l2_reg_strength * (weights @ weights))
    grad_pointwise /= n_samples
    grad = np.empty_like(coef, dtype=weights.dtype)
    grad[:n_features] = X.T @ grad_pointwise + l2_reg_strength * weights
    if loss.fit_intercept:
        grad[-1] = grad_pointwise.sum()
    return value, grad


def lean_decision_function(model: LogisticRegression, X: np.ndarray) -> np.ndarray:
    """``model.decision_function(X)`` for a fitted LogisticRegression and an X its input checks
    would return unchanged (LeanLR._plain): the same arithmetic, without the checks."""
    coef_T = model.coef_.T if model.coef_.ndim == 2 else model.coef_
    scores = safe_sparse_dot(X, coef_T, dense_output=True) + model.intercept_
    return scores.reshape(-1) if (scores.ndim > 1 and scores.shape[1] == 1) else scores


def lean_predict(model: LogisticRegression, X: np.ndarray) -> np.ndarray:
    """``model.predict(X)`` under the same conditions as lean_decision_function."""
    scores = lean_decision_function(model, X)
    indices = (scores > 0).astype(np.intp) if scores.ndim == 1 else scores.argmax(axis=1)
    return model.classes_.take(indices, axis=0)


def _agrees_with_lr() -> bool:
    """Do LeanLR and LogisticRegression agree bit for bit here (coefficients, decision values,
    labels, probabilities, on many rows and on one row at a time)?

    Compared on small fixed problems (two, three and four classes, lbfgs and liblinear, the
    lean binary lbfgs fit and the lean binary and one-vs-rest liblinear fits among them), once per
    process (:func:`audit.fast.policy.fast_path_verified`).
    """
    rng = np.random.default_rng(4)
    cases = ((2, {"C": 0.1}), (3, {"C": 1.0}), (2, {"solver": "liblinear"}), (3, {"solver": "liblinear"}),
             (2, {"solver": "liblinear", "C": 0.05, "fit_intercept": False}),
             (2, {"solver": "liblinear", "dual": True, "intercept_scaling": 2.5}),
             (4, {"solver": "liblinear", "C": 0.3, "dual": True, "intercept_scaling": 2.5}))
    for n_classes, params in cases:
        X = np.round(rng.normal(size=(40, 6)) * 2, 1)
        y = np.r_[np.arange(n_classes), rng.integers(0, n_classes, size=40 - n_classes)] * 2 - 1  # -1, 1, 3, 5
        X_new = rng.normal(size=(12, 6))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            reference = OvRLogisticRegression(random_state=0, **params).fit(X, y)
            lean = LeanLR(random_state=0, **params)
            lean._validate_params_once()
            lean._fast_fit(X.copy(), y)
            lean.fast_path_ = lean.fast_path_name
        if not all(np.array_equal(getattr(reference, k), getattr(lean, k))
                   for k in ("coef_", "intercept_", "classes_", "n_iter_")):
            return False
        for rows in (X_new, X_new[3:4]):
            for method in ("decision_function", "predict", "predict_proba"):
                expected, got = getattr(reference, method)(rows), getattr(lean, method)(rows)
                if not (expected.dtype == got.dtype and np.array_equal(expected, got)):
                    return False
    return True
