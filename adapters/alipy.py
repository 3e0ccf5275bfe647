"""ALiPy 1.2.5 strategies.

ALiPy's query strategies are built on the whole data set (``X``, ``y``) and asked with
global index collections (``label_index``, ``unlabel_index``). The adapter hands ALiPy
the pool it is given (the train rows in pool layout) and index collections of the
labeled rows and of the candidates, keeps one ALiPy object per pool (several
precompute kernels or graphs) and copies the labels known so far into it before every
call.

Labels: ALiPy takes the full ``y`` and its published users passed the TRUE labels of the
unlabeled rows. The adapter never does: unlabeled entries hold a placeholder, which is
``MISSING`` unless the ALiPy class derives its class list from the whole ``y`` (EER
uses ``np.unique(y)``, LAL ``unique_labels(y)``); there the placeholder is a class
already present among the labeled rows, so the class list is that of the labeled rows.
BMDR and SPAL recode the labels as +1/-1 at construction; the adapter builds them on a
label-free dummy vector and sets the +1 (class 0) / -1 (class 1) labels itself, 0 for
unlabeled rows, which those classes read only at labeled indices.

Library quirks handled here (ALiPy's files are never edited):

- ``collections.Iterable`` and friends (removed in Python 3.10), and ``np.NaN``,
  ``np.infty``, ``np.NINF``, ``np.trapz`` and ``np.row_stack`` (removed in numpy 2) are
  restored where missing for ALiPy's modules alone: their ``collections`` and ``np``
  globals become views of the real modules with those names added (:class:`_ModuleView`);
  the ``collections`` and ``numpy`` modules the rest of the process sees are unchanged.
- ``QueryInstanceRandom.select`` reads ``unlabel_index.index``: it needs ALiPy's
  ``IndexCollection``, which every call here passes. IndexCollection sorts its
  elements, so ALiPy sees the candidates in ascending row order (= pool order here).
- QBC (BaggingClassifier), Random (``np.random.shuffle``) and LAL (random forests) draw
  from numpy's global RNG; the adapter seeds it from the strategy's RNG for the call
  and restores the previous global state afterwards. That, and BMDR/SPAL silencing the
  stdout file descriptor, is process-wide state while the call runs: those classes set
  ``process_wide_state`` (no Dask worker with other threads runs them).
- BMDR/SPAL: lu2023's fix (Appendix D): the kernel matrix is symmetrised once, and
  every quadratic form ALiPy builds goes through :func:`psd_fixed` (symmetrise, add
  1e-15 to the diagonal, ``cvxpy.psd_wrap``) and is solved by OSQP. This is done by
  handing ALiPy's ``select`` a stand-in for the cvxpy module (the ALiPy object's own
  ``_cvxpy`` attribute), whose ``solve`` hands OSQP the data cvxpy would, without
  cvxpy's reduction chain (:mod:`adapters.alipy_qp`, self-checked). BMDR's ``select``
  runs as a copy of ALiPy's function whose ``np`` global reuses a repeated
  pseudo-inverse (:class:`_RepeatPinvNumpy`); ALiPy's module keeps its own ``np``.
- BMDR/SPAL: ALiPy keeps the batch constraint ``sum(x) == b`` only when
  ``type(prob.solve(...)) == float``; cvxpy returns ``numpy.float64``, so the check
  always fails and ALiPy re-solves the relaxed QP (box constraints only) and uses that.
  ``keep_batch_constraint=False`` (default) keeps this as-run behaviour;
  ``True`` hands ALiPy a Python float so the constrained solution is used.
- LAL downloads its regressor's training data from GitHub at run time. Here it gets the
  LAL authors' file from ``AL_AUDIT_LAL_DATA`` when that is set, else a file regenerated
  locally by the authors' procedure (:mod:`adapters.lal_data`, cached; reports say which).
"""
from __future__ import annotations

import collections
import collections.abc
import contextlib
import ctypes
import dataclasses
import functools
import hashlib
import io
import os
import sys
import types
import warnings
from typing import Any, Callable

import numpy as np

from adapters import alipy_qp, lal_data
from adapters import reuse as _reuse
from adapters.base import MISSING, QueryStrategy, global_numpy_seed
from audit.errors import StrategyError

PSD_EPS = 1e-15
"""What lu2023 (Appendix D) add to the diagonal of BMDR/SPAL's QP matrix."""

LAL_DATA_ENV = lal_data.AUTHORS_DATA_ENV
LAL_FILES = lal_data.AUTHORS_FILES


class _ModuleView(types.ModuleType):
    """A module as ALiPy's modules see it: the real one, plus ``aliases`` for names ALiPy
    1.2.5 still uses and today's Python or numpy no longer has. Every other name is looked
    up on the real module at each access."""

    def __init__(self, module: types.ModuleType, aliases: dict[str, Any]):
        super().__init__(module.__name__, module.__doc__)
        vars(self).update(aliases)
        self._real = module

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def _missing(module: types.ModuleType, aliases: dict[str, Any]) -> dict[str, Any]:
    """The aliases whose name the module does not have (numpy 2 raises for some removed names)."""
    def present(name: str) -> bool:
        try:
            return hasattr(module, name)
        except Exception:
            return False

    return {name: value for name, value in aliases.items() if value is not None and not present(name)}


COLLECTIONS_VIEW = _ModuleView(collections, _missing(collections, {
    name: getattr(collections.abc, name)
    for name in ("Iterable", "Iterator", "Mapping", "MutableMapping", "Sequence", "MutableSequence", "Callable",
                 "Set", "MutableSet", "Hashable", "Sized", "Container", "Generator")}))
NUMPY_VIEW = _ModuleView(np, _missing(np, {"NaN": np.nan, "infty": np.inf, "NINF": -np.inf,
                                           "trapz": getattr(np, "trapezoid", None), "row_stack": np.vstack}))


def _give_alipy_its_views() -> None:
    """Rebind the ``collections`` and numpy globals of every loaded ALiPy module to the views."""
    views = ((collections, COLLECTIONS_VIEW), (np, NUMPY_VIEW))
    for name, module in list(sys.modules.items()):
        if name != "alipy" and not name.startswith("alipy."):
            continue
        namespace = vars(module)
        for key, value in list(namespace.items()):
            for real, view in views:
                if value is real:
                    namespace[key] = view


with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from alipy.index import IndexCollection
    from alipy.query_strategy import query_labels as _ql
_give_alipy_its_views()


# --- helpers --------------------------------------------------------------------------

def psd_fixed(P: np.ndarray, eps: float = PSD_EPS) -> Any:
    """lu2023's repair of a QP matrix: symmetrise, add ``eps`` to the diagonal, and wrap it
    so cvxpy takes it as PSD without its own (ARPACK/eigen) check."""
    import cvxpy as cp

    P = np.asarray(P, dtype=float)
    P = 0.5 * (P + P.T) + eps * np.eye(P.shape[0])
    return cp.psd_wrap(P)


class _FixedQP:
    """Stands in for the cvxpy module inside ALiPy's BMDR/SPAL ``select``.

    Everything is cvxpy's except ``quad_form`` (matrix repaired by :func:`psd_fixed`) and
    ``Problem.solve``: through :mod:`adapters.alipy_qp`'s lean route when it applies (the
    same solution bit for bit) and, with ``float_result``, returning a Python float as
    ALiPy's ``type(result) == float`` check expects.
    """

    def __init__(self, float_result: bool):
        import cvxpy

        self._cp = cvxpy
        self._float_result = float_result

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cp, name)

    def quad_form(self, x: Any, P: Any, *args: Any, **kwargs: Any) -> Any:
        return self._cp.quad_form(x, psd_fixed(P), *args, **kwargs)

    def Problem(self, *args: Any, **kwargs: Any) -> Any:  # noqa: N802 (cvxpy's name)
        problem = self._cp.Problem(*args, **kwargs)
        solve = problem.solve
        float_result = self._float_result

        def quiet_solve(*a: Any, **kw: Any) -> Any:
            with _quiet_c_stdout():
                result = alipy_qp.solve(problem, solve, *a, **kw)
            if float_result and isinstance(result, (float, np.floating)):
                return float(result)
            return result

        problem.solve = quiet_solve
        return problem


def sequential_log_loss(prob: np.ndarray) -> float:
    """ALiPy's ``QueryExpectedErrorReduction.log_loss`` (``loss -= p * log(p)`` over the rows,
    then the classes, from 0.0) without its Python loop: the same terms subtracted in the
    same order by ``np.subtract.accumulate``, so the same float."""
    terms = np.asarray(prob, dtype=np.float64)
    terms = (terms * np.log(terms)).ravel()
    return float(np.subtract.accumulate(np.concatenate(([0.0], terms)))[-1])


@functools.lru_cache(maxsize=1)
def sequential_log_loss_verified() -> bool:
    """Does :func:`sequential_log_loss` give ALiPy's own value bit for bit here (numpy's
    array and scalar ``log`` agree)? Checked once per process; False keeps ALiPy's loop."""
    rng = np.random.default_rng(634)
    reference = _ql.QueryExpectedErrorReduction(np.zeros((2, 1)), np.array([0, 1]))
    for n_rows, n_classes in ((1, 2), (7, 2), (150, 2), (40, 3)):
        prob = rng.dirichlet(np.ones(n_classes), size=n_rows)
        prob[0] = np.clip(prob[0], 1e-300, None)
        with np.errstate(all="ignore"):
            if reference.log_loss(prob) != sequential_log_loss(prob):
                return False
    return True


class _RepeatPinvNumpy:
    """Stands in for numpy inside ALiPy's BMDR ``select``, whose ADMM loop recomputes
    ``np.linalg.pinv(A)`` for the same ``A`` on every iteration (A depends only on the
    labeled and selected rows): an SVD per iteration, most of BMDR's run time. Here the
    pseudo-inverse of a matrix equal, bit for bit, to the previous one is the previous
    result (read-only), so every value ALiPy computes is unchanged. Everything else is numpy.
    """

    def __init__(self):
        self.linalg = _RepeatPinvLinalg()

    def __getattr__(self, name: str) -> Any:
        return getattr(NUMPY_VIEW, name)


class _RepeatPinvLinalg:
    def __init__(self):
        self._last: tuple[np.ndarray, np.ndarray] | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(np.linalg, name)

    def pinv(self, a: Any, *args: Any, **kwargs: Any) -> np.ndarray:
        if args or kwargs or not isinstance(a, np.ndarray):
            return np.linalg.pinv(a, *args, **kwargs)
        if self._last is not None and self._last[0].shape == a.shape and self._last[0].dtype == a.dtype \
                and np.array_equal(self._last[0], a):
            return self._last[1]
        result = np.linalg.pinv(a)
        result.flags.writeable = False
        self._last = (a.copy(), result)
        return result


def _with_globals(function: types.FunctionType, **replaced: Any) -> types.FunctionType:
    """A copy of a library function that sees some of its module's globals replaced; the
    module, and every other caller of the function, sees its own."""
    copy = types.FunctionType(function.__code__, {**function.__globals__, **replaced}, function.__name__,
                              function.__defaults__, function.__closure__)
    copy.__kwdefaults__ = function.__kwdefaults__
    return copy


@contextlib.contextmanager
def _quiet_c_stdout():
    """Silence what a C extension prints on stdout (OSQP 1.x prints "Polishing not
    needed ..." on every such solve, whatever ``verbose`` says)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, ValueError, io.UnsupportedOperation):
        yield
        return
    sys.stdout.flush()
    saved = os.dup(fd)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), fd)
            try:
                yield
            finally:
                try:
                    ctypes.CDLL(None).fflush(None)  # C stdio buffers go to /dev/null too
                except (OSError, AttributeError):
                    pass
    finally:
        os.dup2(saved, fd)
        os.close(saved)


class _ProbaView:
    """A fitted model seen through ``predict_proba`` (what ALiPy's uncertainty needs).

    A model with its own ``predict_proba`` is used as is; otherwise its
    ``decision_function`` is turned into probabilities (logistic for binary, softmax
    otherwise), which ranks candidates exactly as the decision values do.
    """

    def __init__(self, model: Any):
        self.model = model

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        if hasattr(self.model, "predict_proba"):
            return self.model.predict_proba(X)
        if not hasattr(self.model, "decision_function"):
            raise StrategyError("the query model has neither predict_proba nor decision_function")
        f = np.asarray(self.model.decision_function(X), dtype=float)
        if f.ndim == 1:
            p1 = 1.0 / (1.0 + np.exp(-f))
            return np.column_stack([1.0 - p1, p1])
        e = np.exp(f - f.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    def decision_function(self, X: np.ndarray) -> np.ndarray:
        return self.model.decision_function(X)


# --- the shared adapter ---------------------------------------------------------------

class AlipyStrategy(QueryStrategy):
    """Shared plumbing: one ALiPy object per pool, labels synchronised on every call."""

    library = "alipy"
    alipy_class: str = ""
    placeholder: str = "missing"  # or "known-class" (see the module docstring)
    uses_global_rng: bool = False

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self._X: np.ndarray | None = None
        self._y_alipy: np.ndarray | None = None
        self._qs: Any = None
        self._fallback_rng = np.random.default_rng(self.random_state)

    @classmethod
    def availability(cls) -> str | None:
        if not hasattr(_ql, cls.alipy_class):
            return f"alipy has no {cls.alipy_class}"
        return None

    # labels as ALiPy gets them
    def alipy_labels(self, y: np.ndarray) -> np.ndarray:
        """``y`` with every unlabeled entry replaced by the placeholder (never a true label)."""
        y = np.asarray(y, dtype=np.int64)
        known = y != MISSING
        out = y.copy()
        if self.placeholder == "known-class":
            if not known.any():
                raise StrategyError(f"{self.implements} needs at least one labeled row")
            out[~known] = int(y[known].min())
        else:
            out[~known] = MISSING
        return out

    def _build(self, X: np.ndarray, y_alipy: np.ndarray) -> Any:
        raise NotImplementedError

    def _set_labels(self, qs: Any, y_alipy: np.ndarray) -> None:
        qs.y = y_alipy

    def _sync(self, X: np.ndarray, y: np.ndarray) -> Any:
        y_alipy = self.alipy_labels(y)
        if self._X is not X or self._qs is None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self._qs = self._build(X, y_alipy)
            self._X = X
        self._y_alipy = y_alipy
        self._set_labels(self._qs, y_alipy)
        return self._qs

    def _call(self, qs: Any, labeled: np.ndarray, candidates: np.ndarray, batch_size: int, model: Any) -> Any:
        return qs.select(IndexCollection(labeled), IndexCollection(candidates), batch_size=batch_size)

    def _select(self, X, y, model, batch_size, candidates, rng):
        y = np.asarray(y)
        if y.shape[0] != X.shape[0]:
            raise StrategyError("y must have one entry per row of X")
        labeled = np.flatnonzero(y != MISSING)
        if labeled.size == 0:
            raise StrategyError(f"alipy {self.implements} needs at least one labeled row")
        candidates = np.asarray(candidates, dtype=np.int64)
        if np.any(y[candidates] != MISSING):
            raise StrategyError("a candidate row is already labeled")
        if not self.batch and batch_size != 1:
            raise StrategyError(f"alipy {self.implements} queries one example at a time")
        qs = self._sync(X, y)
        if self.uses_global_rng:
            seed = int((rng if rng is not None else self._fallback_rng).integers(2**32))
            context = global_numpy_seed(seed)
        else:
            context = contextlib.nullcontext()
        with context, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            picked = self._call(qs, labeled, candidates, batch_size, model)
        return np.asarray([int(i) for i in np.asarray(picked).ravel()], dtype=np.int64)


# --- strategies -----------------------------------------------------------------------

class Uncertainty(AlipyStrategy):
    """``QueryInstanceUncertainty`` on the fitted query model (through ``_ProbaView``
    when the model has no ``predict_proba``)."""

    implements = "QueryInstanceUncertainty"
    alipy_class = "QueryInstanceUncertainty"
    param_defaults = {"measure": "entropy"}
    model_use = "fitted"

    def _build(self, X, y_alipy):
        return _ql.QueryInstanceUncertainty(X, y_alipy, measure=self.params["measure"])

    def _call(self, qs, labeled, candidates, batch_size, model):
        view = model if self.params["measure"] == "distance_to_boundary" else _ProbaView(model)
        return qs.select(IndexCollection(labeled), IndexCollection(candidates), model=view, batch_size=batch_size)


class QBC(AlipyStrategy):
    """``QueryInstanceQBC`` (query by bagging): ALiPy bags the query model itself
    (sklearn's BaggingClassifier, 10 members, seeded through numpy's global RNG)."""

    implements = "QueryInstanceQBC"
    alipy_class = "QueryInstanceQBC"
    param_defaults = {"disagreement": "vote_entropy"}
    model_use = "own"
    uses_global_rng = True
    process_wide_state = True  # numpy's global RNG, seeded for the call

    def _build(self, X, y_alipy):
        return _ql.QueryInstanceQBC(X, y_alipy, method="query_by_bagging",
                                    disagreement=self.params["disagreement"])

    def _call(self, qs, labeled, candidates, batch_size, model):
        base = self.query_model.build(self.random_state)
        return qs.select(IndexCollection(labeled), IndexCollection(candidates), model=base, batch_size=batch_size)


class EER(AlipyStrategy):
    """``QueryExpectedErrorReduction`` (Roy & McCallum, log loss over the unlabeled rows).

    ALiPy's EER takes the query model as ``select(model=...)``: a FITTED classifier with
    ``predict_proba``; it deep-copies and refits it once per candidate and class. Without a
    model it falls back to ``LogisticRegression(solver='liblinear')`` on the labeled rows.
    Its class list is ``np.unique(y)`` over the whole y (hence the known-class placeholder).
    """

    implements = "QueryExpectedErrorReduction"
    alipy_class = "QueryExpectedErrorReduction"
    model_use = "fitted"
    placeholder = "known-class"

    def _build(self, X, y_alipy):
        qs = _ql.QueryExpectedErrorReduction(X, y_alipy)
        if sequential_log_loss_verified():
            qs.log_loss = sequential_log_loss
        return qs

    def _call(self, qs, labeled, candidates, batch_size, model):
        if not hasattr(model, "predict_proba"):
            raise StrategyError("alipy EER needs a query model with predict_proba "
                                "(e.g. svm-rbf with probability = true)")
        return qs.select(IndexCollection(labeled), IndexCollection(candidates), model=model, batch_size=batch_size)


class QUIRE(AlipyStrategy):
    """``QueryInstanceQUIRE`` over all pool rows (its kernel inverse is computed once a pool).

    QUIRE's objective is written for labels in {-1, +1}: with 0/1 labels the negative
    class drops out of its label term, so binary labels are passed signed (lu2023's code
    did the same). Unlabeled rows hold 0, which QUIRE never reads.
    """

    implements = "QueryInstanceQUIRE"
    alipy_class = "QueryInstanceQUIRE"
    param_defaults = {"lambda": 1.0, "kernel": "rbf", "gamma": 1.0, "degree": 3, "coef0": 1.0}
    batch = False

    def alipy_labels(self, y):
        y = np.asarray(y, dtype=np.int64)
        known = y != MISSING
        if y[known].size and y[known].max() > 1:  # multi-class: ALiPy's QUIRE is binary only
            return super().alipy_labels(y)
        return np.where(known, 2 * y - 1, 0)

    def _build(self, X, y_alipy):
        return _ql.QueryInstanceQUIRE(X, y_alipy, np.arange(X.shape[0]), **self.params)

    def _set_labels(self, qs, y_alipy):
        qs.y = y_alipy[qs._train_idx]


class Coreset(AlipyStrategy):
    """``QueryInstanceCoresetGreedy`` (k-center greedy).

    With every unlabeled row as candidate the per-pool object is used; for a strict
    subset a fresh object over the labeled rows and the candidates answers (k-center
    greedy has no state beyond the labeled set, so both agree)."""

    implements = "QueryInstanceCoresetGreedy"
    alipy_class = "QueryInstanceCoresetGreedy"
    param_defaults = {"distance": "euclidean"}

    def _build(self, X, y_alipy, rows: np.ndarray | None = None):
        rows = np.arange(X.shape[0]) if rows is None else rows
        return _ql.QueryInstanceCoresetGreedy(X, y_alipy, rows, distance=self.params["distance"])

    def _call(self, qs, labeled, candidates, batch_size, model):
        if candidates.size != self._X.shape[0] - labeled.size:
            qs = self._build(self._X, self._y_alipy, np.union1d(labeled, candidates))
        return qs.select(IndexCollection(labeled), IndexCollection(candidates), batch_size=batch_size)

    def _set_labels(self, qs, y_alipy):
        qs.y = y_alipy[qs.train_idx]


class GraphDensity(AlipyStrategy):
    """``QueryInstanceGraphDensity`` (Google's graph density, Manhattan kNN graph).

    Like the Google original it remembers across calls: each pick lowers its
    neighbours' density for the rest of the trial. With a strict subset of the unlabeled
    rows as candidates, the other unlabeled rows are passed to ALiPy as excluded rows
    for that call and get their density back afterwards."""

    implements = "QueryInstanceGraphDensity"
    alipy_class = "QueryInstanceGraphDensity"
    param_defaults = {"metric": "manhattan"}

    def _build(self, X, y_alipy):
        return _ql.QueryInstanceGraphDensity(X, y_alipy, np.arange(X.shape[0]), metric=self.params["metric"])

    def _call(self, qs, labeled, candidates, batch_size, model):
        others = np.setdiff1d(np.arange(self._X.shape[0]), np.union1d(labeled, candidates))
        if others.size == 0:
            return qs.select(IndexCollection(labeled), IndexCollection(candidates), batch_size=batch_size)
        saved = qs.graph_density[others].copy()
        picked = qs.select(IndexCollection(np.union1d(labeled, others)), IndexCollection(candidates),
                           batch_size=batch_size)
        qs.graph_density[others] = saved
        return picked


class Random(AlipyStrategy):
    """``QueryInstanceRandom`` (numpy global RNG, seeded per call from the strategy's RNG)."""

    implements = "QueryInstanceRandom"
    alipy_class = "QueryInstanceRandom"
    uses_global_rng = True
    process_wide_state = True  # numpy's global RNG, seeded for the call

    def _build(self, X, y_alipy):
        return _ql.QueryInstanceRandom(X, y_alipy)


class _KernelQP(AlipyStrategy):
    """BMDR and SPAL: binary only, +1/-1 labels, lu2023's QP repair, OSQP."""

    placeholder = "missing"
    distributions = ("cvxpy", "osqp")
    process_wide_state = True  # OSQP's stdout is silenced at the file descriptor

    def alipy_labels(self, y):
        y = np.asarray(y, dtype=np.int64)
        known = y != MISSING
        if np.any(y[known] > 1):
            raise StrategyError(f"alipy {self.implements} is for binary classification only")
        # ALiPy maps the smaller label to +1 and the larger to -1; 0 marks unlabeled rows.
        return np.where(known, np.where(y == 0, 1, -1), 0).astype(np.int64)

    def _kernel_kwargs(self) -> dict[str, Any]:
        return {k: self.params[k] for k in ("kernel", "gamma_ker", "degree", "coef0")}

    def _finish_build(self, qs: Any) -> Any:
        qs._K = 0.5 * (qs._K + qs._K.T)  # rbf_kernel's matrix is not exactly symmetric
        qs._cvxpy = _FixedQP(float_result=bool(self.params["keep_batch_constraint"]))
        return qs

    @staticmethod
    def _dummy_labels(n: int) -> np.ndarray:
        """ALiPy's constructor insists on seeing two classes; it gets a label-free pattern."""
        return np.where(np.arange(n) % 2 == 0, 1, -1)

    def _call(self, qs, labeled, candidates, batch_size, model):
        return qs.select(IndexCollection(labeled), IndexCollection(candidates), batch_size=batch_size,
                         qp_solver="OSQP")


class BMDR(_KernelQP):
    """``QueryInstanceBMDR`` (Wang & Ye 2013) with lu2023's PSD fix and OSQP."""

    implements = "QueryInstanceBMDR"
    alipy_class = "QueryInstanceBMDR"
    param_defaults = {"beta": 1000.0, "gamma": 0.1, "rho": 1.0, "kernel": "rbf", "gamma_ker": 1.0,
                      "degree": 3, "coef0": 1.0, "keep_batch_constraint": False}

    def _build(self, X, y_alipy):
        qs = _ql.QueryInstanceBMDR(X, self._dummy_labels(X.shape[0]), beta=self.params["beta"],
                                   gamma=self.params["gamma"], rho=self.params["rho"], **self._kernel_kwargs())
        return self._finish_build(qs)

    def _call(self, qs, labeled, candidates, batch_size, model):
        select = _with_globals(_ql.QueryInstanceBMDR.select, np=_RepeatPinvNumpy())
        return select(qs, IndexCollection(labeled), IndexCollection(candidates), batch_size=batch_size,
                      qp_solver="OSQP")


class SPAL(_KernelQP):
    """``QueryInstanceSPAL`` (Tang & Huang 2019) with lu2023's PSD fix and OSQP."""

    implements = "QueryInstanceSPAL"
    alipy_class = "QueryInstanceSPAL"
    param_defaults = {"mu": 0.1, "gamma": 0.1, "rho": 1.0, "lambda_init": 0.1, "lambda_pace": 0.01,
                      "kernel": "rbf", "gamma_ker": 1.0, "degree": 3, "coef0": 1.0,
                      "keep_batch_constraint": False}

    def _build(self, X, y_alipy):
        qs = _ql.QueryInstanceSPAL(X, self._dummy_labels(X.shape[0]), mu=self.params["mu"],
                                   gamma=self.params["gamma"], rho=self.params["rho"],
                                   lambda_init=self.params["lambda_init"],
                                   lambda_pace=self.params["lambda_pace"], **self._kernel_kwargs())
        return self._finish_build(qs)


class LAL(AlipyStrategy):
    """``QueryInstanceLAL`` (Konyushkova et al. 2017): a random-forest regressor trained on
    simulated AL episodes. ALiPy downloads the LAL authors' file at run time; here the file
    in ``$AL_AUDIT_LAL_DATA`` (the authors', put there by the user) is used when that is set,
    else a file regenerated by the authors' procedure (:mod:`adapters.lal_data`), generated
    into the cache at the first build and labelled as such (:meth:`capability_note`)."""

    implements = "QueryInstanceLAL"
    alipy_class = "QueryInstanceLAL"
    param_defaults = {"mode": "LAL_iterative", "cls_est": 50}
    placeholder = "known-class"
    uses_global_rng = True
    process_wide_state = True  # numpy's global RNG, seeded for the call

    @classmethod
    def _generated_config(cls, mode: str) -> Any:
        return dataclasses.replace(lal_data.DEFAULT_CONFIG, criterion=lal_data.MODES[mode])

    @classmethod
    def data_dir(cls, mode: str = "LAL_iterative") -> str | None:
        """The authors' file's directory from ``$AL_AUDIT_LAL_DATA``, if set and it holds it."""
        path = os.environ.get(LAL_DATA_ENV)
        if path and os.path.isfile(os.path.join(path, LAL_FILES[mode])):
            return path
        return None

    @classmethod
    def availability(cls) -> str | None:
        reason = super().availability()
        if reason:
            return reason
        path = os.environ.get(LAL_DATA_ENV)
        if path and cls.data_dir() is None:
            return (f"{LAL_DATA_ENV}={path} does not hold {LAL_FILES['LAL_iterative']} (the LAL authors' file); "
                    f"unset it to use training data regenerated locally")
        if path:
            return None
        try:
            lal_data.cached(cls._generated_config("LAL_iterative"))
        except StrategyError as e:
            return str(e)
        return None

    @classmethod
    def capability_note(cls) -> str | None:
        """Which training data LAL runs on: the authors' file, or the regenerated one."""
        if cls.data_dir() is not None:
            return f"training data: {os.path.join(cls.data_dir(), LAL_FILES['LAL_iterative'])} (from {LAL_DATA_ENV})"
        config = cls._generated_config("LAL_iterative")
        try:
            meta = lal_data.cached(config)
        except StrategyError:
            return None
        if meta is None:
            return (f"training data regenerated locally at first use (al-audit lal_data v{lal_data.GENERATOR_VERSION}, "
                    f"{config.n_episodes} simulated episodes vs the authors' {lal_data.AUTHORS_CONFIG.n_episodes}), "
                    f"not the LAL authors' file")
        return lal_data.describe(meta)

    @classmethod
    def prepare(cls, params: dict[str, Any], log: Callable[[str], None]) -> None:
        """Regenerate the training data into the cache when it is not there (once per machine)."""
        mode = params["mode"]
        if os.environ.get(LAL_DATA_ENV) or mode not in LAL_FILES:
            return  # the authors' file, or a mode the build refuses: nothing to generate
        config = cls._generated_config(mode)
        if lal_data.cached(config) is None:
            log(f"LAL: generating its training data into {lal_data.data_dir(config)} (once per machine, "
                f"about 2 minutes; `audit lal-data` does it ahead)")
            _, meta = lal_data.ensure(config)
            log(f"LAL: {meta['rows']} rows generated in {meta['seconds']} s")

    def _build(self, X, y_alipy):
        mode = self.params["mode"]
        if mode not in LAL_FILES:
            raise StrategyError(f"alipy LAL mode must be one of {sorted(LAL_FILES)}")
        if os.environ.get(LAL_DATA_ENV):
            path = self.data_dir(mode)
            if path is None:
                raise StrategyError(f"{LAL_DATA_ENV} does not hold {LAL_FILES[mode]}")
        else:
            path = str(lal_data.ensure(self._generated_config(mode))[0])
        # ALiPy would download when the file is missing; it is present here, so it only trains.
        with global_numpy_seed(int(self._fallback_rng.integers(2**32))):
            with contextlib.redirect_stdout(io.StringIO()):
                qs = _ql.QueryInstanceLAL(X, y_alipy, mode=mode, data_path=path,
                                          cls_est=self.params["cls_est"], train_slt=False)
                return _lean_lal(qs)


def _lean_lal(qs: Any) -> Any:
    """A QueryInstanceLAL built with ``train_slt=False``, trained as ``train_slt=True`` trains it,
    with its forests lean (:mod:`audit.fast.forest`): the per-round classifier is a LeanForest
    with its parameters and the regressor ALiPy trains is a LeanForestRegressor (the copy of
    ``train_selector_from_file`` sees that class under ALiPy's name). Both are scikit-learn's
    forests bit for bit, or scikit-learn's own fit when their policy says so; the same global
    random draws in the same order.

    The selector depends only on ALiPy's training file, its parameters and numpy's global
    random state when training starts, the same in every replay of a trial seed; within a run
    it is trained once per such state and read back after (:func:`adapters.reuse.reused`,
    about 0.1 s against 1.2-1.6 s for 2,000 trees), the global state then set to where the
    training leaves it and the training's route recorded, as the fit would."""
    from audit.fast.forest import LeanForest, LeanForestRegressor
    from audit.fast.policy import record_route

    qs.model = LeanForest(**qs.model.get_params())
    train = _with_globals(_ql.QueryInstanceLAL.train_selector_from_file, RandomForestRegressor=LeanForestRegressor)
    file_path = qs._iter_path if qs._mode == "LAL_iterative" else qs._rand_path

    def trained() -> tuple[Any, tuple]:
        train(qs)
        return qs._selector, np.random.get_state()

    key = (lal_data.file_sha256(file_path), _global_state_digest(), train.__defaults__, _selector_versions())
    (qs._selector, state_after), stored = _reuse.reused("lal-selector", key, trained,
                                                        lambda entry: _selector_probe(entry[0], file_path))
    if stored:
        np.random.set_state(state_after)
        record_route(qs._selector.fast_path_)
    return qs


def _global_state_digest() -> str:
    """numpy's global random state, hashed (what the forest's random draws start from)."""
    kind, keys, position, has_gauss, cached = np.random.get_state()
    return hashlib.sha256(f"{kind}:{position}:{has_gauss}:{cached!r}:".encode() + keys.tobytes()).hexdigest()


@functools.cache
def _selector_versions() -> tuple[str, ...]:
    from importlib import metadata

    return (sys.version, *(metadata.version(d) for d in ("alipy", "scikit-learn", "numpy", "scipy")))


def _selector_probe(selector: Any, file_path: str) -> np.ndarray:
    """The selector's predictions on the first 64 rows of its training file."""
    with np.load(file_path) as data:
        return selector.predict(data["arr_0"][:64])


STRATEGIES: dict[str, type[QueryStrategy]] = {
    "eer": EER,
    "bmdr": BMDR,
    "spal": SPAL,
    "lal": LAL,
    "uncertainty": Uncertainty,
    "qbc": QBC,
    "quire": QUIRE,
    "coreset": Coreset,
    "graph": GraphDensity,
    "random": Random,
}
