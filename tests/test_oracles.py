"""Oracles: strategies that declare uses_test_labels (the registry, the runner's one hook,
the capability matrix), the optimised beam search against the plain reference, the greedy
oracle's fallback, exactness of the libsvm fast path, and oracles in reports."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

import adapters
from adapters import QueryStrategy, native, oracles
from audit.analysis.reproduce import reproduce
from audit.engine import process_team
from audit.engine.capabilities import capability, format_matrix
from audit.engine.models import ModelSpec
from audit.engine.replay import (
    ReproduceRequest,
    choose_strategies,
    estimate_seconds,
    oracle_jobs,
)
from audit.engine.runner import TrialTask, _Features, run_trial
from audit.engine.splits import make_split
from audit.errors import AuditError
from audit.protocols import StrategySpec
from audit.report.sections import ORACLE_NOTE, format_table
from tests.oracle_reference import _Trial, naive_beam_search, naive_greedy


def blobs(n: int, separation: float, d: int = 3, seed: int = 0, classes: int = 2) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = np.arange(n) % classes
    X = rng.normal(size=(n, d)) + separation * y[:, None]
    return X, y.astype(np.int64)


def queried_rows(result) -> tuple[int, ...]:
    assert result.status == "ok", result.error
    return tuple(q for r in result.rounds for q in r.queried)


def as_rows(protocol, y, trial_seed, positions) -> tuple[int, ...]:
    train = make_split(protocol, y, trial_seed).train
    return tuple(int(train[p]) for p in positions)


@pytest.fixture(scope="module")
def small():
    """50 overlapping points: 30 train rows = 20 initial labels + a pool of 10, budget = the pool."""
    return blobs(50, separation=1.0)


def test_oracles_are_strategies_found_through_the_adapter_registry():
    implementations = adapters.implementations()
    assert {"oracle.bso", "oracle.greedy"} <= set(implementations)
    assert adapters.strategy_class("oracle.bso") is oracles.BeamSearchOracle
    assert issubclass(oracles.GreedyOracle, QueryStrategy)
    # the capability is declared by the oracles, and by no other implementation
    assert {name for name in implementations if adapters.uses_test_labels(name)} == {"oracle.bso", "oracle.greedy"}
    assert adapters.uses_test_labels("oracle.nope") is False  # nothing that cannot load


class Peeker(QueryStrategy):
    """Declares uses_test_labels (in the native library, no "oracle." name): records the
    views it is given and queries in pool order."""

    implements = "test double"
    uses_test_labels = True
    views: list = []

    def begin_trial(self, view):
        Peeker.views.append(view)

    def _select(self, X, y, model, batch_size, candidates, rng):
        return candidates[:batch_size]


class Plain(Peeker):
    """The same strategy without the capability: the runner must never hand it the view."""

    uses_test_labels = False


def test_only_a_strategy_that_declares_uses_test_labels_is_given_the_test_view(lu2023, small, monkeypatch):
    X, y = small
    monkeypatch.setitem(native.STRATEGIES, "peeker", Peeker)
    monkeypatch.setitem(native.STRATEGIES, "plain", Plain)
    monkeypatch.setattr(Peeker, "views", [])
    protocol = dataclasses.replace(lu2023, strategies={"p": StrategySpec("p", "native.peeker"),
                                                       "q": StrategySpec("q", "native.plain")})
    assert run_trial(protocol, "small", X, y, "q", 0).status == "ok" and Peeker.views == []
    peeked = run_trial(protocol, "small", X, y, "p", 0, jobs=3)
    assert peeked.status == "ok" and len(Peeker.views) == 1
    view, split = Peeker.views[0], make_split(protocol, y, 0)
    assert view.task_model == protocol.task_model and view.budget == split.pool.size == 10 and view.jobs == 3
    assert np.array_equal(view.y_test, y[split.test]) and np.array_equal(view.y_train, y[split.train])
    assert np.array_equal(view.features.X_test_raw, X[split.test])
    # the same calls otherwise: its queries are the pool order, like uniform's
    assert queried_rows(peeked) == queried_rows(run_trial(lu2023, "small", X, y, "uniform", 0))
    # the capability, not the name, marks it in the capability matrix
    assert capability(protocol, "p").uses_test_labels and not capability(protocol, "q").uses_test_labels
    assert capability(protocol, "p").query_model == "task model scored on the test labels"


def test_the_capability_matrix_has_a_test_labels_column(lu2023):
    lines = format_matrix([capability(lu2023, s) for s in ("uniform", "bso", "greedy-oracle")]).splitlines()
    column = lines[0].index("test labels")
    assert [line[column:].split("  ")[0] for line in lines[2:5]] == ["no", "yes (oracle)", "yes (oracle)"]


def test_an_oracle_has_no_companions(lu2023, small):
    X, y = small
    other = dataclasses.replace(lu2023, name="lr-task", task_model=ModelSpec("lr"))
    result = run_trial(lu2023, "small", X, y, "bso", 0, companions=(other,))
    assert result.status == "error" and "queries with the task model" in result.error


def test_the_libsvm_path_computes_gamma_with_lean_svcs_code(lu2023, monkeypatch):
    from sklearn.svm import SVC

    from audit.fast.svc import LeanSVC, libsvm_gamma

    X, y = blobs(60, separation=1.0, d=4, seed=5)
    for gamma in ("scale", "auto", 0.25):
        assert libsvm_gamma(gamma, X) == SVC(gamma=gamma).fit(X, y)._gamma == LeanSVC(gamma=gamma).fit(X, y)._gamma
    calls = []
    monkeypatch.setattr(oracles, "libsvm_gamma", lambda gamma, X: calls.append(gamma) or libsvm_gamma(gamma, X))
    split = make_split(lu2023, y, 0)
    scorer = oracles.Scorer(ModelSpec("svm-rbf", {"gamma": "scale"}), 0, _Features("train", X, split),
                            y[split.train], y[split.test])
    scorer.predict(np.arange(30))
    assert calls == ["scale"]


@pytest.mark.parametrize("trial_seed", [0, 1, 2])
def test_optimised_bso_gives_the_naive_sequence_and_curve(lu2023, small, trial_seed):
    X, y = small
    positions = naive_beam_search(lu2023, X, y, trial_seed)
    result = run_trial(lu2023, "small", X, y, "bso", trial_seed)
    assert queried_rows(result) == as_rows(lu2023, y, trial_seed, positions)
    assert len(result.rounds) == 11  # the whole pool, as lu2023 and zhan2021 ran BSO
    # The curve is the task model's, fitted as the runner fits it, along that sequence.
    trial = _Trial(lu2023, X, y, trial_seed)
    labeled = list(range(trial.n_initial))
    expected = [trial.correct(labeled)]
    for p in positions:
        labeled.append(p)
        expected.append(trial.correct(labeled))
    assert [r.accuracy for r in result.rounds] == [c / trial.y_test.size for c in expected]
    untimed = lambda rounds: [dataclasses.replace(r, fit_seconds=0, query_seconds=0) for r in rounds]  # noqa: E731
    parallel = run_trial(lu2023, "small", X, y, "bso", trial_seed, jobs=2)
    assert untimed(parallel.rounds) == untimed(result.rounds) and parallel.aubc == result.aubc


def test_optimised_bso_matches_the_naive_one_on_sonar(lu2023, sonar):
    protocol = dataclasses.replace(lu2023, budget_size=3)
    naive = as_rows(protocol, sonar.y, 4, naive_beam_search(protocol, sonar.X, sonar.y, 4))
    assert queried_rows(run_trial(protocol, "sonar", sonar.X, sonar.y, "bso", 4)) == naive


def test_bso_with_a_wider_beam_and_a_budget_below_the_pool(lu2023, small):
    X, y = small
    protocol = dataclasses.replace(lu2023, budget_size=6, strategies={
        "bso": StrategySpec("bso", "oracle.bso", {"beam_width": 8})})
    naive = as_rows(protocol, y, 3, naive_beam_search(protocol, X, y, 3, beam_width=8))
    assert queried_rows(run_trial(protocol, "small", X, y, "bso", 3)) == naive


def test_beams_reaching_the_same_set_are_one_state_with_the_best_parent():
    beams = [oracles.Beam(np.array(p), (), score) for p, score in
             [([0, 1, 2, 3], 10), ([0, 1, 2, 4], 12), ([0, 1, 2, 5], 12), ([0, 1, 3, 6], 9)]]
    shared = oracles._shared_children(beams)
    # beams 0 and 1 differ in one row each: 0 + {4} == 1 + {3}; likewise for 0/2, 1/2 and 0/3
    assert shared == {(0, 4): [(0, 4), (1, 3)], (0, 5): [(0, 5), (2, 3)], (1, 5): [(1, 5), (2, 4)],
                      (0, 6): [(0, 6), (3, 2)]}

    class Counts:  # every child set scores 5 correct, except {0,1,2,3,4}: 7
        evaluated: list = []

        def counts(self, parents, pairs):
            self.evaluated += [frozenset(parents[b].tolist()) | {c} for b, c in pairs.tolist()]
            return np.array([7 if set(parents[b].tolist()) | {c} == {0, 1, 2, 3, 4} else 5
                             for b, c in pairs.tolist()])

    counter = Counts()
    kept = oracles.next_beams(beams, counter, 8, 3)
    assert len(counter.evaluated) == len(set(counter.evaluated))  # each distinct set evaluated once
    assert kept[0].positions.tolist() == [0, 1, 2, 3, 4]
    assert kept[0].queried == (3,) and kept[0].score == 12 + 7  # from beam 1, the higher path score
    # equal accuracy: the higher path score first, then the parent's rank, then the pool position
    assert [(b.positions.tolist(), b.score) for b in kept[1:]] == [([0, 1, 2, 4, 5], 17), ([0, 1, 2, 4, 6], 17)]


def test_greedy_oracle_matches_the_naive_reference(lu2023, small):
    X, y = small
    for trial_seed in (0, 1):
        naive = as_rows(lu2023, y, trial_seed, naive_greedy(lu2023, X, y, trial_seed))
        assert queried_rows(run_trial(lu2023, "small", X, y, "greedy-oracle", trial_seed)) == naive


def test_greedy_oracle_with_workers_gives_the_same_trial(lu2023, small):
    X, y = small
    untimed = lambda rounds: [dataclasses.replace(r, fit_seconds=0, query_seconds=0) for r in rounds]  # noqa: E731
    one, two = (run_trial(lu2023, "small", X, y, "greedy-oracle", 1, jobs=jobs) for jobs in (1, 2))
    assert untimed(two.rounds) == untimed(one.rounds) and two.aubc == one.aubc


def test_processes_of_a_team_claim_every_chunk_once_and_stale_rounds_stop():
    import multiprocessing
    import threading

    lock, state = multiprocessing.get_context("spawn").Lock(), multiprocessing.get_context("spawn").RawArray("q", 2)
    state[0], state[1] = 7, 0
    results: list[dict] = []
    slow = lambda c: (threading.Event().wait(0.001), c * c)[1]  # noqa: E731
    threads = [threading.Thread(target=lambda: results.append(process_team._claim_chunks(lock, state, 7, 50, slow)))
               for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    claimed = [c for done in results for c in done]
    assert sorted(claimed) == list(range(50)) and all(done[c] == c * c for done in results for c in done)
    assert sum(1 for done in results if done) >= 2  # the work was shared
    assert process_team._claim_chunks(lock, state, 6, 50, slow) == {}  # an ended round's worker takes nothing
    state[1] = 0
    assert process_team._claim_chunks(lock, state, 6, 50, slow) == {}


def test_greedy_oracle_falls_back_to_margin_sampling_when_nothing_improves(lu2023):
    """Separable blobs: the initial model is already perfect on the test rows, so no candidate
    can improve it and every round is margin sampling with the task model, i.e. US-C."""
    X, y = blobs(60, separation=12.0)
    greedy = run_trial(lu2023, "blobs", X, y, "greedy-oracle", 0)
    assert greedy.rounds[0].accuracy == 1.0
    assert queried_rows(greedy) == queried_rows(run_trial(lu2023, "blobs", X, y, "us-c", 0))


def test_greedy_oracle_keeps_the_first_best_improving_candidate():
    class Scorer:
        y_train = np.zeros(6)

        def correct(self, positions):
            return 3

    class Counts:  # drawn candidates 2..5 score 3, 5, 5, 4 correct (current model: 3)
        def counts(self, parents, pairs):
            return np.array([{2: 3, 3: 5, 4: 5, 5: 4}[c] for c in pairs[:, 1].tolist()])

    rng = np.random.default_rng(0)
    drawn = np.random.default_rng(0).choice(np.arange(2, 6), size=4, replace=False)
    queried = oracles.greedy_search(Scorer(), Counts(), np.arange(2), 1, 4, rng)
    assert queried == (int(next(c for c in drawn if c in (3, 4))),)


@pytest.mark.parametrize("spec", [
    ModelSpec("svm-rbf", {"C": 1.0, "gamma": "auto"}),
    ModelSpec("svm-rbf", {"gamma": "scale"}),
    ModelSpec("svm-rbf", {"C": 10.0, "gamma": 0.5}),
    ModelSpec("svm-linear"),
    ModelSpec("lr"),
])
@pytest.mark.parametrize("scope, classes", [("train", 2), ("labeled", 2), ("none", 3)])
def test_fast_scorer_predicts_exactly_what_scikit_learn_does(lu2023, spec, scope, classes):
    X, y = blobs(120, separation=1.0, d=5, seed=3, classes=classes)
    split = make_split(lu2023, y, 0)
    scorer = oracles.Scorer(spec, 6211, _Features(scope, X, split), y[split.train], y[split.test])
    assert (scorer.libsvm is not None) == spec.name.startswith("svm")
    rng = np.random.default_rng(1)
    for size in (20, 35, 60):
        positions = np.sort(rng.choice(split.train.size, size=size, replace=False))
        model, _, X_test = scorer.fit(positions)
        assert np.array_equal(scorer.predict(positions), model.predict(X_test))


def test_oracle_parameters_and_batch_size_are_checked(lu2023, small):
    X, y = small
    for params, message in [({"beam_width": 0}, "beam_width must be a positive integer"),
                            ({"width": 5}, "does not use parameter(s) width")]:
        protocol = dataclasses.replace(lu2023, strategies={"bso": StrategySpec("bso", "oracle.bso", params)})
        result = run_trial(protocol, "small", X, y, "bso", 0)
        assert result.status == "error" and message in result.error
    result = run_trial(dataclasses.replace(lu2023, batch_size=2), "small", X, y, "bso", 0)
    assert result.status == "error" and "does not support batch size 2" in result.error


def test_oracles_are_available_and_unknown_ones_are_not(lu2023):
    assert choose_strategies(lu2023, ["bso", "greedy-oracle"]) == (["bso", "greedy-oracle"], {})
    assert capability(lu2023, "bso").status == "available"
    assert capability(lu2023, "bso").params == {"beam_width": 5}
    protocol = dataclasses.replace(lu2023, strategies={"x": StrategySpec("x", "oracle.nope")})
    with pytest.raises(AuditError, match="cannot run here: unknown implementation 'oracle.nope'"):
        choose_strategies(protocol, ["x"])


def test_oracle_trials_are_timed_with_their_inner_jobs(lu2023):
    tasks = [TrialTask(lu2023, "sonar", None, "bso", 0, jobs=2), TrialTask(lu2023, "sonar", None, "us-c", 0)]
    assert estimate_seconds(tasks, {"bso": 10.0, "us-c": 1.0}, 2) == 10.5


def test_oracle_trials_run_side_by_side_unless_fewer_than_the_jobs():
    assert oracle_jobs(10, 2) == 1 and oracle_jobs(2, 2) == 1 and oracle_jobs(0, 2) == 1
    assert oracle_jobs(1, 2) == 2 and oracle_jobs(3, 4) == 4
    assert oracle_jobs(1, 1) == 1


def test_oracles_in_reports_are_flagged_and_compared_and_jobs_change_nothing(tmp_path, lu2023, sonar):
    protocol = dataclasses.replace(lu2023, budget_size=2)
    runs = {}
    for jobs in (1, 2):
        outcome = reproduce(ReproduceRequest(protocol, "sonar", ["bso"], trials=2, jobs=jobs,
                                             store=tmp_path / f"s{jobs}.sqlite", out=tmp_path / f"r{jobs}",
                                             progress=False), log=lambda _: None)
        runs[jobs] = (tmp_path / f"r{jobs}" / "per_trial.csv").read_text()
    assert runs[1] == runs[2]
    report = json.loads((tmp_path / "r2" / "report.json").read_text())
    bso = report["strategies"][0]
    assert bso["uses_test_labels"] is True and bso["library"].startswith("native")
    assert bso["reference"]["table"] == "Table 10" and bso["published_mean"] == pytest.approx(0.884)
    assert "bso (oracle)" in format_table(outcome.report)
    assert ORACLE_NOTE in (tmp_path / "r2" / "report.md").read_text()


def test_only_oracles_are_marked_in_the_table():
    cell = {"status": "ok", "library": "x", "n_trials": 2, "n_errors": 0, "mean": 0.8, "sd": 0.1,
            "ci95": [0.7, 0.9], "ci99": [0.6, 1.0], "published_mean": None, "verdict": "no reference"}
    report = {"protocol": {"scale": "percent"}, "strategies": [
        {**cell, "strategy": "uniform", "uses_test_labels": False}, {**cell, "strategy": "bso", "uses_test_labels": True}]}
    lines = format_table(report).splitlines()
    assert lines[2].startswith("uniform ") and lines[3].startswith("bso (oracle) ") and lines[4] == ORACLE_NOTE
    report["strategies"] = report["strategies"][:1]
    assert ORACLE_NOTE not in format_table(report)


@pytest.mark.slow
def test_optimised_bso_gives_the_naive_sequence_on_a_full_sonar_trial(lu2023, sonar):
    naive = as_rows(lu2023, sonar.y, 0, naive_beam_search(lu2023, sonar.X, sonar.y, 0))
    assert queried_rows(run_trial(lu2023, "sonar", sonar.X, sonar.y, "bso", 0, jobs=2)) == naive
