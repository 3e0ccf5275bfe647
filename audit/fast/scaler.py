"""StandardScaler's fit and transform without its validation layers, bit for bit.

A task model in scaling scope "labeled" (zhan2021's released code: a StandardScaler refitted
on the labeled rows) refits it once a round (about a tenth of a cheap strategy's trial); the
beam-search oracle refits it for each of ~26,000 candidate sets of a sonar trial; and
scikit-learn 1.9 spends most of such a refit and its transforms in input validation,
array-namespace look-ups and callback set-up around three small NumPy reductions. :func:`standard_scaled` runs those
NumPy operations alone, in the order ``partial_fit`` runs them on a first fit
(``_incremental_mean_and_var`` from zero samples, ``_is_constant_feature``,
``_handle_zeros_in_scale``), and transforms as ``transform`` does (a float64 copy, minus the
mean, divided by the scale), so every value is the library's.

It follows the policy of :mod:`audit.fast.policy`: a supported scikit-learn, plain inputs
(2-D float64 arrays of finite values), a once-per-process self-check against StandardScaler
(:func:`lean_scaler_verified`), and StandardScaler itself for anything else or after a
difference. It serves every StandardScaler the runner fits (audit/engine/runner.py's
``_Features``: once a trial in scope "train", once a round in scope "labeled", and for the
oracles' candidate sets through ``views_for``). Like the BLAS labels of a binary SVC, it is not
recorded in a trial's ``fast_path``: that flag names the fit routes of the models, and this
route changes no value of the library's.
"""
from __future__ import annotations

import functools

import numpy as np
from sklearn.preprocessing import StandardScaler

from audit.fast.policy import route_verified, sklearn_supported

LEAN_SCALER = "lean-scaler"
"""The route's name (its self-check's warning; ``benchmarks/strategies.py --off``)."""


def _plain(X: np.ndarray) -> bool:
    return (type(X) is np.ndarray and X.ndim == 2 and X.shape[0] > 0 and X.shape[1] > 0
            and X.dtype == np.float64 and bool(np.isfinite(X).all()))


def _statistics(fit_rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mean_, scale_) of StandardScaler().fit(fit_rows) for a plain (finite, float64) input: the
    NumPy operations of scikit-learn's ``_incremental_mean_and_var`` on a first fit (no
    previous samples, no weights, no NaN), in its order, then ``_is_constant_feature`` and
    ``_handle_zeros_in_scale``, without their array-namespace dispatch."""
    n = np.float64(fit_rows.shape[0])
    new_sum = np.sum(fit_rows, axis=0)
    mean = (np.zeros(fit_rows.shape[1]) + new_sum) / n  # last_sum (0.0) + new_sum, as the library adds them
    temp = fit_rows - new_sum / n
    correction = np.sum(temp, axis=0)
    temp **= 2
    unnormalized = np.sum(temp, axis=0)
    unnormalized -= correction ** 2 / n
    var = unnormalized / n
    eps = np.finfo(np.float64).eps
    constant = var <= n * eps * var + (n * mean * eps) ** 2
    scale = np.sqrt(var)
    scale[constant] = 1.0
    return mean, scale


def _transform(X: np.ndarray, mean: np.ndarray, scale: np.ndarray) -> np.ndarray:
    out = np.array(X, dtype=np.float64, order="C", copy=True)
    out -= mean
    out /= scale
    return out


def standard_scaled(fit_rows: np.ndarray, *arrays: np.ndarray) -> list[np.ndarray]:
    """Each of ``arrays`` as ``StandardScaler().fit(fit_rows).transform(array)`` gives it:
    through the lean route when the inputs are plain and its self-check passed here, else
    through StandardScaler."""
    if sklearn_supported() and _plain(fit_rows) and all(_plain(a) for a in arrays if a is not fit_rows) and lean_scaler_verified():
        mean, scale = _statistics(fit_rows)
        return [_transform(a, mean, scale) for a in arrays]
    scaler = StandardScaler().fit(fit_rows)
    return [scaler.transform(a) for a in arrays]


def _agrees_with_standard_scaler() -> bool:
    rng = np.random.default_rng(2021)
    cases = [rng.normal(size=(20, 6)) * rng.uniform(0.01, 100, size=6) + rng.normal(size=6) * 50,
             np.round(rng.normal(size=(7, 5)), 1),
             rng.normal(size=(1, 4)),  # one row: every feature constant
             np.column_stack([np.full(12, 3.7), rng.normal(size=12), np.full(12, 1e-12), rng.normal(size=12) * 1e8])]
    for fit_rows in cases:
        other = rng.normal(size=(9, fit_rows.shape[1])) * 10
        reference = StandardScaler().fit(fit_rows)
        mean, scale = _statistics(fit_rows)
        if not (np.array_equal(reference.mean_, mean) and np.array_equal(reference.scale_, scale)):
            return False
        for X in (fit_rows, other):
            expected, got = reference.transform(X), _transform(X, mean, scale)
            if not (np.array_equal(expected, got) and expected.dtype == got.dtype):
                return False
    return True


@functools.cache
def lean_scaler_verified() -> bool:
    """Does the lean route give StandardScaler's statistics and transforms here? Checked once
    per process on fixed inputs (wide and tiny scales, one row, constant and near-constant
    features); a difference warns once (FastPathFallbackWarning) and StandardScaler runs."""
    return route_verified(LEAN_SCALER, _agrees_with_standard_scaler,
                          "from StandardScaler; StandardScaler scales every labeled set")
