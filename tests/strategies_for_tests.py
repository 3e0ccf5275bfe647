"""Strategies that misbehave on purpose, registered by tests to exercise error handling."""
import time
from pathlib import Path

import numpy as np

from adapters.base import QueryStrategy


class FailsAtRound(QueryStrategy):
    """Raises inside `query` on its third call, as a library failing mid-trial would."""

    implements = "failing strategy"
    param_defaults = {"fail_on_call": 3, "fail_seeds": (0,)}

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.calls = 0

    def _select(self, X, y, model, batch_size, candidates, rng):
        self.calls += 1
        if self.calls == self.params["fail_on_call"] and self.random_state in self.params["fail_seeds"]:
            raise np.linalg.LinAlgError("Singular matrix (deliberate)")
        return np.asarray(candidates[:batch_size])


class ReturnsLabeled(QueryStrategy):
    """Breaks the contract: returns an already labeled row."""

    implements = "contract breaker"

    def _select(self, X, y, model, batch_size, candidates, rng):
        return np.flatnonzero(y != -1)[:batch_size]


class Sleeps(QueryStrategy):
    """Takes `seconds` per query: a strategy too slow for the time limit."""

    implements = "slow strategy"
    param_defaults = {"seconds": 0.05}

    def _select(self, X, y, model, batch_size, candidates, rng):
        time.sleep(self.params["seconds"])
        return np.asarray(candidates[:batch_size])


class SleepsInLibrary(Sleeps):
    """Sleeps inside ``except Exception`` that re-raises as its own error, as cvxpy's OSQP
    interface does with anything raised while the solver is set up."""

    implements = "slow strategy wrapping errors"

    def _select(self, X, y, model, batch_size, candidates, rng):
        try:
            return super()._select(X, y, model, batch_size, candidates, rng)
        except Exception as exc:
            raise RuntimeError("the solver failed") from exc


class PreparesOnce(QueryStrategy):
    """Needs one-time work on the machine first, as LAL needs its training data: ``prepare``
    takes ``seconds`` and leaves the file ``marker``; a query finding no marker fails."""

    implements = "strategy with one-time preparation"
    param_defaults = {"seconds": 0.05, "marker": ""}

    @classmethod
    def prepare(cls, params, log):
        marker = Path(params["marker"])
        if not marker.exists():
            log(f"preparing {marker.name}")
            time.sleep(params["seconds"])
            marker.write_text("prepared")

    def _select(self, X, y, model, batch_size, candidates, rng):
        if not Path(self.params["marker"]).exists():
            raise RuntimeError("queried before its preparation")
        return np.asarray(candidates[:batch_size])


STRATEGIES = {"fails": FailsAtRound, "returns-labeled": ReturnsLabeled, "sleeps": Sleeps,
              "sleeps-in-library": SleepsInLibrary, "prepares-once": PreparesOnce}
