"""The conformance suite every adapter passes (adapters.testing, like scikit-learn's check_estimator).

Adding a library is writing one adapter file and one registry line; this suite then
runs against it without changes. Also here: every declared parameter is exercised
somewhere, each check can fail, and a few strategies' known picks.
"""
from __future__ import annotations

import numpy as np
import pytest

import adapters
from adapters import MISSING, QueryStrategy, testing
from adapters.testing import (
    check_strategy,
    parametrize_with_checks,
    strategy_checks,
    toy_pool,
)
from audit.engine.models import ModelSpec
from audit.errors import AuditError, StrategyError
from audit.protocols import PROTOCOL_DIR, load_protocol

QUERY_MODEL = ModelSpec("lr", {"C": 1.0})
AVAILABLE = [name for name in adapters.implementations() if adapters.unavailable_reason(name) is None]

PARAM_CASES: dict[str, list[dict]] = {
    "native.coreset": [{"metric": "cityblock"}],
    "native.graph": [{"n_neighbors": 5}],
    "native.hier": [{"linkage": "average", "beta": 3.0, "select": "size"}],
    "native.mcm": [{"margin": 0.5}],
    "libact.qbc": [{"disagreement": "kl_divergence"}],
    "libact.hintsvm": [{"p": 0.3, "kernel": "poly", "degree": 2, "gamma": 0.5, "coef0": 1.0, "tol": 1e-2,
                        "shrinking": 0, "cache_size": 50.0}],
    "libact.quire": [{"lambda": 0.5, "kernel": "poly", "gamma": 0.5}],
    "libact.albl": [{"T": 10, "delta": 0.2, "uniform_sampler": False,
                     "arms": [{"strategy": "uncertainty", "model": {"name": "lr", "params": {"C": 1.0}}}]}],
    "libact.dwus": [{"n_clusters": 3, "sigma": 0.5, "max_iter": 50, "tol": 1e-3, "C": 0.5,
                     "kmeans_param": {"n_init": 1}}],
    "libact.vr": [{"optimality": "determinant", "n_jobs": 2, "sigma": 0.1}],
    "native.vr": [{"sigma": 0.1, "n_jobs": 2}],
    "alipy.bmdr": [{"beta": 100.0, "gamma": 0.5, "rho": 0.5, "kernel": "poly", "gamma_ker": 0.5, "degree": 2,
                    "coef0": 0.5, "keep_batch_constraint": True}],
    "alipy.spal": [{"mu": 0.5, "gamma": 0.5, "rho": 0.5, "lambda_init": 0.5, "lambda_pace": 0.1, "kernel": "poly",
                    "gamma_ker": 0.5, "degree": 2, "coef0": 0.5, "keep_batch_constraint": True}],
    "alipy.lal": [{"mode": "LAL_independent", "cls_est": 10}],
    "alipy.uncertainty": [{"measure": "margin"}],
    "alipy.qbc": [{"disagreement": "KL_divergence"}],
    "alipy.quire": [{"lambda": 0.5, "kernel": "poly", "gamma": 0.5, "degree": 2, "coef0": 0.5}],
    "alipy.coreset": [{"distance": "manhattan"}],
    "alipy.graph": [{"metric": "euclidean"}],
    "skactiveml.uncertainty": [{"method": "entropy"}],
    "skactiveml.qbc": [{"method": "vote_entropy", "n_estimators": 3},
                       {"committee": [{"name": "lr", "params": {"C": 1.0}}, {"name": "lda"}]}],
    "skactiveml.eer": [{"method": "log_loss"}],
    "skactiveml.quire": [{"lmbda": 0.5, "metric": "laplacian", "metric_dict": {"gamma": 0.5}}],
    "skactiveml.coreset": [{"metric": "minkowski", "metric_dict": {"p": 1}}],
    "skactiveml.coreset-embedded": [{"metric": "cityblock"}],
    "skactiveml.typiclust-embedded": [{"k": 5}],
    **{f"alpbench.{name}": [{"ensemble_size": 3}] for name in (
        "max_entropy", "qbc_entropy", "qbc_kl", "bald", "min_margin", "qbc_variance_ratio", "power_bald")},
    "oracle.bso": [{"beam_width": 2}],
    "oracle.greedy": [{"tau": 5}],
}
"""Non-default parameter values the conformance suite queries with, for the parameters no
shipped protocol sets to a non-default value (see test_every_adapter_parameter_is_exercised)."""




@parametrize_with_checks({name: adapters.strategy_class(name) for name in AVAILABLE}, PARAM_CASES)
def test_conforms(strategy_name, check):
    check()


def test_registry_has_the_slice_strategies():
    assert {"native.uniform", "native.margin", "libact.uncertainty"} <= set(AVAILABLE)


def protocol_settings() -> dict[str, list[dict]]:
    """Every shipped protocol's parameters, per implementation."""
    settings: dict[str, list[dict]] = {}
    for path in sorted(PROTOCOL_DIR.glob("*.toml")):
        for spec in load_protocol(path).strategies.values():
            settings.setdefault(spec.implementation, []).append(spec.params)
    return settings


def unexercised_parameters(implementations, settings, cases) -> list[str]:
    """``implementation.parameter`` for each declared parameter that no protocol and no case sets
    to a value other than its default: a parameter only ever passed at its default is never
    shown to reach the library (a misspelt or ignored keyword would go unnoticed)."""
    missing = []
    for name in implementations:
        defaults = adapters.strategy_class(name).param_defaults
        given = settings.get(name, []) + cases.get(name, [])
        missing += [f"{name}.{key}" for key, default in defaults.items()
                    if not any(key in params and params[key] != default for params in given)]
    return missing


def test_every_adapter_parameter_is_exercised():
    """Every registered adapter's parameters, available here or not, are exercised somewhere."""
    assert unexercised_parameters(adapters.implementations(), protocol_settings(), PARAM_CASES) == []


def test_an_unexercised_parameter_is_named():
    settings = {"native.hier": [{"linkage": "ward"}]}
    assert unexercised_parameters(["native.hier"], settings, {}) == [
        "native.hier.linkage", "native.hier.beta", "native.hier.select"]
    assert unexercised_parameters(["native.hier"], settings, {"native.hier": [{"beta": 1.0}]}) == [
        "native.hier.linkage", "native.hier.select"]


# --- the checks themselves can fail --------------------------------------------------------

class _First(QueryStrategy):
    implements = "first candidates"

    def _select(self, X, y, model, batch_size, candidates, rng):
        return candidates[:batch_size]


class _FirstUnlabeled(_First):
    """Ignores the candidates it is given."""

    def _select(self, X, y, model, batch_size, candidates, rng):
        return np.flatnonzero(y == MISSING)[:batch_size]


class _Unseeded(_First):
    def _select(self, X, y, model, batch_size, candidates, rng):
        return np.random.default_rng().choice(candidates, batch_size, replace=False)


class _WritesPlaceholders(_First):
    def _select(self, X, y, model, batch_size, candidates, rng):
        y[y == MISSING] = 0
        return candidates[:batch_size]


class _BatchOfOne(_First):
    """Declares batches but answers one row."""

    def _select(self, X, y, model, batch_size, candidates, rng):
        return candidates[:1]


class _Forgets(_First):
    """Remembers the labeled rows of its first call only, so it re-picks a labeled row."""

    def _select(self, X, y, model, batch_size, candidates, rng):
        self.first = getattr(self, "first", candidates)
        return self.first[:batch_size]


class _Peeks(_First):
    """Reads the true labels from where a library object built on the whole data set would hold them."""

    labels: np.ndarray | None = None

    def _select(self, X, y, model, batch_size, candidates, rng):
        return candidates[np.argsort(-self.labels[candidates], kind="stable")][:batch_size]


class _DefaultLies(_First):
    param_defaults = {"offset": 0}

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.offset = kwargs.get("offset", 1)

    def _select(self, X, y, model, batch_size, candidates, rng):
        return candidates[self.offset:self.offset + batch_size]


class _BadLibrary(_First):
    library = "no-such-distribution"


class _Lenient(_First):
    def __init__(self, **kwargs):
        kwargs.pop("not_a_parameter", None)
        super().__init__(**kwargs)


@pytest.mark.parametrize("strategy, failing, message", [
    (_FirstUnlabeled, "check_candidate_subset", "not an unlabeled candidate"),
    (_Unseeded, "check_deterministic", "same seed, different picks"),
    (_WritesPlaceholders, "check_query_contract", "modified its argument y"),
    (_BatchOfOne, "check_batch_as_declared", "returned 1 indices"),
    (_Forgets, "check_follows_revealed_labels", "not an unlabeled candidate"),
    (_DefaultLies, "check_declared_defaults", "declared defaults are not the ones in effect"),
    (_BadLibrary, "check_describes_itself", "not an installed distribution"),
    (_Lenient, "check_rejects_unknown_parameters", "accepted an unknown parameter"),
])
def test_a_breach_fails_its_check(strategy, failing, message):
    check_strategy(_First)  # the well-behaved parent passes every check
    with pytest.raises((AssertionError, StrategyError), match=message):
        dict(strategy_checks(strategy))[failing]()


@pytest.fixture
def truth_handed_over(monkeypatch):
    """Each replay hands the strategy the trial's true labels, as a library object built on the
    whole data set would hold them."""
    real_replay = testing.replay

    def replay_handing_over_truth(strategy, X, y, y_true, **kwargs):
        strategy.labels = y_true
        return real_replay(strategy, X, y, y_true, **kwargs)

    monkeypatch.setattr(testing, "replay", replay_handing_over_truth)


def test_a_strategy_reading_hidden_labels_fails_the_scramble(truth_handed_over):
    with pytest.raises(AssertionError, match="picks moved when unrevealed labels changed"):
        testing.check_hidden_labels_unread(lambda seed: _Peeks(random_state=seed))


def test_a_strategy_declaring_test_labels_skips_the_scramble(truth_handed_over):
    class Oracle(_Peeks):
        uses_test_labels = True

    testing.check_hidden_labels_unread(lambda seed: Oracle(random_state=seed))


def test_margin_picks_the_candidate_closest_to_the_boundary():
    X, y, _ = toy_pool()
    model = QUERY_MODEL.build(0).fit(X[y != MISSING], y[y != MISSING])
    candidates = np.flatnonzero(y == MISSING)
    picked = adapters.strategy_class("native.margin")().query(X, y, model, 3, candidates, np.random.default_rng(0))
    expected = candidates[np.argsort(np.abs(model.decision_function(X[candidates])))[:3]]
    assert picked.tolist() == expected.tolist()


def test_uniform_orders():
    X, y, _ = toy_pool()
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

    X, y, _ = toy_pool()
    cls = adapters.strategy_class("libact.uncertainty")
    strategy = cls(query_model=ModelSpec("lr", {"C": 0.1}), method="entropy")
    (picked,) = strategy.query(X, y, None, 1, np.flatnonzero(y == MISSING), None)
    lr = LogisticRegression(C=0.1).fit(X[y != MISSING], y[y != MISSING])
    unlabeled = np.flatnonzero(y == MISSING)
    p = lr.predict_proba(X[unlabeled])
    assert picked == unlabeled[np.argmax(-(p * np.log(p)).sum(axis=1))]


def test_libact_refuses_batches_and_partial_candidate_sets():
    X, y, _ = toy_pool()
    strategy = testing.as_factory(adapters.strategy_class("libact.uncertainty"))(0)
    with pytest.raises(StrategyError, match="one example at a time"):
        testing.ask(strategy, X, y, batch=2)
    with pytest.raises(StrategyError, match="every unlabeled row"):
        testing.ask(strategy, X, y, candidates=np.flatnonzero(y == MISSING)[:5])


def test_unknown_implementation():
    with pytest.raises(AuditError, match="unknown implementation 'nope.x'"):
        adapters.strategy_class("nope.x")


ENCODINGS = {"parkinsons": "1/0", "heart": "+1/-1", "sonar": "1/-1"}


@pytest.fixture(scope="module")
def encoded_datasets():
    from audit.engine.datasets import DataError, load_dataset

    try:
        return {name: load_dataset(name) for name in ENCODINGS}
    except DataError as exc:
        pytest.skip(f"data not available: {exc}")


@pytest.mark.parametrize("name", AVAILABLE)
def test_runs_in_a_trial_on_every_label_encoding_without_seeing_held_out_labels(name, encoded_datasets,
                                                                               monkeypatch):
    """Through the real runner: X holds only train rows and y no label of an unlabeled row."""
    import dataclasses

    from audit.engine.runner import run_trial
    from audit.engine.splits import make_split
    from audit.protocols import StrategySpec

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
