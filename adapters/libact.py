"""libact 0.1.6 strategies.

libact keeps a stateful ``Dataset`` (``None`` = unlabeled) and trains its query model
itself inside ``make_query``; the adapter builds the dataset and the libact strategy on
the first call of a trial and afterwards only copies newly revealed labels into it
(``Dataset.update``, which also fires each strategy's ``update`` callback).

Binary labels go to libact as -1/+1, as lu2023's released code did (``y[y==0] = -1  #
bug for hintsvm, dwus``): HintSVM's solver reads label 0 as "hint", and QUIRE and DWUS
use the label values in their arithmetic, so 0/1 labels silently change what they do.

libact swallows constructor keyword arguments it does not read (zhan2021's
``HintSVM(cl=1.0, ch=1.0)`` ran with Cl=Ch=0.1); every libact object here is built
through :func:`make_libact`, which first checks each keyword against the names the
class's constructor reads in the library source (:func:`check_libact_kwargs`).
"""
from __future__ import annotations

import ast
import contextlib
import functools
import importlib
import importlib.util
import io
import warnings
from typing import Any

import numpy as np

from adapters import libact_dwus
from adapters.base import MISSING, DegenerateQueryWarning, QueryStrategy
from audit.engine.models import ModelSpec, era_defaults
from audit.errors import AuditError, StrategyError


def _import_quietly() -> None:
    """libact prints a notice for each C extension it was built without; the capability
    matrix reports those, so the import itself stays silent."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        import libact.query_strategies  # noqa: F401


_import_quietly()


# --- keyword arguments libact would ignore -------------------------------------------

def _module_tree(module: str) -> ast.Module:
    spec = importlib.util.find_spec(module)  # locates the file without executing it
    if spec is None or spec.origin is None:
        raise AuditError(f"cannot find the source of {module}")
    with open(spec.origin, encoding="utf-8") as handle:
        return ast.parse(handle.read(), filename=spec.origin)


@functools.lru_cache(maxsize=None)
def libact_init_reads(module: str, class_name: str) -> frozenset[str]:
    """Keyword names the constructor of ``module.class_name`` reads, from its source.

    Collects the ``kwargs.pop('name', ...)`` / ``kwargs.get('name', ...)`` /
    ``kwargs['name']`` reads of ``__init__`` and its named parameters, and follows base
    classes defined in, or imported by, the module. Works on the Python source alone, so
    it also answers for classes whose C extension is not built (HintSVM).
    """
    tree = _module_tree(module)
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    if class_name not in classes:
        raise AuditError(f"{module} defines no class {class_name}")
    imported = {
        alias.asname or alias.name: node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module
        for alias in node.names
    }
    cls = classes[class_name]
    names: set[str] = set()
    init = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
    if init is not None:
        args = init.args
        names |= {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs if a.arg != "self"}
        kw = args.kwarg.arg if args.kwarg else None
        for node in ast.walk(init):
            key = None
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("pop", "get") and isinstance(node.func.value, ast.Name)
                    and node.func.value.id == kw and node.args):
                key = node.args[0]
            elif (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)
                    and node.value.id == kw):
                key = node.slice
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                names.add(key.value)
    for base in cls.bases:
        if not isinstance(base, ast.Name) or base.id == "object":
            continue
        if base.id in classes:
            names |= libact_init_reads(module, base.id)
        elif imported.get(base.id, "").startswith("libact"):
            names |= libact_init_reads(imported[base.id], base.id)
    return frozenset(names)


def check_libact_kwargs(module: str, class_name: str, kwargs: dict[str, Any]) -> None:
    """Raise AuditError naming every keyword the libact class would silently ignore."""
    reads = libact_init_reads(module, class_name)
    ignored = sorted(set(kwargs) - reads)
    if ignored:
        raise AuditError(
            f"libact {class_name} would silently ignore keyword argument(s) {', '.join(ignored)} "
            f"(its constructor reads only: {', '.join(sorted(reads - {'dataset'}))})"
        )


def make_libact(module: str, class_name: str, dataset: Any, **kwargs: Any) -> Any:
    """Construct a libact strategy after checking that it reads every keyword given."""
    check_libact_kwargs(module, class_name, kwargs)
    return getattr(importlib.import_module(module), class_name)(dataset, **kwargs)


def _extension_missing(extension: str, what: str) -> str | None:
    """None when a libact C extension imports, else the reason, with the import error."""
    try:
        importlib.import_module(extension)
    except ImportError as exc:
        return f"{what} C extension ({extension.rsplit('.', 1)[-1]}) not built: {exc}"
    return None


# --- models ---------------------------------------------------------------------------

def libact_model(spec: ModelSpec, random_state: int | None) -> Any:
    """A libact model for a spec: libact's own LR wrapper for "lr", an sklearn adapter otherwise.

    The wrapper's scikit-learn model is a LeanLR with the same parameters: scikit-learn's
    LogisticRegression with bit-identical, faster predictions (ALBL predicts its queried
    rows one at a time every round)."""
    from libact.models import LogisticRegression, SklearnProbaAdapter

    from audit.fast.linear import LeanLR

    if spec.name == "lr":
        model = LogisticRegression(random_state=random_state, **spec.params)
        model.model = LeanLR(random_state=random_state, **spec.params)
        return model
    return SklearnProbaAdapter(spec.build(random_state))


def sklearn_adapter(spec: ModelSpec, random_state: int | None) -> Any:
    """An sklearn model wrapped for libact the way lu2023 wrapped its committee:
    ``SklearnProbaAdapter`` when the estimator has ``predict_proba``, ``SklearnAdapter`` otherwise."""
    from libact.models import SklearnAdapter, SklearnProbaAdapter

    estimator = spec.build(random_state)
    return SklearnProbaAdapter(estimator) if hasattr(estimator, "predict_proba") else SklearnAdapter(estimator)


def _model_specs(data: Any, what: str) -> list[ModelSpec]:
    if not isinstance(data, (list, tuple)) or not data:
        raise AuditError(f"{what} must be a non-empty list of model specs")
    return [ModelSpec.from_data(item) for item in data]


# scikit-learn 1.9 deprecates SVC(probability=True) (removal in 1.11) and warns on every
# fit; lu2023's QBC committee uses it, so the warning is expected and silenced here only.
_SVC_PROBABILITY_DEPRECATION = r"The `probability` parameter was deprecated in 1\.9"


# --- adapters ---------------------------------------------------------------------------

class LibactStrategy(QueryStrategy):
    """Shared plumbing: one libact Dataset per pool, synchronised with ``y`` each call."""

    library = "libact"
    batch = False
    libact_class: tuple[str, str] | None = None
    """(module, class) of the libact strategy the bound parameters go to unchanged, where they do."""

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self._X: np.ndarray | None = None
        self._dataset: Any = None
        self._strategy: Any = None
        self._to_libact: dict[int, int] | None = None

    def _make_strategy(self, dataset: Any) -> Any:
        raise NotImplementedError

    @classmethod
    def ignored_params(cls, params: dict[str, Any]) -> list[str]:
        """The given parameters libact's constructor would silently ignore (none when the adapter
        translates its parameters rather than passing them on)."""
        return [] if cls.libact_class is None else sorted(set(params) - libact_init_reads(*cls.libact_class))

    def _label(self, value: int) -> int:
        if self._to_libact is None:
            return int(value)
        try:
            return self._to_libact[int(value)]
        except KeyError:
            raise StrategyError(
                f"label {int(value)} appeared after the libact dataset was built as binary ({self._to_libact})"
            ) from None

    def _sync(self, X: np.ndarray, y: np.ndarray) -> None:
        from libact.base.dataset import Dataset

        if self._X is not X:
            reason = self.availability()
            if reason:
                raise AuditError(reason)
            known = y[y != MISSING]
            # Binary tasks go to libact as -1/+1 (lu2023's code), or as the file spells them when
            # the protocol says so ([labels] libact_binary = "file": zhan2021's code); multi-class keeps 0..K-1.
            binary = known.size and known.max() <= 1
            self._to_libact = (dict(self.file_labels) if self.file_labels else {0: -1, 1: 1}) if binary else None
            labels = [self._label(v) if v != MISSING else None for v in y]
            self._X, self._dataset = X, Dataset(X, labels)
            self._strategy = self._make_strategy(self._dataset)
            return
        known = self._dataset.get_labeled_mask()
        for i in np.flatnonzero((y != MISSING) & ~known):
            self._dataset.update(int(i), self._label(y[i]))

    def _select(self, X, y, model, batch_size, candidates, rng):
        if batch_size != 1:
            raise StrategyError(f"{self.library} {self.implements} queries one example at a time")
        unlabeled = np.flatnonzero(y == MISSING)
        if unlabeled.size != len(candidates) or not np.array_equal(np.sort(candidates), unlabeled):
            raise StrategyError("libact strategies query from every unlabeled row; candidates must be all of them")
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=_SVC_PROBABILITY_DEPRECATION, category=FutureWarning)
            self._sync(X, y)
            return np.array([int(self._strategy.make_query())])


class Uncertainty(LibactStrategy):
    """libact ``UncertaintySampling``; ties go to the first unlabeled row (argmax)."""

    implements = "UncertaintySampling"
    param_defaults = {"method": "lc"}
    model_use = "own"

    def _make_strategy(self, dataset):
        return make_libact(
            "libact.query_strategies.uncertainty_sampling", "UncertaintySampling", dataset,
            model=libact_model(self.query_model, self.random_state), method=self.params["method"],
        )


LU2023_COMMITTEE = [
    {"name": "lr", "params": {"C": 1.0}},
    {"name": "svm-linear", "params": {"probability": True}},
    {"name": "svm-rbf", "params": {"gamma": "auto", "probability": True}},
    {"name": "lda", "params": {}},
]
"""lu2023's QBC committee (its ``SelectModelBuilder('qbc-zhan')``): LR(C=1), SVC(linear,
probability), SVC(rbf, gamma='auto', probability), LDA."""


class QueryByCommittee(LibactStrategy):
    """libact ``QueryByCommittee``: each member is trained on a bootstrap bag of the
    labeled set (redrawn after every label), the pick maximises the vote entropy, ties
    broken at random with the strategy's seed. The committee is a parameter (model
    specs), so the runner passes no query model."""

    implements = "QueryByCommittee"
    param_defaults = {"committee": LU2023_COMMITTEE, "disagreement": "vote"}
    model_use = "none"

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self._committee = _model_specs(self.params["committee"], "committee")

    @classmethod
    def resolve_defaults(cls, params: dict[str, Any], era: str) -> dict[str, Any]:
        committee = params.get("committee", cls.param_defaults["committee"])
        resolved = [spec.with_defaults(era).to_data() for spec in _model_specs(committee, "committee")]
        same = all(ModelSpec.from_data(a) == ModelSpec.from_data(b) for a, b in zip(committee, resolved))
        return params if same else {**params, "committee": resolved}

    def get_params(self) -> dict[str, Any]:
        params = super().get_params()
        params["committee"] = [str(spec) for spec in self._committee]
        return params

    def _make_strategy(self, dataset):
        # The members' random_state only reaches SVC's Platt scaling (predict_proba),
        # which the 'vote' disagreement never calls.
        return make_libact(
            "libact.query_strategies.query_by_committee", "QueryByCommittee", dataset,
            models=[sklearn_adapter(spec, self.random_state) for spec in self._committee],
            disagreement=self.params["disagreement"], random_state=self.random_state,
        )


class HintSVM(LibactStrategy):
    """libact ``HintSVM`` (binary only). Note libact's solver wrapper pops the SVM
    parameters out of the strategy's dict on the first query, so from the second query on
    the solver runs with its own defaults (C=0.1, linear kernel, gamma=0.1): the library's
    behaviour, replayed as is."""

    implements = "HintSVM"
    libact_class = ("libact.query_strategies.hintsvm", "HintSVM")
    param_defaults = {
        "Cl": 1.0, "Ch": 1.0, "p": 0.5, "kernel": "linear", "degree": 3, "gamma": 0.1,
        "coef0": 0.0, "tol": 1e-3, "shrinking": 1, "cache_size": 100.0,
    }
    model_use = "none"

    @classmethod
    def availability(cls) -> str | None:
        return _extension_missing("libact.query_strategies._hintsvm", "libact HintSVM")

    def _make_strategy(self, dataset):
        return make_libact(*self.libact_class, dataset, random_state=self.random_state, **self.params)


class Quire(LibactStrategy):
    """libact ``QUIRE`` (binary; labels enter its objective as -1/+1). The kernel matrix
    over the whole pool and its inverse are computed once, at the first call."""

    implements = "QUIRE"
    libact_class = ("libact.query_strategies.quire", "QUIRE")
    param_defaults = {"lambda": 1.0, "kernel": "rbf", "gamma": 1.0}
    model_use = "none"

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        if self.params["kernel"] not in ("rbf", "poly", "linear"):
            raise AuditError(f"QUIRE kernel must be rbf, poly or linear, not {self.params['kernel']!r}")

    def _make_strategy(self, dataset):
        kwargs = dict(self.params)
        if kwargs["kernel"] == "linear":
            kwargs.pop("gamma")  # QUIRE reads gamma only for the rbf and poly kernels
        return make_libact(*self.libact_class, dataset, **kwargs)


LU2023_ALBL_ARMS = [
    {"strategy": "uncertainty", "model": {"name": "lr", "params": {"C": 1.0}}},
    {"strategy": "uncertainty", "model": {"name": "lr", "params": {"C": 0.01}}},
    {"strategy": "hintsvm", "params": {"Cl": 0.1, "Ch": 0.1}},
]
"""lu2023's ALBL arms: US(LR C=1), US(LR C=0.01) (method 'lc', libact's default) and
``HintSVM(ds, random_state=1126)``, i.e. HintSVM with libact's defaults Cl=Ch=0.1."""


class ActiveLearningByLearning(LibactStrategy):
    """libact ``ActiveLearningByLearning`` (Exp4.P over the arms, plus a uniform arm).

    ``arms`` lists the underlying strategies as ``{strategy = <libact adapter name>,
    params = {...}, model = <model spec, for arms that train one>}``; the reward model is
    the query model the runner passes. ``T`` (the query budget ALBL plans for) defaults
    to the number of unlabeled rows at the first call, i.e. the whole pool.
    """

    implements = "ActiveLearningByLearning"
    param_defaults = {"T": None, "arms": LU2023_ALBL_ARMS, "delta": 0.1, "uniform_sampler": True}
    model_use = "own"

    @classmethod
    def availability(cls) -> str | None:
        reason = HintSVM.availability()
        if reason:
            return f"libact ALBL as lu2023 configured it has a HintSVM arm: {reason}"
        return None

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        arms = self.params["arms"]
        if not isinstance(arms, (list, tuple)) or not arms:
            raise AuditError("ALBL arms must be a non-empty list")
        self._arms: list[LibactStrategy] = []
        for arm in arms:
            unknown = set(arm) - {"strategy", "params", "model"}
            if unknown:
                raise AuditError(f"ALBL arm has unknown keys {sorted(unknown)}")
            cls = STRATEGIES.get(arm.get("strategy"))
            if cls is None or cls is ActiveLearningByLearning:
                raise AuditError(
                    f"ALBL arm strategy must be one of {', '.join(n for n in STRATEGIES if n != 'albl')}, "
                    f"not {arm.get('strategy')!r}"
                )
            reason = cls.availability()
            if reason:
                raise AuditError(f"ALBL arm {arm['strategy']} is unavailable: {reason}")
            if cls.model_use == "own" and "model" not in arm:
                raise AuditError(f"ALBL arm {arm['strategy']} needs a model spec")
            if cls.model_use != "own" and "model" in arm:
                raise AuditError(f"ALBL arm {arm['strategy']} does not use a model")
            model = ModelSpec.from_data(arm["model"]) if "model" in arm else None
            self._arms.append(cls(query_model=model, random_state=self.random_state, **arm.get("params", {})))
        T = self.params["T"]
        if T is not None and (isinstance(T, bool) or not isinstance(T, int) or T < 1):
            raise AuditError(f"ALBL T must be a positive integer, not {T!r}")

    @classmethod
    def resolve_defaults(cls, params: dict[str, Any], era: str) -> dict[str, Any]:
        arms = params.get("arms", cls.param_defaults["arms"])
        resolved = [{**arm, "model": ModelSpec.from_data(arm["model"]).with_defaults(era).to_data()}
                    if isinstance(arm, dict) and "model" in arm else arm for arm in arms]
        same = all(ModelSpec.from_data(a["model"]) == ModelSpec.from_data(b["model"])
                   for a, b in zip(arms, resolved) if isinstance(a, dict) and "model" in a)
        return params if same else {**params, "arms": resolved}

    def get_params(self) -> dict[str, Any]:
        params = super().get_params()
        params["arms"] = [
            f"{type(arm).__name__}({', '.join(f'{k}={v!r}' for k, v in arm.params.items())}"
            + (f", model={arm.query_model}" if arm.query_model is not None else "") + ")"
            for arm in self._arms
        ]
        return params

    def _make_strategy(self, dataset):
        T = self.params["T"] if self.params["T"] is not None else dataset.len_unlabeled()
        return make_libact(
            "libact.query_strategies.active_learning_by_learning", "ActiveLearningByLearning", dataset,
            T=T, query_strategies=[arm._make_strategy(dataset) for arm in self._arms],
            delta=self.params["delta"], uniform_sampler=self.params["uniform_sampler"],
            model=libact_model(self.query_model, self.random_state), random_state=self.random_state,
        )


class Dwus(LibactStrategy):
    """libact ``DWUS`` (density-weighted uncertainty sampling, binary; labels -1/+1).

    ``kmeans_param`` goes to sklearn's KMeans: lu2023 passed ``{}`` under scikit-learn
    1.2.2, whose KMeans default was ``n_init=10``; since 1.4 the default is one run
    (``'auto'``), so the lu2023 default here spells ``n_init = 10`` out. Its per-query fit goes
    through :mod:`adapters.libact_dwus`'s lean route (the same CG fit, its difference points
    evaluated in one batch; self-checked, bit for bit)."""

    implements = "DWUS"
    libact_class = ("libact.query_strategies.density_weighted_uncertainty_sampling", "DWUS")
    param_defaults = {
        "n_clusters": 5, "sigma": 0.1, "max_iter": 100, "tol": 1e-4, "C": 1.0, "kmeans_param": {"n_init": 10},
    }
    model_use = "none"

    @classmethod
    def resolve_defaults(cls, params: dict[str, Any], era: str) -> dict[str, Any]:
        kmeans = params.get("kmeans_param", cls.param_defaults["kmeans_param"])
        resolved = {**era_defaults(era, "kmeans"), **kmeans}
        return params if resolved == kmeans else {**params, "kmeans_param": resolved}

    def _make_strategy(self, dataset):
        kwargs = {**self.params, "kmeans_param": dict(self.params["kmeans_param"])}  # DWUS writes into it
        strategy = make_libact(*self.libact_class, dataset, random_state=self.random_state, **kwargs)
        if np.isnan(strategy.P_k_x).any():
            warnings.warn(DegenerateQueryWarning(
                f"DWUS scores are NaN: for some row exp(-|x-c|^2/(2 sigma)) underflows to 0 at every centre "
                f"(sigma={self.params['sigma']}); each query is the first unlabeled entry"))
        return strategy

    def _select(self, X, y, model, batch_size, candidates, rng):
        with libact_dwus.lean_training():
            return super()._select(X, y, model, batch_size, candidates, rng)


class VarianceReduction(LibactStrategy):
    """libact ``VarianceReduction`` (Schein and Ungar's expected-variance criterion on LR).

    Its C extension needs LAPACKE, so the default set-up builds libact with
    ``LIBACT_BUILD_VARIANCE_REDUCTION=0`` and this class is unavailable there; ``native.vr``
    (:class:`adapters.native.VarianceReduction`) computes the same picks without it. Built
    (``.ci/run`` shows how), this is the reference the native one is checked against."""

    implements = "VarianceReduction"
    param_defaults = {"sigma": 100.0, "optimality": "trace", "n_jobs": 1}
    model_use = "own"

    @classmethod
    def availability(cls) -> str | None:
        reason = _extension_missing("libact.query_strategies._variance_reduction", "libact VarianceReduction")
        if reason:
            return (
                f"{reason} (libact is built with LIBACT_BUILD_VARIANCE_REDUCTION=0: variance_reduction.c "
                "includes lapacke.h and links liblapacke (Debian: liblapacke-dev), and with LAPACKE >= 3.9.1 "
                "its own prototype of LAPACK_dgesvd no longer compiles; CFLAGS='-D_LAPACKE_H_ "
                "-DLAPACK_dgesvd=dgesvd_' builds it; native.vr makes the same picks without it)"
            )
        return None

    def _make_strategy(self, dataset):
        return make_libact(
            "libact.query_strategies.variance_reduction", "VarianceReduction", dataset,
            model=libact_model(self.query_model, self.random_state), **self.params,
        )


STRATEGIES: dict[str, type[QueryStrategy]] = {
    "uncertainty": Uncertainty,
    "qbc": QueryByCommittee,
    "hintsvm": HintSVM,
    "quire": Quire,
    "albl": ActiveLearningByLearning,
    "dwus": Dwus,
    "vr": VarianceReduction,
}
