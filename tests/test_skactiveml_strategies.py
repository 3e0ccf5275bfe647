"""scikit-activeml strategies: uncertainty, QBC, EER, QUIRE, CoreSet, random.

Each available strategy replays a few rounds of a lu2023 trial on sonar and repeats
itself; hidden labels never move a pick; the adapter's ``missing_label`` handling
matches scikit-activeml used directly; a missing library is reported, not raised.
"""
from __future__ import annotations

import sys

import numpy as np
import pytest

import adapters
from adapters import MISSING
from audit.engine.models import ModelSpec
from audit.engine.runner import run_trial
from audit.engine.splits import make_split
from audit.protocols import StrategySpec, load_protocol
from tests.conftest import single_strategy
from tests.conftest import toy_pool as pool

LR = ModelSpec("lr", {"C": 1.0})
LU2023 = load_protocol("lu2023")
SPECS = {
    "uncertainty": StrategySpec("uncertainty", "skactiveml.uncertainty", {"method": "margin_sampling"}, LR),
    "qbc": StrategySpec("qbc", "skactiveml.qbc", {"method": "vote_entropy"}, LR),
    "eer": StrategySpec("eer", "skactiveml.eer", {}, LR),
    "quire": StrategySpec("quire", "skactiveml.quire", {"metric_dict": {"gamma": 1.0}}, None),
    "coreset": StrategySpec("coreset", "skactiveml.coreset", {}, None),
    "random": StrategySpec("random", "skactiveml.random", {}, None),
}
AVAILABLE = [s for s in SPECS if adapters.unavailable_reason(f"skactiveml.{s}") is None]








def test_every_strategy_is_available_here():
    assert AVAILABLE == list(SPECS)


@pytest.mark.parametrize("sid", AVAILABLE)
def test_replays_a_few_rounds_deterministically(sid, sonar):
    protocol = single_strategy(LU2023, SPECS[sid])
    first = run_trial(protocol, "sonar", sonar.X, sonar.y, sid, 0)
    assert first.status == "ok", first.error
    assert len(first.rounds) == 6 and all(len(r.queried) == 1 for r in first.rounds[1:])
    again = run_trial(protocol, "sonar", sonar.X, sonar.y, sid, 0)
    assert again.query_hash == first.query_hash


@pytest.mark.parametrize("sid", AVAILABLE)
def test_picks_do_not_depend_on_hidden_labels(sid, sonar):
    protocol = single_strategy(LU2023, SPECS[sid])
    first = run_trial(protocol, "sonar", sonar.X, sonar.y, sid, 0)
    assert first.status == "ok", first.error
    split = make_split(protocol, sonar.y, 0)
    seen = set(split.labeled.tolist()) | {row for r in first.rounds for row in r.queried}
    hidden = np.array([row for row in split.pool if row not in seen])
    y = np.array(sonar.y, copy=True)
    y[hidden] = 1 - y[hidden]
    second = run_trial(protocol, "sonar", sonar.X, y, sid, 0)
    assert second.status == "ok", second.error
    assert second.query_hash == first.query_hash


def test_uncertainty_matches_scikit_activeml_used_directly():
    """The adapter's MISSING (-1) handling gives the pick of the library's own nan-labelled call."""
    from skactiveml.classifier import SklearnClassifier
    from skactiveml.pool import UncertaintySampling

    X, y, _ = pool()
    candidates = np.flatnonzero(y == MISSING)
    cls = adapters.strategy_class("skactiveml.uncertainty")
    picked = cls(query_model=LR, random_state=3, method="margin_sampling").query(X, y, None, 2, candidates, None)

    y_nan = np.where(y == MISSING, np.nan, y.astype(float))
    clf = SklearnClassifier(LR.build(3), classes=[0.0, 1.0], random_state=3)
    direct = UncertaintySampling(method="margin_sampling", random_state=3).query(
        X, y_nan, clf, candidates=candidates, batch_size=2)
    assert picked.tolist() == direct.tolist()

    lr = LR.build(3).fit(X[y != MISSING], y[y != MISSING])
    p = np.sort(lr.predict_proba(X[candidates]), axis=1)
    assert picked[0] == candidates[np.argmin(p[:, -1] - p[:, -2])]


def test_qbc_takes_an_explicit_committee():
    X, y, _ = pool()
    committee = [{"name": "lr", "params": {"C": 1.0}}, {"name": "svm-linear", "params": {"probability": True}},
                 {"name": "svm-rbf", "params": {"gamma": "auto", "probability": True}}, {"name": "lda"}]
    cls = adapters.strategy_class("skactiveml.qbc")
    strategy = cls(query_model=LR, random_state=0, method="vote_entropy", committee=committee)
    candidates = np.flatnonzero(y == MISSING)
    picked = strategy.query(X, y, None, 1, candidates, None)
    assert picked[0] in candidates


def test_import_failure_is_an_unavailability_reason(monkeypatch):
    monkeypatch.delitem(sys.modules, "adapters.skactiveml", raising=False)
    for name in [m for m in sys.modules if m == "skactiveml" or m.startswith("skactiveml.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "skactiveml", None)
    reason = adapters.unavailable_reason("skactiveml.uncertainty")
    assert reason and "scikit-activeml 1.0.1 is not importable" in reason
    assert not any(name.startswith("skactiveml.") for name in adapters.implementations())
