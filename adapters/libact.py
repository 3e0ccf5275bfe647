"""libact 0.1.6 strategies.

libact keeps a stateful ``Dataset`` (``None`` = unlabeled) and trains its query model
itself inside ``make_query``; the adapter builds the dataset and the libact strategy on
the first call of a trial and afterwards only copies newly revealed labels into it.
"""
from __future__ import annotations

import contextlib
import io
from typing import Any

import numpy as np

from adapters.base import MISSING, QueryStrategy
from audit.errors import StrategyError
from audit.models import ModelSpec


def _import_quietly() -> None:
    """libact prints a notice for each C extension it was built without; the capability
    matrix reports those, so the import itself stays silent."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        import libact.query_strategies  # noqa: F401


_import_quietly()


def libact_model(spec: ModelSpec, random_state: int | None) -> Any:
    """A libact model for a spec: libact's own LR wrapper for "lr", an sklearn adapter otherwise."""
    from libact.models import LogisticRegression, SklearnProbaAdapter

    if spec.name == "lr":
        return LogisticRegression(random_state=random_state, **spec.params)
    return SklearnProbaAdapter(spec.build(random_state))


class LibactStrategy(QueryStrategy):
    """Shared plumbing: one libact Dataset per pool, synchronised with ``y`` each call."""

    library = "libact"
    batch = False

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self._X: np.ndarray | None = None
        self._dataset: Any = None
        self._strategy: Any = None

    def _make_strategy(self, dataset: Any) -> Any:
        raise NotImplementedError

    def _sync(self, X: np.ndarray, y: np.ndarray) -> None:
        from libact.base.dataset import Dataset

        if self._X is not X:
            labels = [int(v) if v != MISSING else None for v in y]
            self._X, self._dataset = X, Dataset(X, labels)
            self._strategy = self._make_strategy(self._dataset)
            return
        known = self._dataset.get_labeled_mask()
        for i in np.flatnonzero((y != MISSING) & ~known):
            self._dataset.update(int(i), int(y[i]))

    def _select(self, X, y, model, batch_size, candidates, rng):
        if batch_size != 1:
            raise StrategyError(f"{self.library} {self.implements} queries one example at a time")
        self._sync(X, y)
        unlabeled = np.flatnonzero(y == MISSING)
        if unlabeled.size != len(candidates) or not np.array_equal(np.sort(candidates), unlabeled):
            raise StrategyError("libact strategies query from every unlabeled row; candidates must be all of them")
        return np.array([int(self._strategy.make_query())])


class Uncertainty(LibactStrategy):
    """libact ``UncertaintySampling``; ties go to the first unlabeled row (argmax)."""

    implements = "UncertaintySampling"
    param_defaults = {"method": "lc"}
    model_use = "own"

    def _make_strategy(self, dataset):
        from libact.query_strategies import UncertaintySampling

        return UncertaintySampling(
            dataset, model=libact_model(self.query_model, self.random_state), method=self.params["method"]
        )


STRATEGIES: dict[str, type[QueryStrategy]] = {"uncertainty": Uncertainty}
