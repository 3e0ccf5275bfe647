"""An SVC that fits and predicts exactly like scikit-learn's, without its validation overhead.

ALiPy's expected error reduction refits the query model (an RBF SVC with Platt scaling)
twice per candidate per round: about 11,000 fits on 20 to 125 rows for one sonar trial
and 44,000 for ionosphere. scikit-learn 1.9 spends two thirds of such a fit in Python
around libsvm (parameter validation, ``type_of_target``, dataframe checks, a fresh
``RandomState``), and a similar share of each ``predict_proba``. :class:`LeanSVC` is an
``SVC`` whose ``fit`` runs the same libsvm training through scikit-learn's own
``_dense_fit``, with the same label encoding, gamma and seed, and whose predictions skip
input checks for inputs those checks would pass unchanged (float64, C order, finite,
the fitted width), so every fitted attribute and every prediction is bit-identical.

It follows the fast-path policy of :mod:`audit.fast.policy` (supported scikit-learn
releases, SVC's own parameter and input validation, a once-per-process self-check) and
takes the lean path only for at least two classes, no ``sample_weight``,
``class_weight=None`` and a built-in kernel; everything else is plain ``SVC``.

The beam-search oracle fits an SVC for each of ~26,000 candidate sets per sonar trial and
needs only the test rows' labels; half its time was libsvm's ``predict``. :func:`binary_codes`
gives libsvm's labels of a binary RBF or linear model from one BLAS kernel product, leaving
to libsvm the rows whose decision value is too close to 0 for rounding to be ruled out, under
the same policy (supported releases, a once-per-process self-check, fallback).
"""
from __future__ import annotations

import functools
import warnings

import numpy as np
import sklearn
from sklearn.svm import SVC
from sklearn.svm._base import LIBSVM_IMPL

from audit.fast.policy import FastPathFallbackWarning, FastPathMixin, native_seed, sklearn_supported

_KERNELS = ("linear", "poly", "rbf", "sigmoid")


def libsvm_gamma(gamma: str | float, X: np.ndarray) -> float:
    """The kernel coefficient SVC.fit hands libsvm for ``gamma`` and the training rows ``X``
    (shared with the oracles' direct libsvm calls, adapters/oracles.py)."""
    if gamma == "scale":
        variance = X.var()
        return 1.0 / (X.shape[1] * variance) if variance != 0 else 1.0
    if gamma == "auto":
        return 1.0 / X.shape[1]
    return gamma


class LeanSVC(FastPathMixin, SVC):
    """``SVC`` with a lean fit and prediction path for the cases listed in the module docstring."""

    fast_path_name = "lean-svc"

    def _fast_options(self, X, y, sample_weight) -> bool:
        return (sample_weight is None and self.class_weight is None and self.kernel in _KERNELS
                and y.min() != y.max())  # one class: SVC's own error

    def _fast_fit(self, X: np.ndarray, y: np.ndarray) -> None:
        self._lean_fit(np.ascontiguousarray(X, dtype=np.float64), *np.unique(y, return_inverse=True))

    @classmethod
    def _agrees_with_parent(cls) -> bool:
        return _agrees_with_svc()

    def _lean_fit(self, X: np.ndarray, classes: np.ndarray, codes: np.ndarray) -> None:
        """The steps of SVC.fit for this case, in its order, with its private helpers."""
        seed = native_seed(self.random_state)
        self._sparse = False
        self.n_features_in_ = X.shape[1]
        self.__dict__.pop("feature_names_in_", None)  # an array has none, as validate_data resets it
        self.class_weight_ = np.ones(classes.size, dtype=np.float64)
        self.classes_ = classes
        y = np.asarray(codes, dtype=np.float64, order="C")
        self._effective_probability = self.probability
        if self.probability != "deprecated":
            warnings.warn("The `probability` parameter was deprecated in 1.9 and will be removed in version "
                          "1.11. Use `CalibratedClassifierCV(SVC(), ensemble=False)` instead of "
                          "`SVC(probability=True)`", FutureWarning, stacklevel=4)
        else:
            self._effective_probability = False
        self._gamma = libsvm_gamma(self.gamma, X)
        self._dense_fit(X, y, np.asarray([], dtype=np.float64), LIBSVM_IMPL.index(self._impl), self.kernel,
                        random_seed=seed)
        self.shape_fit_ = X.shape
        self._intercept_ = self.intercept_.copy()
        self._dual_coef_ = self.dual_coef_
        if classes.size == 2:
            self.intercept_ *= -1
            self.dual_coef_ = -self.dual_coef_
        if not (np.isfinite(self._intercept_).all() and np.isfinite(self._dual_coef_).all()):
            raise ValueError("The dual coefficients or intercepts are not finite. The input data may contain "
                             "large values and need to be preprocessed.")
        self.n_iter_ = self._num_iter

    def _plain(self, X) -> bool:
        """Fitted on the lean path, and ``X`` what scikit-learn's checks would return unchanged."""
        return (self.__dict__.get("fast_path_") == self.fast_path_name and isinstance(X, np.ndarray)
                and X.dtype == np.float64 and X.ndim == 2 and X.flags.c_contiguous and X.shape[0] > 0
                and X.shape[1] == self.n_features_in_ and bool(np.isfinite(X).all()))

    def _validate_for_predict(self, X):
        return X if self._plain(X) else super()._validate_for_predict(X)

    def predict(self, X):
        """A binary RBF or linear model's labels through :func:`binary_codes` (libsvm's labels: BLAS
        where their signs are certain, libsvm for the other rows); otherwise SVC.predict. The
        runner predicts the test rows with the task model after every query."""
        if not (self._plain(X) and self.kernel in ("rbf", "linear") and self.classes_.size == 2
                and not self.break_ties):
            return super().predict(X)
        fitted = (self.support_, self.support_vectors_, self._n_support, self._dual_coef_, self._intercept_,
                  self._probA, self._probB)
        args = {"kernel": self.kernel, "degree": self.degree, "coef0": self.coef0, "cache_size": self.cache_size}
        return self.classes_.take(binary_codes(args, fitted, X, self._gamma))


_FITTED = ("support_", "support_vectors_", "_n_support", "dual_coef_", "intercept_", "_dual_coef_",
           "_intercept_", "_probA", "_probB", "fit_status_", "n_iter_", "classes_", "class_weight_",
           "shape_fit_", "_gamma", "n_features_in_")


def _agrees_with_svc() -> bool:
    """Do LeanSVC and SVC agree bit for bit here (fitted attributes and predictions)?

    Compared on small fixed problems (two and three classes, kernels, gammas, with and
    without Platt scaling, an int and the global seed), once per process
    (:func:`audit.fast.policy.fast_path_verified`).
    """
    rng = np.random.default_rng(515)
    cases = ((2, {"kernel": "rbf", "gamma": "auto", "probability": True, "random_state": 3}),
             (2, {"kernel": "linear", "C": 0.5}),
             (3, {"kernel": "poly", "gamma": "scale", "degree": 2, "probability": True, "random_state": None}),
             (3, {"kernel": "rbf", "gamma": 0.3, "decision_function_shape": "ovo"}))
    for n_classes, params in cases:
        X = np.round(rng.normal(size=(40, 4)), 1)
        y = rng.integers(0, n_classes, size=40) * 2 - 1  # labels -1, 1, 3
        X_new = rng.normal(size=(15, 4))
        global_state = np.random.get_state()  # the None case draws from it: restored below
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            np.random.seed(11)
            reference = SVC(**params).fit(X, y)
            np.random.seed(11)
            lean = LeanSVC(**params)
            try:
                lean._validate_params_once()
                lean._fast_fit(X.copy(), y)
                lean.fast_path_ = lean.fast_path_name
                outputs = [(reference.predict(X_new), lean.predict(X_new)),
                           (reference.decision_function(X_new), lean.decision_function(X_new))]
                if params.get("probability"):
                    outputs.append((reference.predict_proba(X_new), lean.predict_proba(X_new)))
            finally:
                np.random.set_state(global_state)
        same_fit = all(np.array_equal(np.asarray(getattr(reference, k)), np.asarray(getattr(lean, k)))
                       for k in _FITTED)
        if not (same_fit and all(np.array_equal(a, b) for a, b in outputs)):
            return False
    return True


# --- binary labels through BLAS, their signs certified ---------------------------------------

_EPS = float(np.finfo(np.float64).eps)
_SAFETY = 16.0  # the margin kept beyond the rounding bound below


def blas_binary_codes(X: np.ndarray, support_vectors: np.ndarray, dual_coef: np.ndarray, intercept: np.ndarray,
                      kernel: str, gamma: float) -> tuple[np.ndarray, np.ndarray]:
    """A binary C-SVC's predicted label codes as libsvm's ``predict`` gives them (0 where the
    decision value ``sum_i dual_coef[0, i] K(x, sv_i) + intercept[0]`` is > 0, else 1), with the
    kernel rows computed by BLAS instead of libsvm's loop over the support vectors; and the rows
    whose decision value lies too close to 0 for the two routes' roundings to be sure of agreeing
    (the caller takes those rows' labels from libsvm).

    The bound: each kernel value of either route is within ``g (d + 2) eps (|x| + |sv|)^2 + 8 eps``
    of the exact one (RBF; linear: ``(d + 2) eps |x| |sv|``), the weighted sum adds at most
    ``(l + 2) eps`` times the sum of its terms' magnitudes; a row is decided here when its decision
    value exceeds twice that, times ``_SAFETY``. ``kernel``: "rbf" or "linear".
    """
    d = X.shape[1]
    weights = dual_coef[0]
    squares_x = np.einsum("ij,ij->i", X, X)
    squares_sv = np.einsum("ij,ij->i", support_vectors, support_vectors)
    norm_x, norm_sv = np.sqrt(squares_x), np.sqrt(squares_sv)
    cross = X @ support_vectors.T
    if kernel == "rbf":
        K = np.exp(-gamma * (squares_x[:, None] + squares_sv[None, :] - 2.0 * cross))
        per_value = gamma * (d + 2) * _EPS * (norm_x + norm_sv.max()) ** 2 + 8 * _EPS
    else:
        K = cross
        per_value = (d + 2) * _EPS * norm_x * norm_sv.max()
    decision = K @ weights + intercept[0]
    magnitude = np.abs(K) @ np.abs(weights) + abs(intercept[0])
    bound = 2 * (per_value * np.abs(weights).sum() + (weights.size + 2) * _EPS * magnitude)
    codes = np.where(decision > 0, 0, 1)
    return codes, np.flatnonzero(~(np.abs(decision) > _SAFETY * bound))


def libsvm_predict_codes(args: dict, fitted: tuple, X: np.ndarray, gamma: float) -> np.ndarray:
    """libsvm's own ``predict`` of a C-SVC ``fitted`` by ``_libsvm.fit`` (its outputs, in order)
    with the SVC arguments ``args`` (any number of classes): the label codes, as floats."""
    from sklearn.svm import _libsvm

    support, support_vectors, n_support, dual_coef, intercept, prob_a, prob_b = fitted[:7]
    return _libsvm.predict(X, support, support_vectors, n_support, dual_coef, intercept, prob_a, prob_b,
                           svm_type=0, kernel=args["kernel"], degree=args["degree"], coef0=args["coef0"],
                           gamma=gamma, cache_size=args["cache_size"])


def binary_codes(args: dict, fitted: tuple, X: np.ndarray, gamma: float) -> np.ndarray:
    """The label codes libsvm predicts for the rows ``X`` of a binary model ``fitted`` with
    ``args``: through :func:`blas_binary_codes` (the undecided rows from libsvm) when its
    self-check passed in this process and the kernel is RBF or linear, else libsvm's own."""
    if args["kernel"] not in ("rbf", "linear") or not blas_binary_codes_verified():
        return np.asarray(libsvm_predict_codes(args, fitted, X, gamma), dtype=np.intp)
    return _blas_then_libsvm(args, fitted, X, gamma)


def _blas_then_libsvm(args: dict, fitted: tuple, X: np.ndarray, gamma: float) -> np.ndarray:
    codes, undecided = blas_binary_codes(X, fitted[1], fitted[3], fitted[4], args["kernel"], gamma)
    if undecided.size:
        codes[undecided] = libsvm_predict_codes(args, fitted, np.ascontiguousarray(X[undecided]), gamma)
    return codes


@functools.cache
def blas_binary_codes_verified() -> bool:
    """Do :func:`binary_codes`'s BLAS labels equal libsvm's here? Checked once per process on
    fixed problems (both kernels, either class first, rows on and near the boundary); on a
    supported scikit-learn a difference warns once (FastPathFallbackWarning) and libsvm predicts."""
    if not sklearn_supported():
        return False
    try:
        agrees, why = _blas_codes_agree(), "its self-check found a difference"
    except Exception as exc:  # a private libsvm binding changed: libsvm predicts
        agrees, why = False, f"its self-check failed ({type(exc).__name__}: {exc})"
    if not agrees:
        warnings.warn(f"BLAS binary SVC labels: {why} from libsvm's predict on scikit-learn {sklearn.__version__}; "
                      "libsvm predicts every label", FastPathFallbackWarning, stacklevel=2)
    return agrees


def _blas_codes_agree() -> bool:
    from sklearn.svm import _libsvm

    rng = np.random.default_rng(616)
    _libsvm.set_verbosity_wrap(0)
    for case in range(8):
        kernel = ("rbf", "linear")[case % 2]
        X = np.ascontiguousarray(np.round(rng.normal(size=(30, 5)), 1) * (1 + 20 * (case >= 6)))
        codes = (rng.random(30) < 0.5).astype(np.float64)
        codes[:2] = (1.0, 0.0) if case % 4 < 2 else (0.0, 1.0)
        gamma = 1.0 / (X.shape[1] * X.var())
        args = {"kernel": kernel, "degree": 3, "coef0": 0.0, "cache_size": 200}
        fitted = _libsvm.fit(X, codes, svm_type=0, sample_weight=np.empty(0), class_weight=np.ones(2),
                             kernel=kernel, C=1.0, nu=0.5, probability=False, degree=3, shrinking=True, tol=1e-3,
                             cache_size=200, coef0=0.0, gamma=gamma, epsilon=0.1, max_iter=-1, random_seed=0)
        X_new = np.ascontiguousarray(np.vstack([rng.normal(size=(20, 5)) * X.std(), X,
                                                (X[:10] + X[10:20]) / 2]))  # midpoints: rows near the boundary
        if not np.array_equal(_blas_then_libsvm(args, fitted, X_new, gamma),
                              libsvm_predict_codes(args, fitted, X_new, gamma)):
            return False
    return True
