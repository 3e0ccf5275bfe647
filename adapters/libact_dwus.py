"""The lean route of libact DWUS's density-weighted logistic regression fit.

Every DWUS query fits libact's ``DensityWeightedLogisticRegression`` with
``scipy.optimize.minimize(method="CG")`` and no gradient, so SciPy estimates each gradient
by forward differences: one call of the likelihood per coordinate (61 on sonar). A sonar
trial whose densities are finite makes about 320,000 such calls, nearly all of its 11-19 s.
This route makes the same ``minimize`` call with one option more, ``workers``: SciPy's own
hook that evaluates a gradient's difference points through a map. The map given here
evaluates all of them at once, each value by the same floating-point operations as libact's
``_likelihood``: the products with the cluster centres and the quadratic term by the same
``np.dot`` calls, point by point; the elementwise steps (sigmoid, weighting, log) and the
sums over a contiguous last axis batched, which numpy computes element by element and row
by row exactly as for one point. SciPy's CG loop, line searches, steps and differences are
its own, so the fit, and every pick, is the same bit for bit.

It runs only when all of these hold, and otherwise libact's own ``train`` runs:

1. SciPy is in :data:`SUPPORTED_SCIPY`, the releases whose ``minimize(method="CG")``
   passes ``workers`` to its difference points (the map receives the points SciPy builds);
2. :func:`lean_dwus_verified` has compared, once in this process, the batch's values with
   ``_likelihood`` point by point and a whole fit with libact's ``train``, bit for bit; a
   difference warns once (FastPathFallbackWarning) and sends every fit to libact.

Each fit records its route (:data:`LEAN_DWUS` or ``library``) for the trial's ``fast_path``.
"""
from __future__ import annotations

import contextlib
import functools
from typing import Any, Iterable, Iterator

import numpy as np
import scipy
from scipy.optimize import minimize

from audit.fast.policy import LIBRARY, record_route, release_in, route_verified

LEAN_DWUS = "lean-dwus"
"""The route's name in a trial's ``fast_path``."""

SUPPORTED_SCIPY = ((1, 17), (1, 18))
"""SciPy releases (major, minor) whose CG minimizer hands ``workers`` its difference points:
from the first, up to not including the second."""


def scipy_supported(version: str | None = None) -> bool:
    """Is ``version`` (default: the installed SciPy's) in SUPPORTED_SCIPY?"""
    return release_in(scipy.__version__ if version is None else version, SUPPORTED_SCIPY)


def likelihood_batch(model: Any, y: np.ndarray, points: list[np.ndarray]) -> list[np.ndarray]:
    """``model._likelihood(w, X, y)`` at every ``w`` of ``points``, each as the 1-element
    array SciPy's difference loop makes of a value."""
    stacked = np.array(points)  # (B, d + 1)
    coefs = stacked[:, :-1]
    scores = np.array([np.dot(model.centers, coef) for coef in coefs]) + stacked[:, -1:]  # (B, K)
    products = y.reshape(1, -1, 1) * scores[:, None, :]  # (B, n, K): y_i * score_k, as the (n,1)@(1,K) dot
    weighted = np.sum(model.density * (1. / (1. + np.exp(-products))), axis=2)
    quadratic = np.array([np.dot(coef, coef) for coef in coefs])
    return list((model.C / 2. * quadratic - np.sum(np.log(weighted), axis=1))[:, None])


def _batch_map(model: Any, y: np.ndarray, function: Any, points: Iterable[np.ndarray]) -> list[np.ndarray]:
    """A map for SciPy's ``workers``: the likelihood at every point, without calling ``function``."""
    return likelihood_batch(model, y, list(points))


def _lean_train(model: Any, X: Any, y: Any) -> None:
    """libact's ``train`` (zeros start, CG, default options) with the batched difference points."""
    labels = np.asarray(y)
    start = np.zeros(np.shape(model.centers)[1] + 1)
    result = minimize(lambda w: model._likelihood(w, X, y), start, method="CG",
                      options={"workers": functools.partial(_batch_map, model, labels)})
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

def _check_model(seed: int) -> tuple[Any, np.ndarray, np.ndarray]:
    """A DWUS-shaped fit (cluster memberships of 40 labeled rows, 5 centres in 12 dimensions,
    labels -1/+1 as a column) and its labeled ids."""
    from libact.query_strategies.density_weighted_uncertainty_sampling import DensityWeightedLogisticRegression

    rng = np.random.default_rng(seed)
    density = rng.random((40, 5)) ** 4
    density /= density.sum(axis=1, keepdims=True)
    centers = rng.standard_normal((5, 12))
    labels = np.where(rng.random(40) < 0.4, -1, 1).reshape(-1, 1)
    return DensityWeightedLogisticRegression(density, centers, 1.0), np.arange(40), labels


def _agrees_with_libact() -> bool:
    for seed in (0, 1):
        model, ids, labels = _check_model(seed)
        rng = np.random.default_rng(seed + 10)
        points = [rng.standard_normal(13) * scale for scale in (0.0, 0.01, 1.0, 30.0)]
        expected = [np.atleast_1d(model._likelihood(np.copy(w), ids, labels)) for w in points]
        got = likelihood_batch(model, labels, points)
        if any(a.dtype != b.dtype or a.tobytes() != b.tobytes() for a, b in zip(got, expected)):
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
