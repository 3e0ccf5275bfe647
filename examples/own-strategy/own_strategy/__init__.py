"""Density-weighted margin sampling, as an al-audit plug-in.

Information density (Settles and Craven, 2008) with the margin as the informativeness: a
candidate is worth more the closer it lies to the query model's decision boundary and the
more typical it is of the unlabeled candidates. The pick is the candidate with the
smallest ``margin / density ** beta``, where density is the mean RBF similarity
(gamma = 1 / n_features) to all candidates; ties go to the earlier candidate.
"""
from __future__ import annotations

import numpy as np

from adapters.base import QueryStrategy


def margins(model, X: np.ndarray) -> np.ndarray:
    """Distance to the boundary: |f(x)| for two classes, the top-two gap otherwise."""
    values = model.decision_function(X) if hasattr(model, "decision_function") else model.predict_proba(X)
    if values.ndim == 1:
        return np.abs(values)
    top2 = np.sort(values, axis=1)[:, -2:]
    return top2[:, 1] - top2[:, 0]


def densities(X: np.ndarray) -> np.ndarray:
    """Mean RBF similarity of each row to every row (itself included), in (0, 1]."""
    squared = np.sum(X**2, axis=1)
    distances = np.maximum(squared[:, None] + squared[None, :] - 2 * X @ X.T, 0.0)
    return np.exp(-distances / X.shape[1]).mean(axis=1)


class DensityMargin(QueryStrategy):
    implements = "density-weighted margin sampling"
    model_use = "fitted"  # the runner passes the fitted query model
    param_defaults = {"beta": 1.0}

    def __init__(self, query_model=None, random_state=None, **params):
        super().__init__(query_model, random_state, **params)
        beta = self.params["beta"]
        if isinstance(beta, bool) or not isinstance(beta, (int, float)) or not 0 <= beta < float("inf"):
            raise ValueError(f"beta must be a finite number >= 0, not {beta!r}")

    def _select(self, X, y, model, batch_size, candidates, rng):
        pool = X[candidates]
        scores = margins(model, pool) / densities(pool) ** self.params["beta"]
        return np.asarray(candidates)[np.argsort(scores, kind="stable")[:batch_size]]
