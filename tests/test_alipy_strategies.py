"""ALiPy strategies: EER, BMDR, SPAL, LAL (lu2023 / zhan2021) and the cross-implementation set.

Each available strategy replays a few rounds of a lu2023 trial on sonar and repeats
itself; no strategy's picks move when the labels the learner has not seen are
scrambled; BMDR/SPAL solve with lu2023's PSD repair where plain cvxpy refuses; LAL
runs on training data regenerated locally and says so.
"""
from __future__ import annotations

import numpy as np
import pytest
from sklearn.svm import SVC

import adapters
from adapters import MISSING
from adapters import alipy as al
from audit.engine.models import ModelSpec
from audit.engine.runner import run_trial
from audit.engine.splits import make_split
from audit.protocols import StrategySpec, load_protocol
from tests.conftest import single_strategy
from tests.conftest import toy_pool as pool
from tests.plain_libraries import plain_libraries

LR = ModelSpec("lr", {"C": 1.0})
LU2023 = load_protocol("lu2023")

# One binding per ALiPy strategy: lu2023's own where it has one, otherwise a plain one.
SPECS = {
    "eer": LU2023.strategy("eer"),
    "bmdr": LU2023.strategy("bmdr"),
    "spal": LU2023.strategy("spal"),
    "lal": LU2023.strategy("lal"),
    "uncertainty": StrategySpec("uncertainty", "alipy.uncertainty", {"measure": "margin"}, LR),
    "qbc": StrategySpec("qbc", "alipy.qbc", {}, LR),
    "quire": StrategySpec("quire", "alipy.quire", {}, None),
    "coreset": StrategySpec("coreset", "alipy.coreset", {}, None),
    "graph": StrategySpec("graph", "alipy.graph", {}, None),
    "random": StrategySpec("random", "alipy.random", {}, None),
}
AVAILABLE = [s for s in SPECS if adapters.unavailable_reason(f"alipy.{s}") is None]








def test_registry_lists_every_alipy_strategy():
    assert {f"alipy.{s}" for s in SPECS} <= set(adapters.implementations())
    assert set(AVAILABLE) >= {"eer", "bmdr", "spal", "uncertainty", "qbc", "quire", "coreset", "graph", "random"}


def test_protocols_bind_the_alipy_four():
    zhan = load_protocol("zhan2021")
    for protocol in (LU2023, zhan):
        for sid in ("eer", "bmdr", "spal", "lal"):
            assert protocol.strategy(sid).implementation == f"alipy.{sid}"
    assert LU2023.strategy("eer").query_model.params["probability"] is True
    assert zhan.strategy("eer").query_model == ModelSpec("lr", {"solver": "liblinear"})
    assert LU2023.strategy("bmdr").params["beta"] == zhan.strategy("bmdr").params["beta"] == 1000.0
    assert LU2023.strategy("spal").params["lambda_pace"] == zhan.strategy("spal").params["lambda_pace"] == 0.01
    assert LU2023.strategy("lal").params == {"mode": "LAL_iterative", "cls_est": 50}


def test_alipys_modules_alone_see_the_names_python_3_10_and_numpy_2_removed():
    import collections.abc
    import sys

    assert not hasattr(collections, "Iterable") and not hasattr(collections, "Mapping")
    for name in ("NaN", "infty", "NINF", "trapz"):
        assert name not in vars(np)
    for module in (al._ql, sys.modules["alipy.index.index_collections"], sys.modules["alipy.utils.misc"]):
        assert module.np is al.NUMPY_VIEW
    assert al._ql.collections.Iterable is collections.abc.Iterable
    assert al._ql.collections.Counter is collections.Counter  # everything else is the real module's
    assert al._ql.np.NaN != al._ql.np.NaN and al._ql.np.infty == np.inf and al._ql.np.trapz is np.trapezoid
    assert al._ql.np.linalg is np.linalg and al._ql.np.random is np.random


# A fresh interpreter: the numpy and collections modules and numpy's global RNG before
# the adapter is imported, then after every ALiPy strategy has been built and asked twice.
_UNTOUCHED_PROCESS = """
import collections, json, types
import numpy as np

def names(module):
    return {n for n, v in vars(module).items() if not isinstance(v, types.ModuleType)}

np.random.seed(2024)
before = names(np), names(collections), np.random.get_state()
import adapters
from adapters import MISSING
from audit.engine.models import ModelSpec
from tests.conftest import toy_pool

X, y, _ = toy_pool()
LR = ModelSpec("lr", {"C": 1.0})
ran = []
for sid in ("eer", "bmdr", "spal", "uncertainty", "qbc", "quire", "coreset", "graph", "random"):
    cls = adapters.strategy_class("alipy." + sid)
    strategy = cls(query_model=LR if cls.model_use == "own" else None, random_state=0)
    model = (ModelSpec("svm-rbf", {"probability": True}).build(0).fit(X[y != MISSING], y[y != MISSING])
             if cls.model_use == "fitted" else None)
    for _ in range(2):
        strategy.query(X, y, model, 1, np.flatnonzero(y == MISSING), np.random.default_rng(0))
    ran.append(sid)
state = np.random.get_state()
print(json.dumps({"ran": ran, "numpy": sorted(names(np) - before[0]), "collections": sorted(names(collections) - before[1]),
                  "rng": all(np.array_equal(a, b) for a, b in zip(before[2], state))}))
"""


def test_alipy_queries_leave_numpy_collections_and_the_global_rng_as_they_were():
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, "-c", _UNTOUCHED_PROCESS], cwd=root, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(root)}, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.splitlines()[-1])
    assert len(seen["ran"]) == 9
    assert seen["numpy"] == [] and seen["collections"] == []  # no alias added to either module
    assert seen["rng"] is True


@pytest.mark.parametrize("sid", AVAILABLE)
def test_replays_a_few_rounds_deterministically(sid, sonar):
    protocol = single_strategy(LU2023, SPECS[sid])
    first = run_trial(protocol, "sonar", sonar.X, sonar.y, sid, 0)
    assert first.status == "ok", first.error
    assert len(first.rounds) == 6 and all(len(r.queried) == 1 for r in first.rounds[1:])
    again = run_trial(protocol, "sonar", sonar.X, sonar.y, sid, 0)
    assert again.query_hash == first.query_hash


@pytest.mark.parametrize("sid", AVAILABLE)
def test_picks_do_not_depend_on_hidden_labels(sid, sonar):
    """Scramble the label of every train row the learner never sees: same queries."""
    protocol = single_strategy(LU2023, SPECS[sid])
    first = run_trial(protocol, "sonar", sonar.X, sonar.y, sid, 0)
    assert first.status == "ok", first.error
    split = make_split(protocol, sonar.y, 0)
    seen = set(split.labeled.tolist()) | {row for r in first.rounds for row in r.queried}
    hidden = np.array([row for row in split.pool if row not in seen])
    y = np.array(sonar.y, copy=True)
    y[hidden] = np.random.default_rng(7).integers(0, 2, size=hidden.size)
    y[hidden[:10]] = 1 - y[hidden[:10]]  # at least some labels surely change
    assert make_split(protocol, y, 0).pool.tolist() == split.pool.tolist()
    second = run_trial(protocol, "sonar", sonar.X, y, sid, 0)
    assert second.status == "ok", second.error
    assert second.query_hash == first.query_hash


def _strategy_and_model(sid, X, y):
    """A fresh ALiPy strategy and, when it queries with a fitted model, that model on the labeled rows."""
    cls = adapters.strategy_class(f"alipy.{sid}")
    strategy = cls(query_model=LR if cls.model_use == "own" else None, random_state=0)
    model = LR.build(0).fit(X[y != MISSING], y[y != MISSING]) if cls.model_use == "fitted" else None
    return strategy, model


@pytest.mark.parametrize("sid", AVAILABLE)
def test_alipy_holds_no_label_of_an_unlabeled_row(sid):
    X, y, y_true = pool()
    strategy, model = _strategy_and_model(sid, X, y)
    strategy.query(X, y, model, 1, np.flatnonzero(y == MISSING), np.random.default_rng(0))
    held = np.asarray(strategy._y_alipy)
    unlabeled = y == MISSING
    assert np.unique(held[unlabeled]).size == 1  # one placeholder, whatever the true labels
    assert held[unlabeled][0] in (MISSING, 0, int(y[~unlabeled].min()))


def test_label_encodings():
    y = np.array([1, MISSING, 0, MISSING, 1])
    assert al.Uncertainty().alipy_labels(y).tolist() == [1, MISSING, 0, MISSING, 1]
    assert al.EER().alipy_labels(y).tolist() == [1, 0, 0, 0, 1]  # a labeled class: np.unique(y) = classes
    assert al.BMDR().alipy_labels(y).tolist() == [-1, 0, 1, 0, -1]  # ALiPy: smaller label -> +1


def test_uncertainty_margin_through_the_probability_view_is_the_smallest_margin():
    """A model without predict_proba (SVC) is seen through a logistic of its decision values."""
    from sklearn.svm import SVC

    X, y, _ = pool()
    model = SVC(kernel="rbf", gamma="auto").fit(X[y != MISSING], y[y != MISSING])
    assert not hasattr(model, "predict_proba")
    candidates = np.flatnonzero(y == MISSING)
    (picked,) = al.Uncertainty(measure="margin").query(X, y, model, 1, candidates, None)
    assert picked == candidates[np.argmin(np.abs(model.decision_function(X[candidates])))]


def test_eer_needs_a_probabilistic_query_model():
    from sklearn.svm import SVC

    from audit.errors import StrategyError

    X, y, _ = pool()
    model = SVC().fit(X[y != MISSING], y[y != MISSING])
    with pytest.raises(StrategyError, match="predict_proba"):
        al.EER().query(X, y, model, 1, np.flatnonzero(y == MISSING), None)


# --- BMDR / SPAL and lu2023's PSD repair ---------------------------------------------------

def bad_kernel(n: int, level: float = 1e-12, seed: int = 0) -> np.ndarray:
    """An RBF kernel with duplicated rows, made asymmetric and indefinite at ``level``."""
    from sklearn.metrics.pairwise import rbf_kernel

    Z = np.random.default_rng(seed).normal(size=(n - n // 4, 3))
    Z = np.vstack([Z, Z[: n // 4]])
    K = rbf_kernel(Z, gamma=1.0) - level * np.eye(n)
    K[0, 1] += level
    assert np.abs(K - K.T).max() > 0
    assert np.linalg.eigvalsh(0.5 * (K + K.T)).min() < -level / 10
    return K


def test_psd_repair_solves_where_plain_cvxpy_refuses():
    import cvxpy as cp

    P = 500 * bad_kernel(20)
    q = -np.ones(20)
    x = cp.Variable(20)
    constraints = [x >= 0, x <= 1, cp.sum(x) == 1]
    with pytest.raises((cp.error.DCPError, ValueError)):
        cp.Problem(cp.Minimize(0.5 * cp.quad_form(x, P) + q @ x), constraints).solve(solver=cp.OSQP)
    problem = cp.Problem(cp.Minimize(0.5 * cp.quad_form(x, al.psd_fixed(P)) + q @ x), constraints)
    problem.solve(solver=cp.OSQP)
    assert problem.status == "optimal" and abs(x.value.sum() - 1) < 1e-6


# cvxpy refuses a QP matrix whose smallest eigenvalue is below -1e-10; BMDR's matrix is
# 500 K (beta = 1000), SPAL's 0.05 K (mu = 0.1), hence the level at which each one breaks.
@pytest.mark.parametrize("sid, breaking_level", [("bmdr", 1e-12), ("spal", 1e-8)])
def test_kernel_qp_strategies_solve_on_a_broken_kernel(sid, breaking_level):
    """Repaired, select picks on a kernel broken at the 1e-12 level (and at the level that breaks
    the unrepaired library); unrepaired, ALiPy's select fails there (lu2023 Appendix D)."""
    import cvxpy as cp

    X, y, _ = pool(n=40, n_labeled=8)
    strategy = adapters.strategy_class(f"alipy.{sid}")()
    candidates = np.flatnonzero(y == MISSING)
    strategy.query(X, y, None, 1, candidates, None)  # builds the ALiPy object
    qs = strategy._qs
    for level in (1e-12, breaking_level):
        qs._K = bad_kernel(40, level)
        picked = strategy.query(X, y, None, 1, candidates, None)
        assert picked[0] in candidates

    raw = type(qs)(X, al._KernelQP._dummy_labels(40))  # the library as shipped: cvxpy module, no repair
    raw.y = strategy._y_alipy
    raw._K = bad_kernel(40, breaking_level)
    with pytest.raises((cp.error.DCPError, cp.error.DGPError, ValueError)):
        raw.select(np.flatnonzero(y != MISSING), candidates, batch_size=1, qp_solver="OSQP")


@pytest.mark.parametrize("keep, expected", [(False, {3, 2}), (True, {3})])
def test_batch_constraint_as_alipy_runs_it(keep, expected, monkeypatch):
    """cvxpy returns numpy.float64, so ALiPy's ``type(result) == float`` check fails and it re-solves
    the relaxed QP (2 constraints) unless the adapter hands back a Python float."""
    made = []
    original = al._FixedQP.Problem

    def recording(self, objective, constraints, *args, **kwargs):
        made.append(len(constraints))
        return original(self, objective, constraints, *args, **kwargs)

    monkeypatch.setattr(al._FixedQP, "Problem", recording)
    X, y, _ = pool(n=40, n_labeled=8)
    al.BMDR(keep_batch_constraint=keep).query(X, y, None, 1, np.flatnonzero(y == MISSING), None)
    assert set(made) == expected


def test_kernel_qp_strategies_are_binary_only():
    from audit.errors import StrategyError

    X, y, _ = pool()
    y[y == 1] = 2
    with pytest.raises(StrategyError, match="binary"):
        al.SPAL().query(X, y, None, 1, np.flatnonzero(y == MISSING), None)


# --- the others ----------------------------------------------------------------------------

def test_graph_density_keeps_excluded_rows_density():
    X, y, _ = pool()
    strategy = al.GraphDensity()
    unlabeled = np.flatnonzero(y == MISSING)
    strategy.query(X, y, None, 1, unlabeled, None)
    before = strategy._qs.graph_density.copy()
    subset = unlabeled[::3]
    picked = strategy.query(X, y, None, 2, subset, None)
    assert set(picked.tolist()) <= set(subset.tolist())
    others = np.setdiff1d(unlabeled, subset)
    assert np.array_equal(strategy._qs.graph_density[others], before[others])


@pytest.mark.parametrize("sid", AVAILABLE)
def test_every_alipy_query_leaves_numpys_global_rng_as_it_was(sid):
    X, y, _ = pool()
    strategy, model = _strategy_and_model(sid, X, y)
    np.random.seed(99)
    before = np.random.get_state()
    for _ in range(2):
        strategy.query(X, y, model, 1, np.flatnonzero(y == MISSING), np.random.default_rng(0))
    assert all(np.array_equal(a, b) for a, b in zip(before, np.random.get_state()))


def test_random_restores_numpys_global_rng():
    X, y, _ = pool()
    np.random.seed(123)
    expected = np.random.random_sample()
    np.random.seed(123)
    al.Random(random_state=0).query(X, y, None, 3, np.flatnonzero(y == MISSING), np.random.default_rng(0))
    assert np.random.random_sample() == expected


def test_lal_runs_offline_on_regenerated_data_and_says_so(monkeypatch, sonar):
    """Without the authors' file LAL trains on data regenerated locally (a tiny generation
    here, tests/conftest.py); with AL_AUDIT_LAL_DATA naming a directory without it, it
    refuses rather than silently using other data."""
    assert adapters.unavailable_reason("alipy.lal") is None
    assert "regenerated locally" in al.LAL.capability_note()
    monkeypatch.setenv(al.LAL_DATA_ENV, "/nonexistent")
    reason = adapters.unavailable_reason("alipy.lal")
    assert reason and al.LAL_DATA_ENV in reason and "regenerated" in reason
    result = run_trial(single_strategy(LU2023, SPECS["lal"]), "sonar", sonar.X, sonar.y, "lal", 0)
    assert result.status == "error" and al.LAL_DATA_ENV in result.error


@pytest.mark.parametrize("sid", ["eer", "bmdr", "spal", "quire", "uncertainty"])
def test_placeholder_gives_the_pick_of_alipy_fed_the_true_labels(sid):
    """The published drivers handed ALiPy the full true y; the adapter's placeholder changes nothing."""
    X, y, y_true = pool()
    labeled, candidates = np.flatnonzero(y != MISSING), np.flatnonzero(y == MISSING)
    cls = adapters.strategy_class(f"alipy.{sid}")
    model = LR.build(0).fit(X[labeled], y[labeled]) if cls.model_use == "fitted" else None
    (picked,) = cls().query(X, y, model, 1, candidates, None)

    L, U = al.IndexCollection(labeled), al.IndexCollection(candidates)
    if sid == "eer":
        direct = al._ql.QueryExpectedErrorReduction(X, y_true).select(L, U, model=model, batch_size=1)
    elif sid in ("bmdr", "spal"):
        raw = getattr(al._ql, cls.alipy_class)(X, y_true)  # ALiPy recodes 0 -> +1, 1 -> -1 itself
        raw._K = 0.5 * (raw._K + raw._K.T)
        raw._cvxpy = al._FixedQP(float_result=False)
        direct = raw.select(L, U, batch_size=1, qp_solver="OSQP")
    elif sid == "quire":
        direct = al._ql.QueryInstanceQUIRE(X, 2 * y_true - 1, np.arange(len(y))).select(L, U)  # signed labels
    else:
        direct = al._ql.QueryInstanceUncertainty(X, y_true, measure="entropy").select(
            L, U, model=model, batch_size=1)
    assert picked == int(np.asarray(direct).ravel()[0])


# --- speed-ups that must not move a pick -------------------------------------------------

@pytest.mark.parametrize("sid", ["eer", "bmdr"])
def test_the_speed_ups_give_alipys_own_picks(sid, sonar):
    """EER with the vectorised log loss and LeanSVC, BMDR with the repeated-pinv reuse:
    the queries and every accuracy of 12 rounds of two lu2023 trials equal ALiPy's own."""
    protocol = single_strategy(LU2023, SPECS[sid], budget=12)
    fast = [run_trial(protocol, "sonar", sonar.X, sonar.y, sid, seed) for seed in (0, 5)]
    with plain_libraries():
        assert type(SPECS["eer"].query_model.build(0)) is SVC
        plain = [run_trial(protocol, "sonar", sonar.X, sonar.y, sid, seed) for seed in (0, 5)]
    for a, b in zip(fast, plain):
        assert a.status == b.status == "ok", (a.error, b.error)
        assert [r.queried for r in a.rounds] == [r.queried for r in b.rounds]
        assert [r.accuracy for r in a.rounds] == [r.accuracy for r in b.rounds]


def test_bmdr_reuses_the_pseudo_inverse_of_a_repeated_matrix(monkeypatch):
    """On heart, BMDR's ADMM runs many iterations a round (on sonar it stops after one)."""
    from audit.engine.datasets import load_dataset

    heart = load_dataset("heart")
    calls = []
    real_pinv = np.linalg.pinv
    monkeypatch.setattr(np.linalg, "pinv", lambda a, *args, **kw: calls.append(1) or real_pinv(a, *args, **kw))
    protocol = single_strategy(LU2023, SPECS["bmdr"], budget=6)
    fast = run_trial(protocol, "heart", heart.X, heart.y, "bmdr", 0)
    n_fast = len(calls)
    with plain_libraries():
        plain = run_trial(protocol, "heart", heart.X, heart.y, "bmdr", 0)
    assert fast.status == plain.status == "ok" and fast.query_hash == plain.query_hash
    assert 0 < n_fast < (len(calls) - n_fast) / 5, (n_fast, len(calls) - n_fast)  # iterations reuse one SVD


def test_bmdr_swaps_numpy_for_its_own_select_and_leaves_alipys_module_alone(monkeypatch):
    """The repeated-pinv numpy is a global of BMDR's copy of ``select`` only: while it runs,
    ALiPy's module (and so any other thread's ALiPy call) still has its own ``np``."""
    seen = []
    original = al._FixedQP.Problem

    def recording(self, *args, **kwargs):
        seen.append(al._ql.np)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(al._FixedQP, "Problem", recording)
    alipys_own = al._ql.np
    X, y, _ = pool(n=40, n_labeled=8)
    al.BMDR().query(X, y, None, 1, np.flatnonzero(y == MISSING), None)
    assert seen and all(module is alipys_own for module in seen)


def test_the_repeat_pinv_view_recomputes_for_a_changed_matrix():
    view = al._RepeatPinvNumpy()
    a = np.array([[2.0, 1.0], [1.0, 3.0]])
    first = view.linalg.pinv(a)
    assert view.linalg.pinv(a.copy()) is first and not first.flags.writeable
    b = a.copy()
    b[0, 0] = np.nextafter(2.0, 3.0)
    assert np.array_equal(view.linalg.pinv(b), np.linalg.pinv(b)) and view.linalg.pinv(b) is not first
    assert view.eye is np.eye  # everything else is numpy


@pytest.mark.parametrize("n_rows, n_classes", [(1, 2), (33, 2), (200, 2), (17, 4)])
def test_the_sequential_log_loss_is_alipys_float(n_rows, n_classes):
    prob = np.random.default_rng(n_rows).dirichlet(np.ones(n_classes) * 0.3, size=n_rows)
    qs = al._ql.QueryExpectedErrorReduction(np.zeros((2, 1)), np.array([0, 1]))
    assert al.sequential_log_loss(prob) == qs.log_loss(prob)


def test_without_the_log_loss_self_check_eer_keeps_alipys_loop(monkeypatch, sonar):
    monkeypatch.setattr(al, "sequential_log_loss_verified", lambda: False)
    eer = adapters.strategy_class("alipy.eer")(random_state=0)
    qs = eer._build(sonar.X[:30], np.zeros(30, dtype=np.int64))
    assert "log_loss" not in vars(qs)
    monkeypatch.undo()
    assert vars(eer._build(sonar.X[:30], np.zeros(30, dtype=np.int64)))["log_loss"] is al.sequential_log_loss


# --- process-wide state and Dask's threads ---------------------------------------------------

@pytest.mark.parametrize("threads", [1, 2])
def test_a_dask_worker_with_other_threads_refuses_an_adapter_with_process_wide_state(threads, sonar):
    """alipy.random seeds numpy's global RNG for its call; BMDR/SPAL silence the stdout
    descriptor: beside other trials in the same process that is refused, in one line."""
    from distributed import LocalCluster

    from audit.engine.executors import DaskExecutor
    from audit.engine.runner import TrialTask
    from audit.errors import AuditError

    random, uncertainty = (single_strategy(LU2023, SPECS[sid]) for sid in ("random", "uncertainty"))
    with LocalCluster(n_workers=1, threads_per_worker=threads, processes=False, dashboard_address=None) as cluster, \
            DaskExecutor(cluster.scheduler_address) as executor:
        if threads > 1:
            with pytest.raises(AuditError, match=r"^alipy.random changes process-wide state .* 1 other thread"):
                list(executor.run([TrialTask(random, "sonar", None, "random", 0)]))
        else:
            [result] = executor.run([TrialTask(random, "sonar", None, "random", 0)])
            assert result.status == "ok", result.error
        [result] = executor.run([TrialTask(uncertainty, "sonar", None, "uncertainty", 0)])
        assert result.status == "ok", result.error
