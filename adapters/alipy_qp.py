"""The lean route of the box QPs ALiPy's BMDR and SPAL solve with cvxpy and OSQP.

Every round of BMDR's and SPAL's ``select`` builds a fresh cvxpy problem of one shape,

    minimize 0.5 * quad_form(x, psd_wrap(P)) + q @ x
    subject to 0 <= x, x <= 1 [, w @ x == b]

(``w`` all ones when ALiPy writes ``sum(x)``), and solves it with OSQP, twice a round
and about twice per ``select``. cvxpy spends most of that time turning the expression
tree into OSQP's matrices (``get_problem_data``: the reduction chain and cone-matrix
stuffing); OSQP's own solve is the small part. This route reads P, q, w and b off the
tree, writes the data cvxpy's chain writes for that shape (P as a CSC matrix without its
zeros; the equality row; -I over I with bounds 0 and 1) and calls cvxpy's own OSQP
interface (``solve_via_data``: the same settings, a fresh solver, no warm start, as for
any new problem), then unpacks the solution into the problem as cvxpy does. OSQP gets
the same matrices and settings, so the solution, and every pick, is the same bit for bit.

It runs only when all of these hold, and otherwise cvxpy's own ``solve`` runs:

1. cvxpy is in :data:`SUPPORTED_CVXPY`, the releases whose chain output it mirrors;
2. the problem is exactly that shape (:func:`recognise`), ``solve`` is asked for OSQP and
   nothing else, and every non-zero of P, q and w is a normal float far from overflow
   (scaling one by a power of two, as cvxpy's chain may, is then exact);
3. :func:`lean_qp_verified` has compared, once in this process, the data this route
   writes with cvxpy's ``get_problem_data`` and both routes' solutions, bit for bit; a
   difference warns once (FastPathFallbackWarning) and sends every solve to cvxpy;
4. OSQP reports "solved": any other status (inaccurate, infeasible, iteration limit) is
   solved again by cvxpy, which then raises or warns as it always does.

Each solve records its route (:data:`LEAN_QP` or ``library``) for the trial's
``fast_path``. What the route leaves out: the constraints' dual values (ALiPy never
reads them) and the problem's solver statistics.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable

import cvxpy as cp
import numpy as np
import scipy.sparse as sp
from cvxpy import settings
from cvxpy.atoms.affine.add_expr import AddExpression
from cvxpy.atoms.affine.binary_operators import MulExpression, multiply
from cvxpy.atoms.affine.index import index
from cvxpy.atoms.affine.wraps import psd_wrap
from cvxpy.atoms.quad_form import QuadForm
from cvxpy.constraints.nonpos import Inequality
from cvxpy.constraints.zero import Equality
from cvxpy.interface import DEFAULT_INTF
from cvxpy.reductions.solution import Solution
from cvxpy.reductions.solvers.qp_solvers.osqp_qpif import OSQP

from audit.fast.policy import LIBRARY, record_route, release_in, route_verified

LEAN_QP = "lean-qp"
"""The route's name in a trial's ``fast_path``."""

SUPPORTED_CVXPY = ((1, 9), (1, 10))
"""cvxpy releases (major, minor) whose OSQP problem data the route mirrors: from the
first, up to not including the second."""

_SAFE_MAGNITUDE = (2.0 ** -960, 2.0 ** 960)  # non-zeros inside this range scale by 2 and 0.5 exactly


@dataclasses.dataclass(frozen=True)
class BoxQP:
    """A recognised problem: minimize 0.5 x'Px + q'x over 0 <= x <= 1 [and w'x == b]."""

    x: cp.Variable
    P: np.ndarray
    q: np.ndarray
    w: np.ndarray | None
    b: float | None


def cvxpy_supported(version: str | None = None) -> bool:
    """Is ``version`` (default: the installed cvxpy's) in SUPPORTED_CVXPY?"""
    return release_in(cp.__version__ if version is None else version, SUPPORTED_CVXPY)


def _constant(expr: Any, shape: tuple[int, ...]) -> np.ndarray | None:
    """The float64 value of a cvxpy Constant of this shape, else None."""
    if type(expr) is not cp.Constant or expr.shape != shape:
        return None
    value = expr.value
    return value if isinstance(value, np.ndarray) and value.dtype == np.float64 else None


def _is_scalar(expr: Any, number: float) -> bool:
    value = _constant(expr, ())
    return value is not None and value == number


def _batch_row(lhs: Any, x: cp.Variable) -> np.ndarray | None:
    """The row w of ``w @ x`` or of Python's ``sum(x)`` (= x[0] + ... + x[n-1]: all ones)."""
    n = x.shape[0]
    if type(lhs) is MulExpression and len(lhs.args) == 2 and lhs.args[1] is x:
        return _constant(lhs.args[0], (n,))
    if type(lhs) is AddExpression and len(lhs.args) == n:
        for i, term in enumerate(lhs.args):
            if type(term) is not index or term.args[0] is not x or term.get_data()[0] != (slice(i, i + 1, 1),):
                return None
        return np.ones(n)
    return None


def recognise(problem: cp.Problem) -> BoxQP | None:
    """The BoxQP that ``problem`` is, or None when it is anything else."""
    objective = problem.objective
    if type(objective) is not cp.Minimize:
        return None
    expr = objective.args[0]
    if type(expr) is not AddExpression or len(expr.args) != 2:
        return None
    quadratic, linear = expr.args
    if type(quadratic) is not multiply or not _is_scalar(quadratic.args[0], 0.5):
        return None
    form = quadratic.args[1]
    if type(form) is not QuadForm or type(form.args[0]) is not cp.Variable or type(form.args[1]) is not psd_wrap:
        return None
    x = form.args[0]
    if x.ndim != 1 or any(value is not None and value is not False for value in x.attributes.values()):
        return None  # a variable with attributes (nonneg, bounds, ...) gets more constraints
    n = x.shape[0]
    P = _constant(form.args[1].args[0], (n, n))
    if P is None or type(linear) is not MulExpression or linear.args[1] is not x:
        return None
    q = _constant(linear.args[0], (n,))
    constraints = problem.constraints
    if q is None or len(constraints) not in (2, 3):
        return None
    lower, upper = constraints[:2]
    if not (type(lower) is Inequality and _is_scalar(lower.args[0], 0.0) and lower.args[1] is x
            and type(upper) is Inequality and upper.args[0] is x and _is_scalar(upper.args[1], 1.0)):
        return None
    w = b = None
    if len(constraints) == 3:
        batch = constraints[2]
        if type(batch) is not Equality:
            return None
        w, rhs = _batch_row(batch.args[0], x), _constant(batch.args[1], ())
        if w is None or rhs is None:
            return None
        b = float(rhs)
    if problem.variables() != [x]:
        return None
    return BoxQP(x, P, q, w, b)


def _safe(values: np.ndarray) -> bool:
    magnitude = np.abs(values[values != 0])
    return bool(np.isfinite(values).all() and (magnitude.size == 0 or (
        magnitude.min() >= _SAFE_MAGNITUDE[0] and magnitude.max() <= _SAFE_MAGNITUDE[1])))


def _int64_indices(matrix: sp.csc_array) -> sp.csc_array:
    """The matrix with int64 index arrays, as cvxpy's chain writes them."""
    matrix.indices, matrix.indptr = matrix.indices.astype(np.int64), matrix.indptr.astype(np.int64)
    return matrix


def osqp_data(qp: BoxQP) -> dict[str, Any]:
    """The problem data cvxpy's chain hands OSQP for ``qp`` (P, q, A, b, F, G)."""
    n = qp.q.shape[0]
    eye = np.arange(n, dtype=np.int64)
    box = sp.csc_array((np.tile([-1.0, 1.0], n), np.column_stack([eye, eye + n]).ravel(),
                        np.arange(0, 2 * n + 1, 2, dtype=np.int64)), shape=(2 * n, n))
    # an absent batch row is an empty matrix with scipy's default (int32) indices, as cvxpy's
    equality = _int64_indices(sp.csc_array(qp.w[None, :])) if qp.w is not None else sp.csc_array((0, n))
    return {settings.P: _int64_indices(sp.csc_array(qp.P)), settings.Q: qp.q.copy(), settings.A: equality,
            settings.B: np.array([] if qp.b is None else [qp.b], dtype=float),
            settings.F: box, settings.G: np.concatenate([np.zeros(n), np.ones(n)])}


def _solve_lean(problem: cp.Problem, qp: BoxQP) -> Any:
    """Solve through the route; None when OSQP did not report "solved"."""
    results = OSQP().solve_via_data(osqp_data(qp), True, False, {}, None)
    if OSQP.STATUS_MAP.get(results.info.status_val) != settings.OPTIMAL:
        return None
    n = qp.x.shape[0]
    primal = DEFAULT_INTF.const_to_matrix(np.array(results.x))
    primal = np.reshape(primal[0:n], qp.x.shape, order="F")
    attr = {settings.SOLVE_TIME: results.info.run_time, settings.EXTRA_STATS: results,
            settings.NUM_ITERS: results.info.iter}
    problem.unpack(Solution(settings.OPTIMAL, results.info.obj_val, {qp.x.id: primal}, {}, attr))
    return problem.value


def solve(problem: cp.Problem, library_solve: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``problem.solve(*args, **kwargs)``: through the route when it applies, else ``library_solve``."""
    if not args and kwargs == {"solver": cp.OSQP} and lean_qp_verified():
        qp = recognise(problem)
        if qp is not None and _safe(qp.P) and _safe(qp.q) and (qp.w is None or _safe(qp.w)):
            result = _solve_lean(problem, qp)
            if result is not None:
                record_route(LEAN_QP)
                return result
    record_route(LIBRARY)
    return library_solve(*args, **kwargs)


# --- the self-check -------------------------------------------------------------------

def _check_problems() -> list[cp.Problem]:
    """BMDR- and SPAL-shaped problems: a repaired kernel matrix with exact zeros, the
    batch row as ``sum(x)``, as weights with zeros, and absent."""
    rng = np.random.default_rng(20)
    n = 24
    points = rng.random((n, 3))
    points[5] += 40.0  # its kernel entries underflow to exact zeros
    kernel = np.exp(-((points[:, None] - points[None]) ** 2).sum(-1))
    P = 500.0 * kernel
    P = 0.5 * (P + P.T) + 1e-15 * np.eye(n)
    q = rng.standard_normal(n) * 50.0
    q[3] = 0.0
    weights = rng.random(n)
    weights[[1, 7]] = 0.0
    problems = []
    for batch in ("sum", "weights", None):
        x = cp.Variable(n)
        constraints = [0 <= x, x <= 1]
        if batch == "sum":
            constraints.append(sum(x) == 3)
        elif batch == "weights":
            constraints.append(weights @ x == 3)
        problems.append(cp.Problem(cp.Minimize(0.5 * cp.quad_form(x, cp.psd_wrap(P)) + q.T @ x), constraints))
    return problems


def _same(a: Any, b: Any) -> bool:
    """Bit for bit: type, shape, dtype and bytes (sparse: format, data, indices, indptr)."""
    if type(a) is not type(b):
        return False
    if sp.issparse(a):
        return a.format == b.format and a.shape == b.shape and all(
            _same(getattr(a, k), getattr(b, k)) for k in ("data", "indices", "indptr"))
    if isinstance(a, (np.ndarray, np.generic)):
        return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()
    return a == b


def _agrees_with_cvxpy() -> bool:
    for problem, twin in zip(_check_problems(), _check_problems()):
        qp = recognise(problem)
        if qp is None:
            return False
        cvxpy_data = problem.get_problem_data(cp.OSQP)[0]
        data = osqp_data(qp)
        if not all(_same(data[k], cvxpy_data[k]) for k in data):
            return False
        expected = problem.solve(solver=cp.OSQP)
        got = _solve_lean(twin, recognise(twin))
        if got is None or not _same(got, expected) or not _same(twin.variables()[0].value,
                                                                  problem.variables()[0].value):
            return False
    return True


@functools.cache
def lean_qp_verified() -> bool:
    """Does the route give cvxpy's data and solutions here? Run once per process; on a
    supported cvxpy a difference, or the check failing, warns once (FastPathFallbackWarning)."""
    return cvxpy_supported() and route_verified(
        LEAN_QP, _agrees_with_cvxpy, f"from cvxpy {cp.__version__}'s OSQP path; every QP is solved by cvxpy")
