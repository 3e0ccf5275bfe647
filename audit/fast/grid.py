"""A grid search over LogisticRegression's C that fits exactly like scikit-learn's GridSearchCV.

zhan2021's Margin, InfoDiv and MCM query with ``GridSearchCV(LogisticRegression(lbfgs,
max_iter=200), {"C": 9 values}, cv=3)`` refitted on the labeled rows every round: 27 fold
fits, 27 fold scores and one refit per round, about 2,900 LR fits per sonar trial.
GridSearchCV wraps each in a clone, joblib's dispatch, ``_fit_and_score``'s bookkeeping,
a scorer object and ``accuracy_score``'s target checks. :class:`LeanGridLR` is a
``GridSearchCV`` whose ``fit`` runs the same steps without that wrapping:

- the folds of ``check_cv(cv, y, classifier=True)`` (StratifiedKFold for an integer cv),
  in its split order, candidates outer and folds inner as GridSearchCV orders them;
- each fold: a copy of the estimator with the candidate's C, fitted on ``X[train]`` (two
  classes, lbfgs, float64 rows: :func:`audit.fast.linear.fit_lbfgs_binary`, the same
  optimiser calls without LogisticRegression.fit's checks; else ``LogisticRegression.fit``),
  and its accuracy on ``X[test]`` (the mean of the exact 0/1 matches,
  the float ``accuracy_score`` returns; for float64 rows, which plain_inputs has already
  found finite, the prediction is LogisticRegression's arithmetic without its input
  checks, as :mod:`audit.fast.linear`);
- the candidates' mean scores, ranks and best index by GridSearchCV's own
  ``_format_results`` and ``_select_best_index`` (the first best mean in grid order), then
  the refit of a copy with the best C on all rows, fitted the same way.

So ``best_estimator_`` (``coef_``, ``intercept_``, ``n_iter_``), ``best_index_``,
``best_params_``, ``best_score_`` and every prediction are bit-identical; ``cv_results_``
is too except its times. A fold fit that raises (one class in a training fold) sends the
whole fit to GridSearchCV, which scores that candidate NaN as usual.

It follows :mod:`audit.fast.policy`; the lean path covers a plain ``LogisticRegression``
estimator, a grid over C alone, integer cv, default scoring, ``refit=True``, no
``n_jobs``, no verbosity, no train scores, no fit parameters and at least two classes.
"""
from __future__ import annotations

import copy
import numbers
import time
import warnings

import numpy as np
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, check_cv

from audit.fast.linear import fit_lbfgs_binary, lbfgs_binary_applies, lean_predict
from audit.fast.policy import FastPathMixin, plain_inputs


class _FoldFitFailed(Exception):
    """A fold's fit raised: GridSearchCV's own fit handles it."""


def _is_real(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


class LeanGridLR(FastPathMixin, GridSearchCV):
    """``GridSearchCV`` over LogisticRegression's C with a lean fit (see the module docstring)."""

    fast_path_name = "lean-grid-lr"

    def _fast_options(self, X, y, sample_weight) -> bool:
        grid = self.param_grid
        return (sample_weight is None and type(self.estimator) is LogisticRegression
                and isinstance(grid, dict) and list(grid) == ["C"]
                and isinstance(grid["C"], (list, tuple)) and len(grid["C"]) > 0
                and all(_is_real(c) for c in grid["C"])
                and self.scoring is None and self.refit is True and self.n_jobs is None and self.verbose == 0
                and not self.return_train_score
                and isinstance(self.cv, numbers.Integral) and not isinstance(self.cv, bool)
                and y.min() != y.max())

    def fit(self, X, y=None, **params):
        """GridSearchCV.fit; the lean path for the cases of the module docstring."""
        fast = not params and y is not None and plain_inputs(X, y) and self._fast_options(X, y, None)
        if fast:
            self._validate_params_once()
            fast = self._fast_path_verified()
        if fast:
            try:
                self._fast_fit(X, y)
            except _FoldFitFailed:
                fast = False
        if not fast:
            GridSearchCV.fit(self, X, y, **params)
        self._record_path(fast)
        return self

    def _fast_fit(self, X: np.ndarray, y: np.ndarray) -> None:
        """GridSearchCV.fit's steps for this case, in its order (see the module docstring)."""
        scorers, refit_metric = self._get_scorers()
        cv = check_cv(self.cv, y, classifier=True)
        n_splits = cv.get_n_splits(X, y)
        base = clone(self.estimator)
        splits = list(cv.split(X, y))
        if len(splits) != n_splits:
            raise _FoldFitFailed  # GridSearchCV raises its own error about it
        candidates = [{"C": c} for c in self.param_grid["C"]]
        folds = [(X[train], y[train], X[test], y[test]) for train, test in splits]
        # The folds' rows as LogisticRegression.predict's checks would return them unchanged:
        # its own arithmetic without the checks (audit.fast.linear; compared by the self-check).
        plain_test = X.dtype == np.float64
        out = []
        for parameters in candidates:
            for X_train, y_train, X_test, y_test in folds:
                estimator = _with_params(base, parameters)
                start = time.time()
                try:
                    _fit(estimator, X_train, y_train, plain_test)
                except Exception:
                    raise _FoldFitFailed from None
                fit_time = time.time() - start
                predicted = (lean_predict(estimator, X_test) if plain_test and X_test.shape[0] > 0
                             else estimator.predict(X_test))
                score = float(np.mean((y_test == predicted).astype(np.float64)))
                out.append({"fit_error": None, "test_scores": score, "n_test_samples": y_test.shape[0],
                            "fit_time": fit_time, "score_time": time.time() - start - fit_time})
        results = self._format_results(candidates, n_splits, out, {})  # every score finite: no warning
        self._checked_cv_orig = cv
        self.n_splits_ = n_splits
        self.multimetric_ = False
        self.best_index_ = self._select_best_index(self.refit, refit_metric, results)
        self.best_score_ = results[f"mean_test_{refit_metric}"][self.best_index_]
        self.best_params_ = results["params"][self.best_index_]
        self.best_estimator_ = _with_params(base, self.best_params_)
        start = time.time()
        _fit(self.best_estimator_, X, y, plain_test)
        self.refit_time_ = time.time() - start
        self.__dict__.pop("feature_names_in_", None)
        self.scorer_ = scorers
        self.cv_results_ = results

    @classmethod
    def _agrees_with_parent(cls) -> bool:
        return _agrees_with_grid_search()


def _with_params(base: LogisticRegression, parameters: dict) -> LogisticRegression:
    """``clone(base).set_params(**clone(parameters, safe=False))`` for an unfitted
    LogisticRegression whose parameters are all plain scalars (the lean fit's case): a copy
    with the candidate's C, without clone's and set_params's signature look-ups."""
    values = base.__dict__.values()
    if all(type(v) in (str, int, float, bool, type(None)) for v in values) and type(parameters["C"]) in (int, float):
        estimator = copy.copy(base)
        estimator.C = parameters["C"]
        return estimator
    return clone(base).set_params(**clone(parameters, safe=False))


def _fit(estimator: LogisticRegression, X: np.ndarray, y: np.ndarray, plain: bool) -> None:
    """``estimator.fit(X, y)``, through :func:`audit.fast.linear.fit_lbfgs_binary` where it
    applies (``plain``: the rows passed plain_inputs as float64)."""
    if plain and lbfgs_binary_applies(estimator, X, y):
        fit_lbfgs_binary(estimator, X, y)
    else:
        estimator.fit(X, y)


def _agrees_with_grid_search() -> bool:
    """Do LeanGridLR and GridSearchCV agree bit for bit here (the chosen C, the refitted
    coefficients, the fold scores and the predictions)?

    Compared on small fixed problems (two and three classes, scores that tie across
    candidates, an LR that stops at max_iter), once per process
    (:func:`audit.fast.policy.fast_path_verified`).
    """
    rng = np.random.default_rng(2021)
    grid = [10.0**k for k in range(-4, 5)]
    cases = ((2, 30, {"max_iter": 200}), (2, 12, {"max_iter": 5}), (2, 24, {"max_iter": 200, "fit_intercept": False}),
             (3, 36, {"max_iter": 200, "C": 0.5}))
    for n_classes, n, params in cases:
        X = np.round(rng.normal(size=(n, 5)) * 3, 1)
        y = np.arange(n) % n_classes
        rng.shuffle(y)
        X_new = rng.normal(size=(10, 5))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            reference = GridSearchCV(LogisticRegression(random_state=0, **params), {"C": grid}, cv=3).fit(X, y)
            lean = LeanGridLR(LogisticRegression(random_state=0, **params), {"C": grid}, cv=3)
            lean._validate_params_once()
            lean._fast_fit(X.copy(), y.copy())
        same = (reference.best_index_ == lean.best_index_ and reference.best_params_ == lean.best_params_
                and reference.best_score_ == lean.best_score_
                and all(np.array_equal(reference.cv_results_[k], lean.cv_results_[k])
                        for k in reference.cv_results_ if "test_score" in k)
                and all(np.array_equal(getattr(reference.best_estimator_, k), getattr(lean.best_estimator_, k))
                        for k in ("coef_", "intercept_", "n_iter_", "classes_"))
                and np.array_equal(reference.decision_function(X_new), lean.decision_function(X_new))
                and np.array_equal(reference.predict_proba(X_new), lean.predict_proba(X_new)))
        if not same:
            return False
    return True
