"""The conformance suite every adapter passes (like scikit-learn's check_estimator).

Adding a library is writing one adapter file and one registry line; this suite then
runs against it without changes.
"""
from __future__ import annotations

import numpy as np
import pytest

from types import SimpleNamespace

import adapters
from adapters import MISSING, QueryStrategy
from adapters.base import TrialView
from audit.errors import AuditError
from audit.models import ModelSpec
from tests.conftest import toy_pool as pool

QUERY_MODEL = ModelSpec("lr", {"C": 1.0})
AVAILABLE = [name for name in adapters.implementations() if adapters.unavailable_reason(name) is None]




def toy_trial_view(budget: int = 5) -> TrialView:
    """What a strategy that uses the test labels (an oracle) is given: every label of the
    toy pool, 40 other rows as the test set, an SVC task model (the oracles' fast path)."""
    X, _, y_true = pool()
    X_test, _, y_test = pool(n=40, seed=1)
    features = SimpleNamespace(scope="none", X_train_raw=X, X_test_raw=X_test, X_train=X, X_test=X_test)
    return TrialView(ModelSpec("svm-rbf"), 0, features, y_true, y_test, budget)


def make(name: str, seed: int = 0) -> QueryStrategy:
    cls = adapters.strategy_class(name)
    strategy = cls(query_model=QUERY_MODEL if cls.model_use == "own" else None, random_state=seed)
    if cls.uses_test_labels:
        strategy.begin_trial(toy_trial_view())
    return strategy


def fitted_model(cls, X, y):
    if cls.model_use != "fitted":
        return None
    labeled = y != MISSING
    return QUERY_MODEL.build(0).fit(X[labeled], y[labeled])


def ask(strategy, X, y, batch=1, candidates=None, seed=0):
    candidates = np.flatnonzero(y == MISSING) if candidates is None else candidates
    return np.asarray(strategy.query(X, y, fitted_model(type(strategy), X, y), batch, candidates,
                                     np.random.default_rng(seed)))


def test_registry_has_the_slice_strategies():
    assert {"native.uniform", "native.margin", "libact.uncertainty"} <= set(AVAILABLE)


@pytest.mark.parametrize("name", AVAILABLE)
def test_describes_itself(name):
    cls = adapters.strategy_class(name)
    assert issubclass(cls, QueryStrategy)
    assert cls.model_use in ("none", "fitted", "own")
    assert cls.implements and cls.library_version()
    strategy = make(name)
    assert set(cls.param_defaults) <= set(strategy.get_params())


@pytest.mark.parametrize("name", AVAILABLE)
def test_rejects_parameters_it_would_ignore(name):
    cls = adapters.strategy_class(name)
    with pytest.raises(AuditError, match="does not use parameter"):
        cls(query_model=QUERY_MODEL, cl=1.0, ch=1.0)


@pytest.mark.parametrize("name", AVAILABLE)
def test_returns_one_unlabeled_candidate(name):
    X, y, _ = pool()
    picked = ask(make(name), X, y)
    assert picked.shape == (1,) and np.issubdtype(picked.dtype, np.integer)
    assert y[picked[0]] == MISSING


@pytest.mark.parametrize("name", AVAILABLE)
def test_is_deterministic_for_a_seed(name):
    X, y, _ = pool()
    assert ask(make(name, 3), X, y, seed=3).tolist() == ask(make(name, 3), X, y, seed=3).tolist()


@pytest.mark.parametrize("name", AVAILABLE)
def test_follows_labels_revealed_between_calls(name):
    """A strategy reused across rounds sees the labels added since its last call."""
    X, y, y_true = pool()
    strategy = make(name)
    for _ in range(5):
        (picked,) = ask(strategy, X, y)
        assert y[picked] == MISSING
        y = y.copy()
        y[picked] = y_true[picked]


@pytest.mark.parametrize("name", [n for n in AVAILABLE if adapters.strategy_class(n).batch])
def test_batch_queries_are_distinct_candidates_within_the_given_subset(name):
    X, y, _ = pool()
    candidates = np.flatnonzero(y == MISSING)[::2]
    picked = ask(make(name), X, y, batch=5, candidates=candidates)
    assert len(set(picked.tolist())) == 5 and set(picked.tolist()) <= set(candidates.tolist())


def test_margin_picks_the_candidate_closest_to_the_boundary():
    X, y, _ = pool()
    model = QUERY_MODEL.build(0).fit(X[y != MISSING], y[y != MISSING])
    candidates = np.flatnonzero(y == MISSING)
    picked = adapters.strategy_class("native.margin")().query(X, y, model, 3, candidates, np.random.default_rng(0))
    expected = candidates[np.argsort(np.abs(model.decision_function(X[candidates])))[:3]]
    assert picked.tolist() == expected.tolist()


def test_uniform_orders():
    X, y, _ = pool()
    candidates = np.flatnonzero(y == MISSING)
    uniform = adapters.strategy_class("native.uniform")
    assert uniform(order="pool").query(X, y, None, 4, candidates, None).tolist() == candidates[:4].tolist()
    drawn = uniform(order="random").query(X, y, None, 4, candidates, np.random.default_rng(1))
    assert drawn.tolist() != candidates[:4].tolist() and set(drawn) <= set(candidates)
    with pytest.raises(AuditError):
        uniform(order="sideways")


def test_libact_uncertainty_is_entropy_argmax_of_its_own_lr():
    """libact trains LR(C=0.1) itself; its pick is the unlabeled row of maximal entropy."""
    from sklearn.linear_model import LogisticRegression

    X, y, _ = pool()
    cls = adapters.strategy_class("libact.uncertainty")
    strategy = cls(query_model=ModelSpec("lr", {"C": 0.1}), method="entropy")
    (picked,) = strategy.query(X, y, None, 1, np.flatnonzero(y == MISSING), None)
    lr = LogisticRegression(C=0.1).fit(X[y != MISSING], y[y != MISSING])
    unlabeled = np.flatnonzero(y == MISSING)
    p = lr.predict_proba(X[unlabeled])
    assert picked == unlabeled[np.argmax(-(p * np.log(p)).sum(axis=1))]


def test_libact_refuses_batches_and_partial_candidate_sets():
    from audit.errors import StrategyError

    X, y, _ = pool()
    strategy = make("libact.uncertainty")
    with pytest.raises(StrategyError, match="one example at a time"):
        ask(strategy, X, y, batch=2)
    with pytest.raises(StrategyError, match="every unlabeled row"):
        ask(strategy, X, y, candidates=np.flatnonzero(y == MISSING)[:5])


def test_unknown_implementation():
    with pytest.raises(AuditError, match="unknown implementation 'nope.x'"):
        adapters.strategy_class("nope.x")


@pytest.mark.parametrize("name", [n for n in AVAILABLE if adapters.strategy_class(n).batch])
def test_a_pool_smaller_than_the_batch_is_queried_whole(name):
    X, y, _ = pool()
    candidates = np.flatnonzero(y == MISSING)[:3]
    picked = ask(make(name), X, y, batch=5, candidates=candidates)
    assert sorted(picked.tolist()) == candidates.tolist()


ENCODINGS = {"parkinsons": "1/0", "heart": "+1/-1", "sonar": "1/-1"}


@pytest.fixture(scope="module")
def encoded_datasets():
    from audit.datasets import DataError, load_dataset

    try:
        return {name: load_dataset(name) for name in ENCODINGS}
    except DataError as exc:
        pytest.skip(f"data not available: {exc}")


@pytest.mark.parametrize("name", AVAILABLE)
def test_runs_in_a_trial_on_every_label_encoding_without_seeing_held_out_labels(name, encoded_datasets,
                                                                               monkeypatch):
    """Through the real runner: X holds only train rows and y no label of an unlabeled row."""
    import dataclasses

    from audit.protocols import StrategySpec, load_protocol
    from audit.runner import run_trial
    from audit.splits import make_split

    cls = adapters.strategy_class(name)
    seen = []
    original = cls._select

    def spy(self, X, y, model, batch_size, candidates, rng):
        seen.append((X.shape[0], bool(np.all(y[candidates] == MISSING)), int(np.count_nonzero(y != MISSING))))
        return original(self, X, y, model, batch_size, candidates, rng)

    monkeypatch.setattr(cls, "_select", spy)
    query_model = None if cls.model_use == "none" else QUERY_MODEL
    base = load_protocol("lu2023")
    protocol = dataclasses.replace(base, budget_size=3,
                                   strategies={"s": StrategySpec("s", name, {}, query_model)})
    for dataset, data in encoded_datasets.items():
        seen.clear()
        result = run_trial(protocol, dataset, data.X, data.y, "s", 0)
        assert result.status == "ok", f"{dataset} ({ENCODINGS[dataset]}): {result.error}"
        n_train = make_split(protocol, data.y, 0).train.size
        assert [s[0] for s in seen] == [n_train] * 3
        assert all(s[1] for s in seen)
        assert [s[2] for s in seen] == [20, 21, 22]
