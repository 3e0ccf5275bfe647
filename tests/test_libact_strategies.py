"""libact strategies beyond uncertainty sampling: QBC, HintSVM, QUIRE, ALBL, DWUS, VR.

Each available strategy replays a few rounds of a lu2023 trial on sonar and repeats
itself; the keyword check catches what libact would silently ignore; unavailable
strategies say exactly why.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import adapters
from adapters import MISSING
from adapters import libact as la
from audit.engine.models import ModelSpec
from audit.engine.runner import run_trial
from audit.errors import AuditError
from audit.protocols import load_protocol

LIBACT_IDS = ("qbc", "hintsvm", "quire", "albl", "dwus", "vr")
AVAILABLE_IDS = [s for s in LIBACT_IDS if adapters.unavailable_reason(f"libact.{s}") is None]
HINTSVM = ("libact.query_strategies.hintsvm", "HintSVM")
QUIRE = ("libact.query_strategies.quire", "QUIRE")


@pytest.fixture(scope="module")
def lu2023_short():
    return dataclasses.replace(load_protocol("lu2023"), budget_size=5)


def test_lu2023_binds_every_libact_strategy():
    protocol = load_protocol("lu2023")
    for sid in LIBACT_IDS:
        # VR runs libact 0.1.6's computation re-implemented: libact's C extension needs LAPACKE
        expected = "native.vr" if sid == "vr" else f"libact.{sid}"
        assert protocol.strategy(sid).implementation == expected
    zhan = load_protocol("zhan2021")
    assert zhan.strategy("hintsvm").params["Cl"] == zhan.strategy("hintsvm").params["Ch"] == 0.1


# DWUS(sigma=0.1) underflows on standardised sonar (every cluster responsibility is 0/0):
# libact's behaviour, replayed as is, so its RuntimeWarning is expected here.
@pytest.mark.filterwarnings("ignore:invalid value encountered in divide:RuntimeWarning")
@pytest.mark.parametrize("sid", AVAILABLE_IDS)
def test_replays_a_few_rounds_on_sonar_deterministically(sid, lu2023_short, sonar):
    first = run_trial(lu2023_short, "sonar", sonar.X, sonar.y, sid, 0)
    assert first.status == "ok", first.error
    assert len(first.rounds) == 6 and all(len(r.queried) == 1 for r in first.rounds[1:])
    queried = [r.queried[0] for r in first.rounds[1:]]
    assert len(set(queried)) == 5
    again = run_trial(lu2023_short, "sonar", sonar.X, sonar.y, sid, 0)
    assert again.query_hash == first.query_hash


def test_qbc_committee_is_the_one_lu2023_used():
    spec = load_protocol("lu2023").strategy("qbc")
    cls = adapters.strategy_class(spec.implementation)
    assert cls.model_use == "none" and cls.implements == "QueryByCommittee"
    strategy = cls(random_state=1126, **spec.params)
    committee = [ModelSpec.from_data(m) for m in spec.params["committee"]]
    assert [str(m) for m in committee] == [
        "lr(C=1.0)", "svm-linear(probability=True)", "svm-rbf(gamma='auto', probability=True)", "lda()",
    ]
    assert strategy.get_params()["committee"] == [str(m) for m in committee]
    assert strategy.params["disagreement"] == "vote"
    assert [ModelSpec.from_data(m) for m in cls.param_defaults["committee"]] == committee

    X = np.random.default_rng(0).normal(size=(40, 3))
    y = np.full(40, MISSING)
    y[:10] = (X[:10, 0] > 0).astype(int)
    y[:2] = [0, 1]
    strategy.query(X, y, None, 1, np.flatnonzero(y == MISSING), None)
    students = strategy._strategy.students
    estimators = [s._model for s in students]
    assert [type(e).__name__ for e in estimators] == [
        "LeanLR", "LeanSVC", "LeanSVC", "LinearDiscriminantAnalysis",  # LeanLR, LeanSVC: LR and SVC bit for bit
    ]
    assert estimators[0].C == 1.0
    assert (estimators[1].kernel, estimators[1].probability) == ("linear", True)
    assert (estimators[2].kernel, estimators[2].gamma, estimators[2].probability) == ("rbf", "auto", True)
    assert strategy._strategy.disagreement == "vote"


def test_qbc_silences_only_the_svc_probability_deprecation():
    import warnings

    cls = adapters.strategy_class("libact.qbc")
    X = np.random.default_rng(1).normal(size=(40, 3))
    y = np.full(40, MISSING)
    y[:10] = (X[:10, 0] > 0).astype(int)
    y[:2] = [0, 1]
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        cls(random_state=0).query(X, y, None, 1, np.flatnonzero(y == MISSING), None)


@pytest.mark.parametrize("kwargs", [{"cl": 1.0}, {"ch": 1.0}, {"cl": 1.0, "ch": 1.0}])
def test_ignored_argument_check_catches_zhan2021_hintsvm_keywords(kwargs):
    with pytest.raises(AuditError, match="HintSVM would silently ignore") as caught:
        la.check_libact_kwargs(*HINTSVM, kwargs)
    for name in kwargs:
        assert name in str(caught.value)


def test_ignored_argument_check_accepts_the_names_libact_reads():
    la.check_libact_kwargs(*HINTSVM, {"Cl": 1.0, "Ch": 1.0, "p": 0.5, "kernel": "linear", "gamma": 0.1,
                                      "random_state": 1126})
    la.check_libact_kwargs(*QUIRE, {"lambda": 1.0, "kernel": "rbf", "gamma": 1.0})
    assert {"Cl", "Ch", "p", "kernel", "gamma", "random_state"} <= la.libact_init_reads(*HINTSVM)
    for module, name in [
        ("libact.query_strategies.query_by_committee", "QueryByCommittee"),
        ("libact.query_strategies.active_learning_by_learning", "ActiveLearningByLearning"),
        ("libact.query_strategies.density_weighted_uncertainty_sampling", "DWUS"),
        ("libact.query_strategies.variance_reduction", "VarianceReduction"),
        ("libact.query_strategies.uncertainty_sampling", "UncertaintySampling"),
    ]:
        assert la.libact_init_reads(module, name)  # every class parses, built or not


def test_ignored_argument_check_catches_a_made_up_quire_keyword():
    with pytest.raises(AuditError, match="QUIRE would silently ignore keyword argument.* bandwidth"):
        la.check_libact_kwargs(*QUIRE, {"lambda": 1.0, "bandwidth": 2.0})


def test_every_adapter_builds_its_libact_object_through_the_check(monkeypatch, sonar):
    """An adapter that passed a keyword libact ignores would fail at construction."""
    seen = []
    real = la.check_libact_kwargs

    def spy(module, name, kwargs):
        seen.append(name)
        real(module, name, kwargs)

    monkeypatch.setattr(la, "check_libact_kwargs", spy)
    rows = np.random.default_rng(0).permutation(len(sonar.y))[:60]
    X, y_true = sonar.X[rows], sonar.y[rows]
    y = np.full(60, MISSING)
    labeled = np.concatenate([np.flatnonzero(y_true == 0)[:5], np.flatnonzero(y_true == 1)[:5]])
    y[labeled] = y_true[labeled]
    for sid in AVAILABLE_IDS + ["uncertainty"]:
        cls = adapters.strategy_class(f"libact.{sid}")
        strategy = cls(query_model=ModelSpec("lr", {"C": 1.0}) if cls.model_use == "own" else None, random_state=0)
        strategy.query(X, y, None, 1, np.flatnonzero(y == MISSING), None)
    assert {"QueryByCommittee", "UncertaintySampling"} <= set(seen)
    for sid, name in [("hintsvm", "HintSVM"), ("quire", "QUIRE"), ("dwus", "DWUS"),
                      ("albl", "ActiveLearningByLearning")]:
        if sid in AVAILABLE_IDS:
            assert name in seen


def test_binary_labels_reach_libact_as_minus_one_plus_one(sonar):
    X = sonar.X[:40]
    y = np.full(40, MISSING)
    y[:10] = [0, 1] * 5
    strategy = adapters.strategy_class("libact.quire")(random_state=0)
    strategy.query(X, y, None, 1, np.flatnonzero(y == MISSING), None)
    assert sorted(set(strategy._dataset.get_labeled_entries()[1])) == [-1, 1]


def test_albl_plans_for_the_whole_pool_unless_told(sonar):
    if "albl" not in AVAILABLE_IDS:
        pytest.skip(adapters.unavailable_reason("libact.albl"))
    X = sonar.X[:50]
    y = np.full(50, MISSING)
    y[:10] = [0, 1] * 5
    cls = adapters.strategy_class("libact.albl")
    default = cls(query_model=ModelSpec("lr", {"C": 1.0}), random_state=0)
    default.query(X, y, None, 1, np.flatnonzero(y == MISSING), None)
    assert default._strategy.T == 40
    fixed = cls(query_model=ModelSpec("lr", {"C": 1.0}), random_state=0, T=7)
    fixed.query(X, y, None, 1, np.flatnonzero(y == MISSING), None)
    assert fixed._strategy.T == 7
    arms = default._strategy.query_strategies_
    assert [type(a).__name__ for a in arms] == ["UncertaintySampling", "UncertaintySampling", "HintSVM"]
    assert [a.model.model.C for a in arms[:2]] == [1.0, 0.01]
    assert (arms[2].cl, arms[2].ch) == (0.1, 0.1)


def test_albl_rejects_bad_arms():
    cls = adapters.strategy_class("libact.albl")
    with pytest.raises(AuditError, match="arm strategy must be"):
        cls(query_model=ModelSpec("lr"), arms=[{"strategy": "albl"}])
    with pytest.raises(AuditError, match="needs a model spec"):
        cls(query_model=ModelSpec("lr"), arms=[{"strategy": "uncertainty"}])
    with pytest.raises(AuditError, match="does not use parameter"):
        cls(query_model=ModelSpec("lr"), arms=[{"strategy": "quire", "params": {"cl": 1.0}}])


def test_unavailable_strategies_say_precisely_why():
    reason = adapters.unavailable_reason("libact.vr")
    assert reason is not None
    assert reason.startswith("libact VarianceReduction C extension (_variance_reduction) not built")
    assert "lapacke.h" in reason
    hintsvm = adapters.unavailable_reason("libact.hintsvm")
    if hintsvm is not None:
        assert hintsvm.startswith("libact HintSVM C extension (_hintsvm) not built")
        assert adapters.unavailable_reason("libact.albl").endswith(hintsvm)
    else:
        from libact.query_strategies import HintSVM  # noqa: F401  (built: importable)


def test_an_unavailable_strategy_fails_its_trial_with_the_reason(lu2023_short, sonar):
    if adapters.unavailable_reason("libact.vr") is None:
        pytest.skip("libact's VarianceReduction extension is built here")
    vr = dataclasses.replace(lu2023_short.strategy("vr"), implementation="libact.vr")
    protocol = dataclasses.replace(lu2023_short, strategies={**lu2023_short.strategies, "vr": vr})
    result = run_trial(protocol, "sonar", sonar.X, sonar.y, "vr", 0)
    assert result.status == "error" and "_variance_reduction" in result.error and "lapacke.h" in result.error
