"""Model specs: declarative descriptions of scikit-learn classifiers.

Protocols name models as data (``{name = "svm-rbf", params = {gamma = "auto"}}``);
this module turns a spec into a fresh estimator. Two specs are the same model exactly
when their ``key`` is equal, which is how the runner decides that a query model can
reuse the task model's fit.
"""
from __future__ import annotations

import ast
import functools
import importlib
import inspect
import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin

from audit import extras
from audit.errors import AuditError


def _svm(kernel: str) -> Callable[..., ClassifierMixin]:
    def build(random_state: int | None, **params: Any) -> ClassifierMixin:
        from audit.fast.svc import (
            LeanSVC,  # scikit-learn's SVC, bit for bit, without its per-call overhead
        )

        return LeanSVC(kernel=kernel, random_state=random_state, **params)

    return build


def _lr(random_state: int | None, **params: Any) -> ClassifierMixin:
    """scikit-learn's LogisticRegression; liblinear on three or more classes fits one-vs-rest,
    as scikit-learn did before 1.8 (audit/engine/liblinear_ovr.py); with the bit-identical
    lean predictions (and lean binary liblinear fit) of LeanLR when they apply."""
    from audit.fast.linear import LeanLR

    return LeanLR(random_state=random_state, **params)


def _lr_grid(random_state: int | None, **params: Any) -> ClassifierMixin:
    """LR with C chosen by 3-fold grid search, as the Google toolbox's "Margin" used it
    (scikit-learn's GridSearchCV, fitted through the bit-identical lean path when it applies)."""
    from sklearn.linear_model import LogisticRegression

    from audit.fast.grid import LeanGridLR

    grid = params.pop("C_grid", [10.0**k for k in range(-4, 5)])
    cv = params.pop("cv", 3)
    base = LogisticRegression(random_state=random_state, max_iter=params.pop("max_iter", 200), **params)
    return LeanGridLR(base, {"C": grid}, cv=cv)


def _rf(random_state: int | None, **params: Any) -> ClassifierMixin:
    """scikit-learn's RandomForestClassifier, fitted through the bit-identical lean path when it applies."""
    from audit.fast.forest import LeanForest

    params.setdefault("n_estimators", 100)
    return LeanForest(random_state=random_state, **params)


def _lda(random_state: int | None, **params: Any) -> ClassifierMixin:
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis

    return LinearDiscriminantAnalysis(**params)


def _knn(random_state: int | None, **params: Any) -> ClassifierMixin:
    from sklearn.neighbors import KNeighborsClassifier

    return KNeighborsClassifier(**params)


def _gbdt(random_state: int | None, **params: Any) -> ClassifierMixin:
    from sklearn.ensemble import GradientBoostingClassifier

    return GradientBoostingClassifier(random_state=random_state, **params)


def _torch(random_state: int | None, **params: Any) -> ClassifierMixin:
    """CDALBench's softmax layer and MLPs (audit/engine/torch_models.py; PyTorch, the extra "deep")."""
    from audit.engine.torch_models import build

    return build(random_state, **params)


def _xgboost(random_state: int | None, **params: Any) -> ClassifierMixin:
    """XGBoost's scikit-learn classifier (ALPBench's ``xgb``; the optional extra ``alpbench``)."""
    import xgboost

    params.setdefault("n_jobs", 1)  # one core per trial: trials run in parallel processes
    return xgboost.XGBClassifier(random_state=random_state, **params)


def _catboost(random_state: int | None, **params: Any) -> ClassifierMixin:
    """CatBoost's classifier (ALPBench's ``catboost``; the optional extra ``alpbench``). It writes
    no ``catboost_info/`` training log into the working directory (al-audit writes only its outputs)."""
    import catboost

    params.setdefault("thread_count", 1)
    params.setdefault("allow_writing_files", False)
    return catboost.CatBoostClassifier(random_seed=random_state, **params)


PRETRAINED_OFFLINE = {
    "tabpfn": ("tabpfn", "TabPFNClassifier", "TabPFN needs PyTorch and the tabpfn package (ALPBench's own 'full' "
               "extra), and loads its prior-fitted network's weights, downloaded at run time: not installed, and "
               "this machine cannot download them"),
    "tabnet": ("pytorch_tabnet.tab_model", "TabNetClassifier", "TabNet needs PyTorch and pytorch-tabnet (ALPBench's "
               "own 'full' extra), neither installed here"),
}
"""Learners of ALPBench that need PyTorch: (module, class, why they do not run here without it)."""


def _pretrained(name: str) -> Callable[..., ClassifierMixin]:
    module, class_name, reason = PRETRAINED_OFFLINE[name]

    def build(random_state: int | None, **params: Any) -> ClassifierMixin:
        try:
            cls = getattr(importlib.import_module(module), class_name)
        except ImportError:
            raise AuditError(f"model {name}: {reason}") from None
        return cls(**params)

    return build


BUILDERS: dict[str, Callable[..., ClassifierMixin]] = {
    "svm-rbf": _svm("rbf"),
    "svm-linear": _svm("linear"),
    "lr": _lr,
    "lr-grid": _lr_grid,
    "rf": _rf,
    "lda": _lda,
    "knn": _knn,
    "gbdt": _gbdt,
    "torch-linear": _torch,  # hidden = (): a linear softmax layer
    "torch-mlp": _torch,  # hidden = (24, 12), ...
    "xgboost": _xgboost,
    "catboost": _catboost,
    "tabpfn": _pretrained("tabpfn"),
    "tabnet": _pretrained("tabnet"),
}
# What a builder needs beyond the base install: builder -> (the optional extra that installs it
# (audit/extras.py), the module it imports)
REQUIRES: dict[str, tuple[str, str]] = {"torch-linear": ("deep", "torch"), "torch-mlp": ("deep", "torch"),
                                        "xgboost": ("alpbench", "xgboost"), "catboost": ("alpbench", "catboost")}
OPTIONAL_MODELS = frozenset(REQUIRES) | frozenset(PRETRAINED_OFFLINE)
"""Builders beyond the base install: an extra's, or ALPBench's PyTorch learners no extra here installs."""


QUERY_MODEL_DEFAULTS = ("current", "sklearn-0.19")
ERA_DEFAULTS: dict[str, dict[str, dict[str, Any]]] = {
    "current": {},
    # scikit-learn <= 0.19.2, which libact 0.1.6 declares: LogisticRegression's solver was
    # liblinear (lbfgs since 0.22), SVC's gamma 'auto' = 1/d ('scale' since 0.22), KMeans ran
    # n_init=10 starts (one since 1.4). "kmeans" is not a model spec: DWUS reads it.
    "sklearn-0.19": {
        "lr": {"solver": "liblinear"},
        "sklearn.linear_model.LogisticRegression": {"solver": "liblinear"},
        "svm-rbf": {"gamma": "auto"},
        "svm-linear": {"gamma": "auto"},
        "sklearn.svm.SVC": {"gamma": "auto"},
        "kmeans": {"n_init": 10},
    },
}
"""What a model's unset parameters meant in a scikit-learn era, by builder name (the
protocol knob ``[query_models] defaults``; query and committee models only)."""


def era_defaults(era: str, name: str) -> dict[str, Any]:
    """The parameters a model ``name`` left unset took in ``era``, beyond today's defaults."""
    if era not in ERA_DEFAULTS:
        raise AuditError(f"query model defaults must be one of {', '.join(QUERY_MODEL_DEFAULTS)}, not {era!r}")
    return dict(ERA_DEFAULTS[era].get(name, {}))


SKLEARN_PREFIX = "sklearn."  # a model named by its class path, e.g. sklearn.naive_bayes.GaussianNB


def sklearn_classifier(path: str) -> type:
    """The scikit-learn classifier class at ``path`` (``sklearn.module.Class``), checked: a
    concrete estimator with fit and predict from scikit-learn's public modules. Test and
    private modules are refused before they are imported (their classes are fixtures whose
    every trial would fail, and importing them runs test code)."""
    module, _, name = path.rpartition(".")
    if any(part.startswith(("_", "test")) for part in path.split(".")[1:]):  # tests, test_x, _private
        raise AuditError(f"model '{path}' is in a scikit-learn test or private module; name a public "
                         "classifier such as sklearn.naive_bayes.GaussianNB")
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError):
        raise AuditError(f"unknown model '{path}': scikit-learn has no such class") from None
    if not (isinstance(cls, type) and issubclass(cls, ClassifierMixin) and issubclass(cls, BaseEstimator)
            and not inspect.isabstract(cls) and callable(getattr(cls, "fit", None))
            and callable(getattr(cls, "predict", None))):
        raise AuditError(f"model '{path}' is not a scikit-learn classifier (a concrete estimator with fit "
                         "and predict)")
    return cls


def _build_sklearn(path: str, random_state: int | None, **params: Any) -> ClassifierMixin:
    """A class-path model; it gets the protocol's model seed when it takes a random_state."""
    cls = sklearn_classifier(path)
    if path == "sklearn.linear_model.LogisticRegression":  # liblinear on 3+ classes: one-vs-rest, as `lr`
        from audit.engine.liblinear_ovr import OvRLogisticRegression as cls
    if path == "sklearn.ensemble.RandomForestClassifier":  # bit-identical, without the per-tree overhead, as `rf`
        from audit.fast.forest import LeanForest as cls
    if "random_state" in inspect.signature(cls).parameters:
        params.setdefault("random_state", random_state)
    return cls(**params)


@dataclass(frozen=True)
class ModelSpec:
    """A classifier as data: a builder name (or a scikit-learn class path) and its keyword parameters."""

    name: str
    params: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._builder()  # an unknown name fails here, when the spec is written

    def _builder(self) -> Callable[..., ClassifierMixin]:
        """The function that builds this model: a named builder, or the class path's."""
        if self.name.startswith(SKLEARN_PREFIX):
            sklearn_classifier(self.name)
            return functools.partial(_build_sklearn, self.name)
        if self.name not in BUILDERS:
            raise AuditError(f"unknown model '{self.name}'; known: {', '.join(sorted(BUILDERS))}, "
                             f"or a scikit-learn class path such as sklearn.naive_bayes.GaussianNB")
        return BUILDERS[self.name]

    @classmethod
    def from_data(cls, data: str | dict[str, Any]) -> "ModelSpec":
        if isinstance(data, str):
            return cls(data)
        unknown = set(data) - {"name", "params"}
        if unknown:
            raise AuditError(f"model spec has unknown keys {sorted(unknown)}")
        return cls(data["name"], dict(data.get("params", {})))

    @property
    def key(self) -> str:
        """Canonical text form; equal keys mean the same model."""
        return f"{self.name}{json.dumps(self.params, sort_keys=True)}"

    def with_defaults(self, era: str) -> "ModelSpec":
        """This spec with the era's defaults merged under its own params (unchanged for "current")."""
        extra = era_defaults(era, self.name)
        return self if not extra else ModelSpec(self.name, {**extra, **self.params})

    def build(self, random_state: int | None = None, defaults: str = "current") -> ClassifierMixin:
        """A fresh estimator; ``defaults`` names the era whose defaults fill the unset params."""
        not_installed = self.missing()
        if not_installed:
            raise AuditError(not_installed)
        return self._builder()(random_state, **dict(self.with_defaults(defaults).params))

    def missing(self) -> str | None:
        """None when this model can be built here, else what to install (one line)."""
        return extras.missing(REQUIRES[self.name][0], f"model '{self.name}'") if self.name in REQUIRES else None

    def validate(self) -> "ModelSpec":
        """Build the estimator and check its parameters now, so a bad spec fails before any trial."""
        try:
            model = self.build(0)
            if hasattr(model, "_parameter_constraints"):  # scikit-learn's own parameter check (not XGBoost's)
                model._validate_params()
        except AuditError:
            raise
        except Exception as exc:
            raise AuditError(f"model {self}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
        return self

    def to_data(self) -> dict[str, Any]:
        return {"name": self.name, "params": dict(self.params)}

    def __str__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in sorted(self.params.items()))
        return f"{self.name}({args})"


_SPEC_TEXT = re.compile(r"\s*([A-Za-z_][\w.\-]*)\s*(?:\((.*)\))?\s*", re.S)
MAX_SPEC_LENGTH = 500  # characters of one model spec; it bounds the nesting Python's parser recurses on


def parse_model(text: str) -> ModelSpec:
    """A model spec from the command line: ``NAME`` or ``NAME(param=value, ...)``, NAME a
    builder name (``knn``) or a scikit-learn class path (``sklearn.tree.DecisionTreeClassifier``),
    values Python literals. The spec is validated (see :meth:`ModelSpec.validate`). Its
    length is bounded before it is parsed, so no spec exhausts the parser's recursion or memory."""
    if len(text) > MAX_SPEC_LENGTH:
        raise AuditError(f"model spec '{text[:40]}...' has {len(text)} characters; a spec may have at most "
                         f"{MAX_SPEC_LENGTH}")
    match = _SPEC_TEXT.fullmatch(text)
    if not match:
        raise AuditError(f"cannot read model spec '{text}': write NAME or NAME(param=value, ...)")
    name, arguments = match.groups()
    params: dict[str, Any] = {}
    if arguments and arguments.strip():
        try:
            call = ast.parse(f"spec({arguments})", mode="eval").body
            if not isinstance(call, ast.Call) or call.args or any(k.arg is None for k in call.keywords):
                raise ValueError("positional arguments")
            params = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
        except (SyntaxError, ValueError):
            raise AuditError(f"cannot read the parameters of model spec '{text}': write "
                             f"NAME(param=value, ...) with literal values") from None
    return ModelSpec(name, params).validate()


def split_specs(text: str) -> list[str]:
    """Split a comma-separated list of model specs at the commas outside parentheses."""
    parts, depth, current = [], 0, []
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


def margin_scores(model: ClassifierMixin, X: np.ndarray) -> np.ndarray:
    """Distance to the decision boundary: |f(x)| for binary, top-two gap otherwise.

    Uses ``decision_function`` when the model has one, ``predict_proba`` otherwise;
    smaller means more uncertain.
    """
    if hasattr(model, "decision_function"):
        values = model.decision_function(X)
    else:
        values = model.predict_proba(X)
    if values.ndim == 1:
        return np.abs(values)
    if values.shape[1] == 2 and not hasattr(model, "decision_function"):
        return np.abs(values[:, 1] - values[:, 0])
    top2 = np.sort(values, axis=1)[:, -2:]
    return top2[:, 1] - top2[:, 0]
