"""The lean route of libact DWUS's density-weighted logistic regression fit.

Every DWUS query fits libact's ``DensityWeightedLogisticRegression`` with
``scipy.optimize.minimize(method="CG")`` and no gradient, so SciPy estimates each gradient
by forward differences: one call of the likelihood per coordinate (61 on sonar). A sonar
trial whose densities are finite makes about 320,000 such calls, nearly all of its 11-19 s.
This route makes the same ``minimize`` call with ``jac``: :func:`difference_gradient`, which
computes SciPy's own forward differences at once. The same absolute step (CG's ``eps``,
sqrt of the float64 epsilon, with SciPy's fallback where it vanishes), the same points (x
with one coordinate moved), the likelihood at x the value CG's own evaluation there returned
(libact's ``_likelihood``, as SciPy differences from it), at the points by
:func:`likelihood_batch`, which computes each value by the same floating-point operations
as libact's ``_likelihood`` (the products with the cluster centres and the quadratic term by
the same ``np.dot`` calls, point by point; the elementwise steps batched, which numpy computes
element by element, the sigmoid of label x score once per distinct label, the one value it
takes for every row with that label; the sum over the clusters, a row numpy adds left to right when it has
fewer than 8 elements, as that many whole-array additions), and the same quotients. SciPy's
CG loop and line searches read only these values, so the fit, and every pick, is the same
bit for bit.

It runs only when all of these hold, and otherwise libact's own ``train`` runs:

1. SciPy is in :data:`SUPPORTED_SCIPY`, the releases whose CG differences the gradient this
   way (an absolute step ``eps``, '2-point', no bounds);
2. :func:`lean_dwus_verified` has compared, once in this process, the batch's values with
   ``_likelihood`` point by point (at 1 to 11 clusters: both ways a row is summed), the
   gradient with SciPy's ``approx_derivative`` and a whole fit with libact's ``train``, bit
   for bit; a difference warns once
   (FastPathFallbackWarning) and sends every fit to libact.

Each fit records its route (:data:`LEAN_DWUS` or ``library``) for the trial's ``fast_path``.
"""
from __future__ import annotations

import contextlib
import functools
from typing import Any, Iterator

import numpy as np
import scipy
from scipy.optimize import minimize

from audit.fast.policy import LIBRARY, record_route, release_in, route_verified

LEAN_DWUS = "lean-dwus"
"""The route's name in a trial's ``fast_path``."""

SUPPORTED_SCIPY = ((1, 17), (1, 18))
"""SciPy releases (major, minor) whose CG minimizer differences the gradient as
:func:`difference_gradient` does: from the first, up to not including the second."""

CG_STEP = float(np.sqrt(np.finfo(np.float64).eps))
"""The absolute difference step of ``minimize(method="CG")`` without ``jac`` (its ``eps``)."""


SEQUENTIAL_ROW = 8
"""numpy sums a contiguous float64 row of fewer elements than this one by one, left to right
(longer rows pairwise, in eight lanes)."""


def scipy_supported(version: str | None = None) -> bool:
    """Is ``version`` (default: the installed SciPy's) in SUPPORTED_SCIPY?"""
    return release_in(scipy.__version__ if version is None else version, SUPPORTED_SCIPY)


def likelihood_batch(model: Any, y: np.ndarray, points: np.ndarray) -> np.ndarray:
    """``model._likelihood(w, X, y)`` at every row ``w`` of ``points`` (B, d + 1), as a (B,) array."""
    coefs = points[:, :-1]
    # np.dot(centers, coef) and np.dot(coef, coef) for each row, as stacked matmuls: numpy's
    # matmul calls the same BLAS routines (gemv, dot) per stacked row with the same operands
    scores = np.matmul(model.centers, coefs[:, :, None])[:, :, 0] + points[:, -1:]  # (B, K)
    # sigmoid(y_i * score_k) has one value per distinct label (libact's are -1 and +1): each
    # computed once, by the same operations on the same operands as libact's elements (the
    # product, then 1 / (1 + exp(-t)) elementwise on a contiguous array), and laid out
    # (B, K, n) for the rows with that label, so numpy's loops run along the long axis (n)
    labels, label_of_row = np.unique(np.ravel(y), return_inverse=True)
    sigmoids = np.empty(scores.shape + (labels.size,))
    for which, label in enumerate(labels.tolist()):
        t = scores * label
        np.negative(t, out=t)
        np.exp(t, out=t)
        np.add(t, 1., out=t)
        np.divide(1., t, out=t)
        sigmoids[:, :, which] = t
    terms = np.take(sigmoids, label_of_row, axis=2)
    np.multiply(terms, np.asarray(model.density).T, out=terms)  # density * sigmoid
    weighted = _sum_clusters(terms)
    quadratic = np.matmul(coefs[:, None, :], coefs[:, :, None])[:, 0, 0]
    return model.C / 2. * quadratic - np.sum(np.log(weighted), axis=1)


def _sum_clusters(terms: np.ndarray) -> np.ndarray:
    """The sums over the clusters (axis 1 of ``terms`` (B, K, n)) that libact's
    ``np.sum(..., axis=1)`` of each (n, K) slice gives: numpy adds a contiguous row shorter
    than :data:`SEQUENTIAL_ROW` left to right, so for DWUS's default 5 clusters these are K - 1
    whole-array additions in that order; longer rows are handed to numpy as such rows (the
    self-check compares both with ``_likelihood``)."""
    if not terms.shape[1] < SEQUENTIAL_ROW:
        return np.sum(np.ascontiguousarray(terms.transpose(0, 2, 1)), axis=-1)
    total = terms[:, 0, :].copy()
    for k in range(1, terms.shape[1]):
        total += terms[:, k, :]
    return total


def difference_gradient(model: Any, X: Any, y: Any, w: np.ndarray, at_w: float | None = None) -> np.ndarray:
    """The gradient SciPy's CG estimates at ``w`` without ``jac`` ('2-point', absolute step
    :data:`CG_STEP`; ``approx_derivative``'s step fallback where ``w + step == w``), at once.
    ``at_w``: the likelihood at ``w`` when already computed (SciPy differences from the value
    its minimizer computed there), else computed here."""
    step = np.where((w + CG_STEP) - w == 0, CG_STEP * ((w >= 0).astype(float) * 2 - 1) * np.maximum(1.0, np.abs(w)),
                    CG_STEP)
    moved = w + step
    points = np.repeat(w[None, :], w.size, axis=0)
    points[np.arange(w.size), np.arange(w.size)] = moved  # x with one coordinate moved, as SciPy copies it
    if at_w is None:
        at_w = model._likelihood(np.copy(w), X, y)
    return (likelihood_batch(model, np.asarray(y), points) - np.atleast_1d(at_w)) / (moved - w)


def _lean_train(model: Any, X: Any, y: Any) -> None:
    """libact's ``train`` (zeros start, CG, default options) with the gradient computed at once.
    CG evaluates the likelihood at a point before its gradient there; the gradient reuses that
    value, as SciPy's own differences do, instead of computing it again."""
    last: dict[str, Any] = {}

    def likelihood(w: np.ndarray) -> Any:
        last["w"], last["value"] = w.tobytes(), model._likelihood(w, X, y)
        return last["value"]

    def gradient(w: np.ndarray) -> np.ndarray:
        return difference_gradient(model, X, y, w, last["value"] if last.get("w") == w.tobytes() else None)

    start = np.zeros(np.shape(model.centers)[1] + 1)
    result = minimize(likelihood, start, method="CG", jac=gradient)
    model.w_ = result.x.reshape(-1, 1)


@contextlib.contextmanager
def lean_training() -> Iterator[None]:
    """Inside, DWUS's fits go through the route when it applies (each records its route)."""
    from libact.query_strategies.density_weighted_uncertainty_sampling import DensityWeightedLogisticRegression

    library_train = DensityWeightedLogisticRegression.train
    lean = lean_dwus_verified()

    def train(model, X, y):
        if lean:
            _lean_train(model, X, y)
            record_route(LEAN_DWUS)
        else:
            library_train(model, X, y)
            record_route(LIBRARY)

    DensityWeightedLogisticRegression.train = train
    try:
        yield
    finally:
        DensityWeightedLogisticRegression.train = library_train


# --- the self-check -------------------------------------------------------------------

def _check_model(seed: int, clusters: int = 5) -> tuple[Any, np.ndarray, np.ndarray]:
    """A DWUS-shaped fit (cluster memberships of 40 labeled rows, ``clusters`` centres in 12
    dimensions, or sonar's 60 for an odd seed; labels -1/+1 as a column) and its labeled ids."""
    from libact.query_strategies.density_weighted_uncertainty_sampling import DensityWeightedLogisticRegression

    rng = np.random.default_rng(seed)
    density = rng.random((40, clusters)) ** 4
    density /= density.sum(axis=1, keepdims=True)
    centers = rng.standard_normal((clusters, 60 if seed % 2 else 12))
    labels = np.where(rng.random(40) < 0.4, -1, 1).reshape(-1, 1)
    return DensityWeightedLogisticRegression(density, centers, 1.0), np.arange(40), labels


@np.errstate(all="ignore")  # the point at 1e10 overflows: no warning into the trial that runs the check
def _agrees_with_libact() -> bool:
    from scipy.optimize._numdiff import approx_derivative

    for clusters in (1, 2, SEQUENTIAL_ROW - 1, SEQUENTIAL_ROW, SEQUENTIAL_ROW + 3):  # both ways of summing a row
        model, ids, labels = _check_model(clusters, clusters)
        points = np.random.default_rng(clusters).standard_normal((3, model.centers.shape[1] + 1))
        for y in (labels, (labels + 1) // 2):  # labels -1/+1, and 0/1 (a file's own binary labels)
            expected = np.array([model._likelihood(np.copy(w), ids, y) for w in points])
            if likelihood_batch(model, y, points).tobytes() != expected.tobytes():
                return False

    for seed in (0, 1):
        model, ids, labels = _check_model(seed)
        rng = np.random.default_rng(seed + 10)
        size = model.centers.shape[1] + 1
        points = np.array([rng.standard_normal(size) * scale for scale in (0.0, 0.01, 1.0, 30.0)] + [np.full(size, 1e10)])
        expected = np.array([model._likelihood(np.copy(w), ids, labels) for w in points])
        if likelihood_batch(model, labels, points).tobytes() != expected.tobytes():
            return False
        for w in points:  # the gradient CG would difference (its eps as abs_step), at each point
            scipy_gradient = approx_derivative(lambda v: model._likelihood(v, ids, labels), w, method="2-point",
                                               abs_step=CG_STEP)
            if difference_gradient(model, ids, labels, w).tobytes() != scipy_gradient.tobytes():
                return False
        twin = _check_model(seed)[0]
        model.train(ids, labels)
        _lean_train(twin, ids, labels)
        if twin.w_.shape != model.w_.shape or twin.w_.tobytes() != model.w_.tobytes():
            return False
    return True


@functools.cache
def lean_dwus_verified() -> bool:
    """Does the route give libact's likelihoods and fits here? Run once per process; on a
    supported SciPy a difference, or the check failing, warns once (FastPathFallbackWarning)."""
    return scipy_supported() and route_verified(
        LEAN_DWUS, _agrees_with_libact, f"from libact's DWUS fit on SciPy {scipy.__version__}; every fit is libact's")
