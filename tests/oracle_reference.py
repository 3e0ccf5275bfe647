"""Plain reference implementations of the oracles (used by tests/test_oracles.py and
benchmarks/oracle.py).

Written for obviousness, not speed: every candidate of every beam is fitted through
scikit-learn exactly as the runner fits the task model, labeled sets are frozensets,
nothing is cached or parallel. adapters/oracles.py must choose exactly the same sequence.
"""
from __future__ import annotations

import numpy as np

from audit.engine.models import margin_scores
from audit.engine.runner import _Features, budget_for
from audit.engine.splits import make_split, subsystem_seed
from audit.protocols import Protocol


class _Trial:
    """One trial's split, features and task-model fit, as the runner sets them up."""

    def __init__(self, protocol: Protocol, X: np.ndarray, y: np.ndarray, trial_seed: int):
        split = make_split(protocol, y, trial_seed)
        self.protocol = protocol
        self.features = _Features(protocol.scaling["task"], X, split)
        self.y_train, self.y_test = y[split.train], y[split.test]
        self.n_initial, self.n_train = split.labeled.size, split.train.size
        self.budget = budget_for(protocol, split.pool.size, int(y.max()) + 1)
        self.model_seed = subsystem_seed(protocol.seeds["model"], trial_seed, "model")
        self.strategy_seed = subsystem_seed(protocol.seeds["strategy"], trial_seed, "strategy")

    def fit(self, labeled) -> object:
        positions = np.array(sorted(labeled))
        self.features.update(positions)
        return self.protocol.task_model.build(self.model_seed).fit(self.features.X_train[positions],
                                                                   self.y_train[positions])

    def correct(self, labeled) -> int:
        return int(np.sum(self.fit(labeled).predict(self.features.X_test) == self.y_test))


def naive_beam_search(protocol: Protocol, X: np.ndarray, y: np.ndarray, trial_seed: int,
                      beam_width: int = 5) -> tuple[int, ...]:
    """Train positions of the best sequence, by the rules of adapters/oracles.py's docstring."""
    trial = _Trial(protocol, X, y, trial_seed)
    beams = [(frozenset(range(trial.n_initial)), (), 0)]  # (labeled set, queried, path score)
    for _ in range(trial.budget):
        children: dict[frozenset, dict] = {}
        for rank, (labeled, queried, score) in enumerate(beams):
            for candidate in range(trial.n_train):
                if candidate in labeled:
                    continue
                child = labeled | {candidate}
                count = trial.correct(child)
                if child not in children or score > children[child]["parent_score"]:
                    children[child] = {"count": count, "parent_score": score, "key": (rank, candidate),
                                       "queried": queried + (candidate,)}
        ranked = sorted(children.items(), key=lambda kv: (-kv[1]["count"], -(kv[1]["parent_score"] + kv[1]["count"]),
                                                          kv[1]["key"]))
        beams = [(child, v["queried"], v["parent_score"] + v["count"]) for child, v in ranked[:beam_width]]
    best = max(range(len(beams)), key=lambda i: (beams[i][2], -i))
    return beams[best][1]


def naive_greedy(protocol: Protocol, X: np.ndarray, y: np.ndarray, trial_seed: int, tau: int = 20) -> tuple[int, ...]:
    """Train positions queried by CDALBench Algorithm 3, candidate by candidate."""
    trial = _Trial(protocol, X, y, trial_seed)
    rng = np.random.default_rng(trial.strategy_seed)
    labeled = list(range(trial.n_initial))
    queried = []
    for _ in range(trial.budget):
        pool = np.array([c for c in range(trial.n_train) if c not in labeled])
        best, best_count = None, trial.correct(labeled)
        for u in rng.choice(pool, size=min(tau, pool.size), replace=False):
            count = trial.correct(labeled + [int(u)])
            if count > best_count:
                best, best_count = int(u), count
        if best is None:
            model = trial.fit(labeled)
            best = int(pool[np.argmin(margin_scores(model, trial.features.X_train[pool]))])
        labeled.append(best)
        queried.append(best)
    return tuple(queried)
