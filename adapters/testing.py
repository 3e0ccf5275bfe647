"""Conformance checks for a query strategy: al-audit's adapter contract as a public API.

In the manner of scikit-learn's ``check_estimator`` / ``parametrize_with_checks`` and
scikit-activeml's query-strategy test template: :func:`check_strategy` runs every check
on a strategy and raises AssertionError at the first breach; :func:`parametrize_with_checks`
turns the same checks into one pytest case each, so a user can run them on a strategy of
their own::

    from adapters.testing import parametrize_with_checks

    @parametrize_with_checks([MyStrategy])
    def test_my_strategy(strategy_name, check):
        check()

A strategy is given as its class (built as ``cls(query_model=..., random_state=seed)``)
or as a factory ``factory(random_state) -> QueryStrategy`` returning a fresh instance.
The checks replay a few rounds of a small two-class pool (:func:`toy_pool` of ``POOL_SIZE`` rows, ``POOL_LABELED`` labeled), revealing
the true label of each picked row as the runner does.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from importlib import metadata
from types import SimpleNamespace
from typing import Any

import numpy as np

from adapters.base import MISSING, QueryStrategy, TrialView
from audit.engine.models import ModelSpec
from audit.errors import AuditError, StrategyError

QUERY_MODEL = ModelSpec("lr", {"C": 1.0})
"""The query model the checks give a strategy that needs one (``model_use`` "fitted" or "own")."""

ROUNDS = 3
POOL_SIZE, POOL_LABELED = 24, 6  # small: EER refits its model for every candidate and class
MODEL_USES = ("none", "fitted", "own")

StrategyFactory = Callable[[int], QueryStrategy]


def toy_pool(n: int = 60, n_labeled: int = 10, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gaussian features, a linear binary concept, n_labeled rows labeled half per class.

    Returns ``(X, y, y_true)``: ``y`` holds MISSING on every unlabeled row.
    """
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    y_true = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(np.int64)
    y = np.full(n, MISSING, dtype=np.int64)
    labeled = np.concatenate([np.flatnonzero(y_true == 0)[:n_labeled // 2],
                              np.flatnonzero(y_true == 1)[:n_labeled // 2]])
    y[labeled] = y_true[labeled]
    return X, y, y_true


def trial_view(budget: int = 5) -> TrialView:
    """What a strategy declaring ``uses_test_labels`` (an oracle) is given for the checks' pool:
    its every label, a 40-row test set, an RBF SVC task model."""
    X, _, y_true = toy_pool(POOL_SIZE, POOL_LABELED)
    X_test, _, y_test = toy_pool(40, seed=1)
    features = SimpleNamespace(scope="none", X_train_raw=X, X_test_raw=X_test, X_train=X, X_test=X_test,
                               views_for=lambda labeled_positions, train_rows: (X[train_rows], X_test))
    return TrialView(ModelSpec("svm-rbf"), 0, features, y_true, y_test, budget)


def as_factory(strategy: type[QueryStrategy] | StrategyFactory, params: Mapping[str, Any] | None = None
               ) -> StrategyFactory:
    """A ``random_state -> fresh strategy`` callable for a class (with ``params``) or a factory;
    a class declaring ``uses_test_labels`` is given :func:`trial_view`, as the runner would."""
    if isinstance(strategy, type):
        query_model = QUERY_MODEL if strategy.model_use == "own" else None

        def build(seed: int) -> QueryStrategy:
            built = strategy(query_model=query_model, random_state=seed, **(params or {}))
            if strategy.uses_test_labels:
                built.begin_trial(trial_view())
            return built

        return build
    if params:
        raise AuditError("parameter cases need the strategy class, not a factory")
    return strategy


def fitted_model(strategy: QueryStrategy, X: np.ndarray, y: np.ndarray) -> Any:
    """The query model the runner would pass: fitted on the labeled rows, for ``model_use == "fitted"``."""
    if strategy.model_use != "fitted":
        return None
    labeled = y != MISSING
    return QUERY_MODEL.build(0).fit(X[labeled], y[labeled])


def ask(strategy: QueryStrategy, X: np.ndarray, y: np.ndarray, batch: int = 1,
        candidates: np.ndarray | None = None, seed: int = 0) -> np.ndarray:
    """One query with the unlabeled rows (or ``candidates``) as candidates."""
    candidates = np.flatnonzero(y == MISSING) if candidates is None else candidates
    return strategy.query(X, y, fitted_model(strategy, X, y), batch, candidates, np.random.default_rng(seed))


def replay(strategy: QueryStrategy, X: np.ndarray, y: np.ndarray, y_true: np.ndarray,
           rounds: int = ROUNDS, seed: int = 0) -> list[list[int]]:
    """The picks of ``rounds`` one-row queries, revealing each pick's true label, as a trial does."""
    y = y.copy()
    rng = np.random.default_rng(seed)
    picks = []
    for _ in range(rounds):
        picked = strategy.query(X, y, fitted_model(strategy, X, y), 1, np.flatnonzero(y == MISSING), rng)
        assert np.all(y[picked] == MISSING), f"picked an already labeled row: {picked.tolist()}"
        picks.append(picked.tolist())
        y[picked] = y_true[picked]
    return picks


def _is_refusal(exc: StrategyError) -> bool:
    """True when the strategy itself refused; False when ``QueryStrategy.query``'s contract check raised."""
    frame = exc.__traceback__
    while frame.tb_next is not None:
        frame = frame.tb_next
    return frame.tb_frame.f_code is not QueryStrategy.query.__code__


# --- the checks -------------------------------------------------------------------------

def check_describes_itself(factory: StrategyFactory) -> None:
    """The class attributes the capability matrix shows hold what they claim."""
    strategy = factory(0)
    assert isinstance(strategy, QueryStrategy), f"{type(strategy).__name__} is not a QueryStrategy"
    assert strategy.model_use in MODEL_USES, f"model_use {strategy.model_use!r} is not one of {MODEL_USES}"
    assert isinstance(strategy.batch, bool), f"batch must be True or False, not {strategy.batch!r}"
    assert isinstance(strategy.implements, str) and strategy.implements, "implements must name the algorithm"
    if strategy.library != "native":
        try:
            version = metadata.version(strategy.library)
        except metadata.PackageNotFoundError:
            raise AssertionError(f"library {strategy.library!r} is not an installed distribution") from None
        assert version in strategy.library_version(), (
            f"library_version() {strategy.library_version()!r} does not name the installed {version}")


def check_query_contract(factory: StrategyFactory) -> None:
    """One query: a one-element integer array naming an unlabeled row; X, y, candidates untouched."""
    X, y, _ = toy_pool(POOL_SIZE, POOL_LABELED)
    strategy = factory(0)
    candidates = np.flatnonzero(y == MISSING)
    before = X.copy(), y.copy(), candidates.copy()
    picked = strategy.query(X, y, fitted_model(strategy, X, y), 1, candidates, np.random.default_rng(0))
    for name, original, now in zip(("X", "y", "candidates"), before, (X, y, candidates)):
        assert np.array_equal(original, now), f"query modified its argument {name}"
    assert isinstance(picked, np.ndarray) and picked.shape == (1,), f"expected shape (1,), got {picked!r}"
    assert np.issubdtype(picked.dtype, np.integer), f"expected integer indices, got {picked.dtype}"
    assert y[picked[0]] == MISSING, f"row {picked[0]} is already labeled"


def check_follows_revealed_labels(factory: StrategyFactory) -> None:
    """Reused over rounds, the strategy sees the labels revealed since its last call."""
    X, y, y_true = toy_pool(POOL_SIZE, POOL_LABELED)
    picks = replay(factory(0), X, y, y_true)
    assert len({p[0] for p in picks}) == ROUNDS, f"a row was picked twice: {picks}"


def check_deterministic(factory: StrategyFactory) -> None:
    """Two fresh strategies with the same seed make the same picks over a trial."""
    X, y, y_true = toy_pool(POOL_SIZE, POOL_LABELED)
    first, second = replay(factory(3), X, y, y_true, seed=3), replay(factory(3), X, y, y_true, seed=3)
    assert first == second, f"same seed, different picks: {first} vs {second}"


def check_hidden_labels_unread(factory: StrategyFactory) -> None:
    """Scrambling the true labels of rows never revealed does not move a pick.

    Skipped (passes) for a strategy declaring ``uses_test_labels``: a reference oracle
    scores candidates with their true labels by design.
    """
    strategy = factory(0)
    if strategy.uses_test_labels:
        return
    X, y, y_true = toy_pool(POOL_SIZE, POOL_LABELED)
    picks = replay(strategy, X, y, y_true)
    hidden = np.setdiff1d(np.flatnonzero(y == MISSING), np.concatenate(picks))
    scrambled = y_true.copy()
    scrambled[hidden] = 1 - scrambled[hidden]
    again = replay(factory(0), X, y, scrambled)
    assert again == picks, f"picks moved when unrevealed labels changed: {picks} vs {again}"


def check_batch_as_declared(factory: StrategyFactory) -> None:
    """``batch = True``: 5 distinct candidates, or the whole pool when smaller; else a refusal."""
    X, y, _ = toy_pool(POOL_SIZE, POOL_LABELED)
    candidates = np.flatnonzero(y == MISSING)
    strategy = factory(0)
    if not strategy.batch:
        try:
            picked = ask(strategy, X, y, batch=2)
        except StrategyError as exc:
            assert _is_refusal(exc), f"batch of 2 broke the contract instead of being refused: {exc}"
            return
        raise AssertionError(f"declares batch = False but answered a batch of 2 with {picked.tolist()}")
    picked = ask(strategy, X, y, batch=5)
    assert len(set(picked.tolist())) == 5 and set(picked.tolist()) <= set(candidates.tolist())
    small = candidates[:3]
    whole = ask(factory(0), X, y, batch=5, candidates=small)
    assert sorted(whole.tolist()) == small.tolist(), f"a 3-row pool asked for 5 gave {whole.tolist()}"


def check_candidate_subset(factory: StrategyFactory) -> None:
    """Given every other unlabeled row as candidates, picks stay inside them (or the strategy refuses)."""
    X, y, _ = toy_pool(POOL_SIZE, POOL_LABELED)
    subset = np.flatnonzero(y == MISSING)[::2]
    strategy = factory(0)
    try:
        picked = ask(strategy, X, y, batch=5 if strategy.batch else 1, candidates=subset)
    except StrategyError as exc:
        assert _is_refusal(exc), f"picked outside the candidate subset: {exc}"
        return
    assert set(picked.tolist()) <= set(subset.tolist()), f"picked outside the candidate subset: {picked.tolist()}"


def check_rejects_unknown_parameters(factory: StrategyFactory) -> None:
    """A parameter the strategy would ignore is refused, not silently dropped."""
    strategy = factory(0)
    try:
        type(strategy)(query_model=QUERY_MODEL, not_a_parameter=1)
    except AuditError as exc:
        assert "does not use parameter" in str(exc), str(exc)
        return
    raise AssertionError(f"{type(strategy).__name__} accepted an unknown parameter")


def check_declared_defaults(factory: StrategyFactory) -> None:
    """Passing every ``param_defaults`` entry explicitly changes no parameter in effect and no pick."""
    implicit = factory(0)
    cls = type(implicit)
    query_model = implicit.query_model
    explicit = cls(query_model=query_model, random_state=0, **cls.param_defaults)
    if explicit.uses_test_labels:
        explicit.begin_trial(trial_view())
    assert explicit.get_params() == implicit.get_params()
    X, y, _ = toy_pool(POOL_SIZE, POOL_LABELED)
    assert ask(explicit, X, y).tolist() == ask(implicit, X, y).tolist(), "the declared defaults are not the ones in effect"


def check_parameter_case(cls: type[QueryStrategy], params: Mapping[str, Any]) -> None:
    """The strategy accepts ``params``, reports them in get_params, and queries by the contract."""
    strategy = as_factory(cls, params)(0)
    reported = strategy.get_params()
    assert set(params) <= set(reported), f"get_params() lacks {sorted(set(params) - set(reported))}"
    X, y, y_true = toy_pool(POOL_SIZE, POOL_LABELED)
    replay(strategy, X, y, y_true, rounds=2)


CHECKS: tuple[Callable[[StrategyFactory], None], ...] = (
    check_describes_itself, check_query_contract, check_follows_revealed_labels, check_deterministic,
    check_hidden_labels_unread, check_batch_as_declared, check_candidate_subset,
    check_rejects_unknown_parameters, check_declared_defaults,
)


def strategy_checks(strategy: type[QueryStrategy] | StrategyFactory,
                    param_cases: Sequence[Mapping[str, Any]] = ()) -> list[tuple[str, Callable[[], None]]]:
    """``(name, check)`` pairs, each check a no-argument callable: the checks, then one per parameter case."""
    factory = as_factory(strategy)
    checks = [(check.__name__, functools.partial(check, factory)) for check in CHECKS]
    if param_cases:
        cls = strategy if isinstance(strategy, type) else type(factory(0))
        checks += [(f"check_parameter_case[{', '.join(f'{k}={v!r}' for k, v in case.items())}]",
                    functools.partial(check_parameter_case, cls, case)) for case in param_cases]
    return checks


def check_strategy(strategy: type[QueryStrategy] | StrategyFactory,
                   param_cases: Sequence[Mapping[str, Any]] = ()) -> None:
    """Run every conformance check on a strategy; AssertionError (or the strategy's error) at the first breach.

    ``param_cases``: parameter sets (non-default values) the strategy must accept and query with.
    """
    for _, check in strategy_checks(strategy, param_cases):
        check()


def parametrize_with_checks(strategies: Iterable[type[QueryStrategy] | StrategyFactory],
                            param_cases: Mapping[str, Sequence[Mapping[str, Any]]] | None = None):
    """A pytest ``parametrize`` mark with one case per (strategy, check), as scikit-learn's namesake.

    The test function takes ``strategy_name`` and ``check`` and calls ``check()``;
    ``param_cases`` maps a strategy's name (its class name, or the key given in a dict) to
    its parameter cases.
    """
    import pytest

    named = strategies.items() if isinstance(strategies, Mapping) else (
        (getattr(s, "__name__", repr(s)), s) for s in strategies)
    cases = [pytest.param(name, check, id=f"{name}-{check_name}")
             for name, strategy in named
             for check_name, check in strategy_checks(strategy, (param_cases or {}).get(name, ()))]
    return pytest.mark.parametrize(("strategy_name", "check"), cases)
