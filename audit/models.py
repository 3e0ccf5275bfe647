"""Model specs: declarative descriptions of scikit-learn classifiers.

Protocols name models as data (``{name = "svm-rbf", params = {gamma = "auto"}}``);
this module turns a spec into a fresh estimator. Two specs are the same model exactly
when their ``key`` is equal, which is how the runner decides that a query model can
reuse the task model's fit.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
from sklearn.base import ClassifierMixin

from audit.errors import AuditError


def _svm(kernel: str) -> Callable[..., ClassifierMixin]:
    def build(random_state: int | None, **params: Any) -> ClassifierMixin:
        from sklearn.svm import SVC

        return SVC(kernel=kernel, random_state=random_state, **params)

    return build


def _lr(random_state: int | None, **params: Any) -> ClassifierMixin:
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(random_state=random_state, **params)


def _lr_grid(random_state: int | None, **params: Any) -> ClassifierMixin:
    """LR with C chosen by 3-fold grid search, as the Google toolbox's "Margin" used it."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GridSearchCV

    grid = params.pop("C_grid", [10.0**k for k in range(-4, 5)])
    cv = params.pop("cv", 3)
    base = LogisticRegression(random_state=random_state, max_iter=params.pop("max_iter", 200), **params)
    return GridSearchCV(base, {"C": grid}, cv=cv)


def _rf(random_state: int | None, **params: Any) -> ClassifierMixin:
    """scikit-learn's RandomForestClassifier, fitted through the bit-identical lean path when it applies."""
    from audit.forest import LeanForest

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


BUILDERS: dict[str, Callable[..., ClassifierMixin]] = {
    "svm-rbf": _svm("rbf"),
    "svm-linear": _svm("linear"),
    "lr": _lr,
    "lr-grid": _lr_grid,
    "rf": _rf,
    "lda": _lda,
    "knn": _knn,
    "gbdt": _gbdt,
}


@dataclass(frozen=True)
class ModelSpec:
    """A classifier as data: a builder name and its keyword parameters."""

    name: str
    params: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.name not in BUILDERS:
            raise AuditError(f"unknown model '{self.name}'; known: {', '.join(sorted(BUILDERS))}")

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

    def build(self, random_state: int | None = None) -> ClassifierMixin:
        return BUILDERS[self.name](random_state, **dict(self.params))

    def to_data(self) -> dict[str, Any]:
        return {"name": self.name, "params": dict(self.params)}

    def __str__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in sorted(self.params.items()))
        return f"{self.name}({args})"


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
