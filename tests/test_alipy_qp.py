"""The lean route of ALiPy BMDR/SPAL's QPs (adapters/alipy_qp.py): OSQP gets cvxpy's data
bit for bit, so the solutions and a trial's queries are the same; anything else, an
unverified route or a status other than "solved" goes to cvxpy, and each trial says
which route ran."""
from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

from adapters import MISSING, alipy_qp
from adapters import alipy as al
from audit.engine.runner import run_trial
from audit.fast.policy import FastPathFallbackWarning, recording
from audit.protocols import load_protocol
from tests.conftest import assert_same_replay, single_strategy
from tests.conftest import toy_pool as pool

ZHAN2021 = load_protocol("zhan2021")


def alipy_shaped(n: int, batch: str | None, seed: int) -> cp.Problem:
    """A problem as ALiPy's select builds it through the adapter's stand-in: BMDR's batch
    row is ``sum(x)``, SPAL's a weight vector with zeros (its easiness weights)."""
    rng = np.random.default_rng(seed)
    points = rng.random((n, 5))
    points[-1] += 30.0  # a far row: kernel entries that underflow to exact zeros
    kernel = np.exp(-((points[:, None] - points[None]) ** 2).sum(-1))
    stand_in = al._FixedQP(float_result=False)
    x = stand_in.Variable(n)
    q = rng.standard_normal(n) * 100.0
    constraints = [0 <= x, x <= 1]
    if batch == "sum":
        constraints.append(sum(x) == 2)
    elif batch == "weights":
        weights = np.clip(rng.random(n) * 1.5 - 0.3, 0, 1)
        constraints.append(weights @ x == 2)
    return stand_in.Problem(stand_in.Minimize(0.5 * stand_in.quad_form(x, 500.0 * kernel) + q.T @ x), constraints)


def bits(value) -> bytes:
    return np.asarray(value).tobytes()


def test_self_check_passes_here():
    assert alipy_qp.cvxpy_supported()
    assert alipy_qp.lean_qp_verified()
    assert not alipy_qp.cvxpy_supported("1.8.2") and not alipy_qp.cvxpy_supported("2.0")


@pytest.mark.parametrize("batch", ["sum", "weights", None])
@pytest.mark.parametrize("seed", [0, 1])
def test_osqp_gets_cvxpy_data_and_gives_the_same_solution(batch, seed):
    library, lean = alipy_shaped(60, batch, seed), alipy_shaped(60, batch, seed)
    qp = alipy_qp.recognise(lean)
    assert qp is not None and (qp.w is None) == (batch is None)
    cvxpy_data = library.get_problem_data(cp.OSQP)[0]
    data = alipy_qp.osqp_data(qp)
    for key, value in data.items():
        assert alipy_qp._same(value, cvxpy_data[key]), key
    with recording() as ran:
        result = lean.solve(solver=cp.OSQP)
    assert ran == {alipy_qp.LEAN_QP}
    expected = cp.Problem.solve(library, solver=cp.OSQP)  # cvxpy's own solve, not the stand-in's
    assert type(result) is type(expected) and bits(result) == bits(expected)
    assert bits(lean.variables()[0].value) == bits(library.variables()[0].value)


def test_other_shapes_go_to_cvxpy():
    n = 10
    x = cp.Variable(n)
    P = cp.psd_wrap(np.eye(n))
    q = np.arange(n, dtype=float)
    objective = cp.Minimize(0.5 * cp.quad_form(x, P) + q.T @ x)
    assert alipy_qp.recognise(cp.Problem(objective, [0 <= x, x <= 1])) is not None
    assert alipy_qp.recognise(cp.Problem(objective, [x >= 0, x <= 1])) is not None  # the same constraint
    assert alipy_qp.recognise(cp.Problem(objective, [-x <= 0, x <= 1])) is None
    assert alipy_qp.recognise(cp.Problem(objective, [0 <= x, x <= 2])) is None
    assert alipy_qp.recognise(cp.Problem(objective, [0 <= x, x <= 1, cp.sum(x) == 1])) is None  # cvxpy's sum atom
    assert alipy_qp.recognise(cp.Problem(cp.Minimize(cp.quad_form(x, P) + q.T @ x), [0 <= x, x <= 1])) is None
    assert alipy_qp.recognise(cp.Problem(cp.Maximize(-0.5 * cp.quad_form(x, P) - q.T @ x), [0 <= x, x <= 1])) is None
    nonneg = cp.Variable(n, nonneg=True)
    assert alipy_qp.recognise(cp.Problem(cp.Minimize(0.5 * cp.quad_form(nonneg, P) + q.T @ nonneg),
                                         [0 <= nonneg, nonneg <= 1])) is None
    problem = cp.Problem(objective, [-x <= 0, x <= 1])
    with recording() as ran:
        alipy_qp.solve(problem, problem.solve, solver=cp.OSQP)
    assert ran == {"library"} and problem.status == "optimal"


def test_a_status_other_than_solved_goes_to_cvxpy():
    """An infeasible batch row (all weights zero, b = 2): OSQP says infeasible, cvxpy solves
    it again and gives its own answer (value inf, no x)."""
    n = 8
    x = cp.Variable(n)
    problem = cp.Problem(cp.Minimize(0.5 * cp.quad_form(x, cp.psd_wrap(np.eye(n))) + np.ones(n).T @ x),
                         [0 <= x, x <= 1, np.zeros(n) @ x == 2])
    assert alipy_qp.recognise(problem) is not None
    with recording() as ran:
        result = alipy_qp.solve(problem, problem.solve, solver=cp.OSQP)
    assert ran == {"library"} and result == np.inf and x.value is None and problem.status == "infeasible"


def test_a_failed_self_check_warns_and_sends_every_qp_to_cvxpy(monkeypatch):
    real = alipy_qp.osqp_data

    def shifted(qp):
        data = real(qp)
        data["q"] = data["q"] + 1e-9
        return data

    monkeypatch.setattr(alipy_qp, "osqp_data", shifted)
    with pytest.warns(FastPathFallbackWarning, match="lean-qp: its self-check found a difference"):
        assert alipy_qp.lean_qp_verified.__wrapped__() is False
    monkeypatch.setattr(alipy_qp, "lean_qp_verified", lambda: False)
    problem = alipy_shaped(20, "sum", 3)
    with recording() as ran:
        problem.solve(solver=cp.OSQP)
    assert ran == {"library"}


@pytest.mark.parametrize("sid", ["bmdr", "spal"])
@pytest.mark.parametrize("dataset, trial_seed", [("sonar", 0), ("heart", 1)])
def test_trial_queries_are_the_library_ones(sid, dataset, trial_seed, monkeypatch, request):
    """A few zhan2021 rounds with the route on and off: the same queries, AUBCs and warnings;
    the store's fast_path says which route ran."""
    data = request.getfixturevalue(dataset)
    protocol = single_strategy(ZHAN2021, ZHAN2021.strategy(sid), budget=4)
    lean = run_trial(protocol, dataset, data.X, data.y, sid, trial_seed)
    monkeypatch.setattr(alipy_qp, "lean_qp_verified", lambda: False)
    library = run_trial(protocol, dataset, data.X, data.y, sid, trial_seed)
    lean_path, library_path = set(lean.fast_path.split("+")), set(library.fast_path.split("+"))
    assert alipy_qp.LEAN_QP in lean_path and alipy_qp.LEAN_QP not in library_path and "library" in library_path
    assert_same_replay(lean, library, lean.fast_path, library.fast_path)


def test_batch_constraint_kept_is_the_same_through_the_route(monkeypatch):
    """keep_batch_constraint=True uses the constrained solution and the result's value."""
    X, y, _ = pool(n=40, n_labeled=8)
    candidates = np.flatnonzero(y == MISSING)
    lean = al.BMDR(keep_batch_constraint=True).query(X, y, None, 2, candidates, None)
    monkeypatch.setattr(alipy_qp, "lean_qp_verified", lambda: False)
    library = al.BMDR(keep_batch_constraint=True).query(X, y, None, 2, candidates, None)
    assert list(lean) == list(library)
