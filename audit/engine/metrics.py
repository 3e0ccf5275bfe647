"""Per-round test metrics and the AUBC variants found in published code.

Per-round metrics are computed from hard predicted labels with plain numpy (they run
once per round of every trial, so scikit-learn's input validation would dominate the
cost on small data sets); tests check them against scikit-learn.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from audit.errors import AuditError

METRICS = ("accuracy", "f1", "roc_auc")


def _binary_counts(y_true: np.ndarray, y_pred: np.ndarray, positive: int) -> tuple[int, int, int, int]:
    t = y_true == positive
    p = y_pred == positive
    tp = int(np.count_nonzero(t & p))
    fp = int(np.count_nonzero(~t & p))
    fn = int(np.count_nonzero(t & ~p))
    tn = t.size - tp - fp - fn
    return tp, fp, fn, tn


def predicted_labels(y_pred: Any, n_rows: int) -> np.ndarray:
    """A model's ``predict`` output as one label per row. CatBoost returns an (n, 1) column on
    three or more classes; compared with the (n,) truth it would broadcast to an n x n matrix
    (an "accuracy" of about n / k). Any other shape is an error, never a metric."""
    labels = np.asarray(y_pred)
    if labels.ndim == 2 and labels.shape[1] == 1:
        labels = labels[:, 0]
    if labels.shape != (n_rows,):
        raise ValueError(f"the task model predicted an array of shape {np.shape(y_pred)} for {n_rows} rows; "
                         f"expected one label per row")
    return labels


def round_metrics(y_true: np.ndarray, y_pred: np.ndarray, n_classes: int) -> dict[str, float]:
    """Accuracy, F1 and ROC-AUC of hard labels.

    Binary: F1 of class 1; ROC-AUC of a hard classifier is (TPR + TNR) / 2.
    Multi-class: macro F1 and macro one-vs-rest ROC-AUC of the hard labels.
    ROC-AUC is NaN when the test set holds a single class.
    """
    y_pred = predicted_labels(y_pred, y_true.size)
    accuracy = float(np.count_nonzero(y_true == y_pred)) / y_true.size
    classes = [1] if n_classes == 2 else list(range(n_classes))
    f1s, aucs = [], []
    for c in classes:
        tp, fp, fn, tn = _binary_counts(y_true, y_pred, c)
        f1s.append(2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0)
        if tp + fn and tn + fp:
            aucs.append((tp / (tp + fn) + tn / (tn + fp)) / 2)
    return {
        "accuracy": accuracy,
        "f1": float(np.mean(f1s)),
        "roc_auc": float(np.mean(aucs)) if len(aucs) == len(classes) else float("nan"),
    }


@dataclass(frozen=True)
class AubcVariant:
    """How one code base turned a learning curve into a single number.

    include_initial: whether the point before the first query (initial model) counts.
    rule: "trapezoid" (area along the number of queried labels) or "mean" of the points.
    divide_by: "quota" (labels queried), "quota+1", or "none" (raw area).
    x_axis: "queried" (0..quota) or "labeled" (labeled-set size; only matters for raw area).
    decimals: rounding applied to each trial's value, None for none.
    include_last: whether the point after the last query counts (CDALBench's eq. 1 with its
    Alg. 1 evaluates the model before each acquisition, so the last label is never scored).
    """

    name: str
    include_initial: bool
    rule: str
    divide_by: str
    x_axis: str
    decimals: int | None
    source: str
    include_last: bool = True

    def __call__(self, values: Sequence[float], n_labeled: Sequence[int]) -> float:
        return aubc(values, n_labeled, self)

    def unit(self, scale: str) -> str:
        """What one AUBC value measures: the metric's scale, times labels for a raw area (a
        mean of the points is on the metric's scale whatever ``divide_by`` says)."""
        if self.divide_by != "none" or self.rule == "mean":
            return scale
        return f"{scale} x {'labeled rows' if self.x_axis == 'labeled' else 'queried labels'} (raw area)"


def aubc(values: Sequence[float], n_labeled: Sequence[int], variant: AubcVariant) -> float:
    """Area under the budget curve of one trial.

    ``values[0]`` and ``n_labeled[0]`` are the initial model's; entry r > 0 is after round r.
    """
    v = np.asarray(values, dtype=float)
    n = np.asarray(n_labeled, dtype=float)
    if v.size != n.size or v.size < 2:
        raise ValueError("a budget curve needs the initial point and at least one query")
    quota = n[-1] - n[0]
    if not variant.include_initial:
        v, n = v[1:], n[1:]
    if not variant.include_last:
        v, n = v[:-1], n[:-1]
    if variant.rule == "mean":
        area = float(v.mean())
    else:
        x = n - n[0] if variant.x_axis == "queried" else n
        area = float(np.trapezoid(v, x)) if v.size > 1 else 0.0
    if variant.divide_by == "quota":
        area /= quota
    elif variant.divide_by == "quota+1":
        area /= quota + 1
    return round(area, variant.decimals) if variant.decimals is not None else area


AUBC_VARIANTS: dict[str, AubcVariant] = {
    v.name: v
    for v in (
        AubcVariant("trapezoid", True, "trapezoid", "quota", "queried", None,
                    "zhan2021 paper: trapezoid rule over the whole budget curve, normalised by the budget"),
        AubcVariant("zhan2021_code", True, "trapezoid", "quota", "queried", 3,
                    "zhan2021 released code: initial + each query, / quota, rounded to 3 decimals"),
        AubcVariant("lu2023_code", False, "trapezoid", "quota", "queried", 5,
                    "lu2023 released code: accuracies after each query only, / quota, rounded to 5 decimals"),
        AubcVariant("lu2023_later", False, "trapezoid", "quota+1", "queried", None,
                    "lu2023 later code: after each query only, / (quota + 1), no rounding"),
        AubcVariant("alpbench", True, "trapezoid", "none", "labeled", None,
                    "ALPBench code: raw area with x = labeled-set size"),
        AubcVariant("cdalbench", True, "mean", "none", "queried", None,
                    "CDALBench eq. 1 with Alg. 1: mean of the B accuracies before each acquisition "
                    "(initial model included, the model after the last label never scored)",
                    include_last=False),
        AubcVariant("cdalbench_code", True, "mean", "none", "queried", None,
                    "CDALBench released code: mean of the B + 1 logged test accuracies (the initial "
                    "model and the model after every query, the last included; core/logging.py and "
                    "results/generate_result_tables.py)"),
    )
}


def get_variant(name: str) -> AubcVariant:
    try:
        return AUBC_VARIANTS[name]
    except KeyError:
        raise AuditError(f"unknown AUBC variant '{name}'; known: {', '.join(AUBC_VARIANTS)}") from None
