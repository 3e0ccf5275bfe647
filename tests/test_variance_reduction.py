"""native.vr, the variance reduction re-implemented from libact 0.1.6, and its cross-check.

Always run: the C code's arithmetic (sigma read as a C int; the closed-form trace against
the matrices the C code builds), the picks that follow from it (sigma = 100: the first
unlabeled row), the conformance checks. With a libact whose VarianceReduction extension is
built (in this environment, or in the one AL_AUDIT_LIBACT_VR_PYTHON names; ``.ci/run``
builds one), libact's own picks are compared with native.vr's on real data.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

import adapters
from adapters.native import VarianceReduction, libact_sigma_term, libact_trace_variance
from adapters.testing import check_strategy, toy_pool
from audit.engine.models import ModelSpec
from audit.errors import AuditError, StrategyError
from audit.fast.linear import LeanLR
from audit.fast.policy import LIBRARY, recording
from tests.conftest import dataset_or_skip

LR = ModelSpec("lr", {"C": 1.0})
REFERENCE_SCRIPT = Path(__file__).with_name("libact_vr_reference.py")
PYTHON_VARIABLE = "AL_AUDIT_LIBACT_VR_PYTHON"


def native_picks(X, y, y_true, rounds, sigma, n_jobs=1, random_state=6211, query_model=LR):
    strategy = VarianceReduction(query_model=query_model, random_state=random_state, sigma=sigma, n_jobs=n_jobs)
    y = y.copy()
    picks = []
    with threadpool_limits(1):
        for _ in range(rounds):
            row = int(strategy.query(X, y, None, 1, np.flatnonzero(y == -1))[0])
            picks.append(row)
            y[row] = y_true[row]
    return picks


# --- the C code's arithmetic -------------------------------------------------------------

def test_sigma_is_read_as_a_c_int():
    # 100.0 = 0x4059000000000000: low 32 bits 0, so 1.0/0*0 = NaN; 0.1's low bits are not 0
    for sigma in (100.0, 1.0, 2.0, 64.0):
        assert np.isnan(libact_sigma_term(sigma))
    for sigma in (0.1, 3.7, 1e-3):
        assert libact_sigma_term(sigma) == pytest.approx(1.0, abs=1e-15)


def c_code_estvar(sigma_term, PI, X, epi, ex):
    """estVar as variance_reduction.c builds it: A, F explicitly, trace(A pinv(F))."""
    n, K = PI.shape
    d = X.shape[1]
    A = np.zeros((K * d, K * d))
    for pi, x in zip(PI, X):
        g = np.zeros((K * d, K))
        for p in range(K):
            for i in range(d):
                for c in range(K):
                    g[p * d + i, c] = pi[p] * (1 - pi[p]) * x[i] if p == c else -pi[p] * pi[c] * x[i]
        A += g @ g.T
    F = np.zeros((K * d, K * d))
    for p in range(K):
        for i in range(d):
            for q in range(K):
                for j in range(d):
                    if p == q and i == j:
                        F[p * d + i, q * d + j] = ex[i] * ex[i] * epi[p] * (1 - epi[p]) + sigma_term
                    elif p == q:
                        F[p * d + i, q * d + j] = ex[i] * ex[j] * epi[p] * (1 - epi[p])
                    else:
                        F[p * d + i, q * d + j] = ex[i] * ex[j] * epi[p] * epi[q]
    return float(np.trace(A @ np.linalg.pinv(F)))


@pytest.mark.parametrize("K", [2, 3])
def test_closed_form_trace_equals_the_c_codes_matrices(K):
    rng = np.random.default_rng(K)
    for _ in range(5):
        X, ex = rng.normal(size=(12, 4)), rng.normal(size=4)
        PI, epi = 1 / (1 + np.exp(-rng.normal(size=(12, K)))), 1 / (1 + np.exp(-rng.normal(size=K)))
        expected = c_code_estvar(1.0, PI, X, epi, ex)
        assert libact_trace_variance(1.0, PI, X, epi, ex) == pytest.approx(expected, rel=1e-9)
    assert libact_trace_variance(float("nan"), PI, X, epi, ex) == 0.0  # the failed SVD keeps nothing


# --- picks --------------------------------------------------------------------------------

def test_sigma_100_picks_the_first_unlabeled_row():
    """lu2023's sigma = 100: every score is 0.0, so VR is Uniform in pool order."""
    X, y, y_true = toy_pool(30, 6)
    unlabeled = np.flatnonzero(y == -1)
    assert native_picks(X, y, y_true, 4, 100.0) == unlabeled[:4].tolist()


def test_sigma_0_1_scores_the_candidates():
    X, y, y_true = toy_pool(30, 6)
    picks = native_picks(X, y, y_true, 3, 0.1)
    assert picks != np.flatnonzero(y == -1)[:3].tolist() and len(set(picks)) == 3


def test_refuses_what_it_cannot_do():
    with pytest.raises(AuditError, match="LR query model"):
        VarianceReduction(query_model=ModelSpec("svm-rbf"))
    with pytest.raises(AuditError, match="sigma must be a positive number"):
        VarianceReduction(query_model=LR, sigma=0)
    with pytest.raises(AuditError, match="does not use parameter"):
        VarianceReduction(query_model=LR, optimality="trace")  # libact never reads it
    X, y, _ = toy_pool(20, 6)
    with pytest.raises(StrategyError, match="one example at a time"):
        VarianceReduction(query_model=LR).query(X, y, None, 2, np.flatnonzero(y == -1))


def test_conforms_with_a_scoring_sigma():
    with threadpool_limits(1):
        check_strategy(VarianceReduction, [{"sigma": 0.1, "n_jobs": 2}])


# --- the cross-check against libact's own VarianceReduction --------------------------------

def libact_python() -> str:
    """A Python whose libact has the VarianceReduction extension, or a skip saying why there is none."""
    given = os.environ.get(PYTHON_VARIABLE)
    if given:
        return given
    if adapters.unavailable_reason("libact.vr") is None:
        return sys.executable
    pytest.skip(f"libact's VarianceReduction extension is not built here and {PYTHON_VARIABLE} is not set "
                "(.ci/run builds one)")


def libact_picks(python, tmp_path, X, y, y_true, rounds, sigma, n_jobs=1, random_state=6211):
    data = tmp_path / "pool.npz"
    np.savez(data, X=X, y=y, y_true=y_true, rounds=rounds, sigma=sigma, n_jobs=n_jobs, C=1.0,
             random_state=random_state)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    done = subprocess.run([python, str(REFERENCE_SCRIPT), str(data)], capture_output=True, text=True, env=env,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def real_pool(name, n, n_labeled, seed):
    """n rows of a real data set drawn with ``seed``, standardised, n_labeled labeled (both classes)."""
    from sklearn.preprocessing import StandardScaler

    data = dataset_or_skip(name)
    rng = np.random.default_rng(seed)
    rows = rng.permutation(data.y.size)[:n]
    X, y_true = StandardScaler().fit_transform(data.X[rows]), data.y[rows].astype(np.int64)
    y = np.full(n, -1, dtype=np.int64)
    labeled = np.concatenate([np.flatnonzero(y_true == c)[:n_labeled // 2] for c in (0, 1)])
    y[labeled] = y_true[labeled]
    return X, y, y_true


CROSS_CHECKS = [  # (data set, rows, labeled, seed, rounds, sigma, n_jobs); small: libact's VR is slow
    ("heart", 50, 10, 0, 3, 0.1, 1),
    ("heart", 50, 10, 1, 3, 0.1, 2),  # n_jobs changes libact's chunks, and so its scores
    ("sonar", 40, 10, 0, 3, 0.1, 1),
    ("heart", 40, 20, 2, 3, 100.0, 1),  # lu2023's sigma: the first unlabeled row, every round
]


@pytest.mark.parametrize("name,n,n_labeled,seed,rounds,sigma,n_jobs", CROSS_CHECKS)
def test_native_picks_equal_libacts(tmp_path, name, n, n_labeled, seed, rounds, sigma, n_jobs):
    python = libact_python()
    X, y, y_true = real_pool(name, n, n_labeled, seed)
    expected = libact_picks(python, tmp_path, X, y, y_true, rounds, sigma, n_jobs)
    assert native_picks(X, y, y_true, rounds, sigma, n_jobs) == expected


@pytest.mark.parametrize("name, seed", [("sonar", 0), ("heart", 1), ("sonar", 2)])
def test_zhan2021s_picks_are_the_same_with_the_lean_lr_fits_on_and_off(monkeypatch, name, seed):
    """zhan2021's VR (liblinear LR, -1/+1 labels and a hypothetical third class): the lean binary
    and one-vs-rest fits leave every pick as OvRLogisticRegression's fits make it."""
    zhan_lr = ModelSpec("lr", {"solver": "liblinear"})
    X, y, y_true = real_pool(name, 60, 12, seed)
    with recording() as fast_routes:
        fast = native_picks(X, y, y_true, 4, 0.1, query_model=zhan_lr)
    monkeypatch.setattr(LeanLR, "_fast_path_verified", lambda self: False)
    with recording() as library_routes:
        library = native_picks(X, y, y_true, 4, 0.1, query_model=zhan_lr)
    assert fast == library
    assert fast_routes == {"lean-lr"} and library_routes == {LIBRARY}
