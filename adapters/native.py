"""Strategies written in this project, from their published descriptions."""
from __future__ import annotations

from typing import Any

import numpy as np

from adapters.base import QueryStrategy
from audit.errors import AuditError
from audit.models import margin_scores


class Uniform(QueryStrategy):
    """Passive baseline.

    order="pool" takes the next candidates in pool order, as the Google toolbox's
    uniform sampler does (random only when the pool was shuffled); order="random"
    draws without replacement from the strategy's RNG.
    """

    implements = "uniform sampling"
    param_defaults = {"order": "pool"}

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        if self.params["order"] not in ("pool", "random"):
            raise AuditError(f"Uniform order must be 'pool' or 'random', not {self.params['order']!r}")

    def _select(self, X, y, model, batch_size, candidates, rng):
        if self.params["order"] == "pool":
            return np.asarray(candidates[:batch_size])
        return rng.choice(candidates, size=batch_size, replace=False)


class Margin(QueryStrategy):
    """Uncertainty sampling by margin: the candidates closest to the query model's boundary.

    Ties go to the earlier candidate in pool order (stable sort).
    """

    implements = "margin uncertainty sampling"
    model_use = "fitted"

    def _select(self, X, y, model, batch_size, candidates, rng):
        scores = margin_scores(model, X[candidates])
        return np.asarray(candidates)[np.argsort(scores, kind="stable")[:batch_size]]


STRATEGIES: dict[str, type[QueryStrategy]] = {"uniform": Uniform, "margin": Margin}
