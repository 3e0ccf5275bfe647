"""The replay loop, the query/task model separation and the executor contract."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

from audit.engine.executors import run_tasks
from audit.engine.metrics import get_variant
from audit.engine.models import ModelSpec
from audit.engine.runner import TrialTask, budget_for, run_trial
from audit.engine.splits import make_split
from audit.engine.workers import kept_pool, pools_kept
from audit.errors import AuditError
from audit.protocols import StrategySpec, load_protocol
from tests.conftest import with_split


def test_uniform_loop_queries_the_pool_in_order_and_records_every_round(lu2023, sonar):
    result = run_trial(lu2023, "sonar", sonar.X, sonar.y, "uniform", 3)
    split = make_split(lu2023, sonar.y, 3)
    assert result.status == "ok", result.error
    assert len(result.rounds) == split.pool.size + 1
    assert [r.n_labeled for r in result.rounds] == list(range(20, 20 + split.pool.size + 1))
    assert result.rounds[0].queried == ()
    queried = [q for r in result.rounds for q in r.queried]
    assert queried == split.pool.tolist()  # "next item in pool order"
    accuracies = [r.accuracy for r in result.rounds]
    assert all(0 <= a <= 1 for a in accuracies)
    assert result.aubc == get_variant("lu2023_code")(accuracies, [r.n_labeled for r in result.rounds])


def test_us_c_queries_the_smallest_margin_of_the_task_svc(lu2023, sonar):
    result = run_trial(lu2023, "sonar", sonar.X, sonar.y, "us-c", 0)
    split = make_split(lu2023, sonar.y, 0)
    scaler = StandardScaler().fit(sonar.X[split.train])
    svc = SVC(kernel="rbf", gamma="auto", random_state=6211).fit(scaler.transform(sonar.X[split.labeled]),
                                                                  sonar.y[split.labeled])
    margins = np.abs(svc.decision_function(scaler.transform(sonar.X[split.pool])))
    assert result.rounds[1].queried == (int(split.pool[np.argmin(margins)]),)
    # The initial model's accuracy is this very SVC's.
    test_acc = np.mean(svc.predict(scaler.transform(sonar.X[split.test])) == sonar.y[split.test])
    assert result.rounds[0].accuracy == pytest.approx(test_acc)


def test_every_strategy_of_a_trial_sees_the_same_split_and_initial_model(lu2023, sonar):
    runs = {s: run_trial(lu2023, "sonar", sonar.X, sonar.y, s, 5) for s in ("uniform", "us-c", "us-nc")}
    assert len({r.rounds[0].accuracy for r in runs.values()}) == 1
    queried = {s: sorted(q for r in res.rounds for q in r.queried) for s, res in runs.items()}
    assert queried["uniform"] == queried["us-c"] == queried["us-nc"]  # whole pool, any order
    assert runs["us-c"].query_hash != runs["uniform"].query_hash


def test_same_seed_same_sequence_and_different_seed_different_sequence(lu2023, sonar):
    a = run_trial(lu2023, "sonar", sonar.X, sonar.y, "us-nc", 7)
    b = run_trial(lu2023, "sonar", sonar.X, sonar.y, "us-nc", 7)
    c = run_trial(lu2023, "sonar", sonar.X, sonar.y, "us-nc", 8)
    assert a.query_hash == b.query_hash and a.aubc == b.aubc
    assert a.query_hash != c.query_hash


def test_strategy_rng_is_independent_of_the_split():
    """A random-order uniform run with spawn seeds draws differently per trial but the same per seed."""
    protocol = load_protocol("zhan2021")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 3))
    y = (X[:, 0] > 0).astype(np.int64)
    first = run_trial(protocol, "toy", X, y, "uniform", 1)
    again = run_trial(protocol, "toy", X, y, "uniform", 1)
    split = make_split(protocol, y, 1)
    assert first.query_hash == again.query_hash
    assert [q for r in first.rounds for q in r.queried] != split.pool.tolist()


def test_batch_size_and_budget_split_the_last_batch(lu2023, sonar):
    protocol = dataclasses.replace(lu2023, batch_size=5, budget_size=23)
    result = run_trial(protocol, "sonar", sonar.X, sonar.y, "us-c", 0)
    assert result.status == "ok", result.error
    assert [len(r.queried) for r in result.rounds] == [0, 5, 5, 5, 5, 3]
    assert result.rounds[-1].n_labeled == 43


def test_budget_larger_than_the_pool_is_an_input_error(lu2023):
    with pytest.raises(AuditError, match="larger than the unlabeled pool"):
        budget_for(dataclasses.replace(lu2023, budget_size=500), 104, 2)


def test_file_order_pool_makes_uniform_query_in_file_order(lu2023, sonar):
    protocol = with_split(lu2023, pool_order="file")
    result = run_trial(protocol, "sonar", sonar.X, sonar.y, "uniform", 0)
    queried = [q for r in result.rounds for q in r.queried]
    assert queried == sorted(queried)


def test_labeled_scope_scaling_refits_on_the_labeled_set(lu2023, sonar):
    """Scaling the task model's features on the labeled set changes the curve, not the queries."""
    base = run_trial(lu2023, "sonar", sonar.X, sonar.y, "uniform", 0)
    protocol = dataclasses.replace(lu2023, scaling={"task": "labeled", "query": "none"})
    labeled = run_trial(protocol, "sonar", sonar.X, sonar.y, "uniform", 0)
    assert base.query_hash == labeled.query_hash
    assert [r.accuracy for r in base.rounds] != [r.accuracy for r in labeled.rounds]


def test_a_separate_query_model_is_fitted_and_used(lu2023, sonar):
    """Margin on an LR query model is a different sequence from margin on the task SVC."""
    spec = StrategySpec("margin-lr", "native.margin", {}, ModelSpec("lr", {"C": 1.0}))
    protocol = dataclasses.replace(lu2023, strategies={**lu2023.strategies, "margin-lr": spec})
    lr = run_trial(protocol, "sonar", sonar.X, sonar.y, "margin-lr", 0)
    svc = run_trial(protocol, "sonar", sonar.X, sonar.y, "us-c", 0)
    assert lr.status == "ok", lr.error
    assert lr.query_hash != svc.query_hash


def test_a_strategy_failing_mid_trial_is_an_error_result(lu2023, sonar, test_strategies):
    spec = StrategySpec("broken", "test.fails", {"fail_on_call": 3, "fail_seeds": [1126]})
    protocol = dataclasses.replace(lu2023, strategies={"broken": spec})
    result = run_trial(protocol, "sonar", sonar.X, sonar.y, "broken", 0)
    assert result.status == "error"
    assert "LinAlgError: Singular matrix (deliberate)" in result.error
    assert result.rounds == [] and result.aubc is None


def test_a_strategy_breaking_the_contract_is_an_error_result(lu2023, sonar, test_strategies):
    protocol = dataclasses.replace(lu2023, strategies={"bad": StrategySpec("bad", "test.returns-labeled")})
    result = run_trial(protocol, "sonar", sonar.X, sonar.y, "bad", 0)
    assert result.status == "error" and "not an unlabeled candidate" in result.error


def test_jobs_do_not_change_results(lu2023):
    tasks = [TrialTask(lu2023, "sonar", None, s, seed) for s in ("us-c", "us-nc") for seed in (0, 1, 2)]
    serial = {(r.strategy, r.trial_seed): (r.aubc, r.query_hash) for r in run_tasks(tasks, jobs=1)}
    parallel = {(r.strategy, r.trial_seed): (r.aubc, r.query_hash) for r in run_tasks(tasks, jobs=2)}
    assert serial == parallel
    assert len(serial) == 6


def test_inside_pools_kept_one_pool_runs_every_batch_and_closes_on_leaving(lu2023):
    tasks = [TrialTask(lu2023, "sonar", None, "us-c", seed) for seed in (0, 1, 2, 3)]
    with pools_kept():
        first = {(r.strategy, r.trial_seed): (r.aubc, r.query_hash) for r in run_tasks(tasks[:2], jobs=2)}
        executor = kept_pool(2, None)
        pool, workers = executor._pool, set(executor._pool._processes)
        with pools_kept():  # nested: the outer one keeps the pools
            second = {(r.strategy, r.trial_seed): (r.aubc, r.query_hash) for r in run_tasks(tasks[2:], jobs=2)}
        assert kept_pool(2, None) is executor and executor._pool is pool and set(pool._processes) == workers
    assert executor._pool is None and kept_pool(2, None) is None  # closed on leaving; outside, nothing is kept
    alone = {(r.strategy, r.trial_seed): (r.aubc, r.query_hash) for r in run_tasks(tasks, jobs=2)}
    assert {**first, **second} == alone and len(alone) == 4


def test_library_warnings_are_recorded_with_the_trial_not_printed(lu2023, sonar, recwarn):
    """DWUS divides by zero on standardised sonar (libact warns); the trial keeps the warning."""
    result = run_trial(lu2023, "sonar", sonar.X, sonar.y, "dwus", 0)
    assert result.status == "ok"
    assert any(w.startswith("RuntimeWarning: invalid value encountered in divide") for w in result.warnings)
    assert not [w for w in recwarn if "invalid value" in str(w.message)]


def _task_model_variant(protocol, name, task_model):
    return dataclasses.replace(protocol, name=name, task_model=task_model)


def test_companion_task_models_score_the_same_queries_as_their_own_replays(lu2023, sonar):
    """One trial, three task models: each companion's result is the one its own protocol gives."""
    spec = StrategySpec("margin-lr", "native.margin", {}, ModelSpec("lr", {"C": 1.0}))
    protocol = dataclasses.replace(lu2023, strategies={"margin-lr": spec})
    companions = (_task_model_variant(protocol, "with-rf", ModelSpec("rf", {"n_estimators": 20})),
                  _task_model_variant(protocol, "with-lr", ModelSpec("lr", {"C": 1.0})))
    shared = run_trial(protocol, "sonar", sonar.X, sonar.y, "margin-lr", 3, companions=companions)
    assert shared.status == "ok" and [c.protocol for c in shared.companions] == ["with-rf", "with-lr"]
    for result, own_protocol in zip((shared, *shared.companions), (protocol, *companions)):
        own = run_trial(own_protocol, "sonar", sonar.X, sonar.y, "margin-lr", 3)
        assert result.status == "ok" and result.protocol == own.protocol
        assert result.query_hash == own.query_hash
        assert result.aubc_by_metric == own.aubc_by_metric
        assert [(r.accuracy, r.f1, r.roc_auc) for r in result.rounds] == [(r.accuracy, r.f1, r.roc_auc)
                                                                          for r in own.rounds]
    assert shared.aubc != shared.companions[0].aubc  # the task models really differ


def test_companions_must_differ_only_in_the_task_model(lu2023, sonar):
    spec = StrategySpec("margin-lr", "native.margin", {}, ModelSpec("lr", {"C": 1.0}))
    protocol = dataclasses.replace(lu2023, strategies={**lu2023.strategies, "margin-lr": spec})
    other_budget = dataclasses.replace(_task_model_variant(protocol, "b", ModelSpec("lr")), budget_size=10)
    result = run_trial(protocol, "sonar", sonar.X, sonar.y, "margin-lr", 0, companions=(other_budget,))
    assert result.status == "error" and "more than its task model" in result.error
    assert result.companions[0].status == "error" and result.companions[0].rounds == []
    # US-C queries with the task model itself: another task model would change its queries.
    lr_task = _task_model_variant(protocol, "lr-task", ModelSpec("lr"))
    result = run_trial(protocol, "sonar", sonar.X, sonar.y, "us-c", 0, companions=(lr_task,))
    assert result.status == "error" and "queries with the task model" in result.error


@pytest.mark.parametrize("task_model, fast_path", [(ModelSpec("svm-rbf", {"gamma": "auto"}), "lean-svc"),
                                                   (ModelSpec("rf", {"n_estimators": 5}), "lean-forest"),
                                                   (ModelSpec("lr"), "lean-lr"),
                                                   (ModelSpec("lda"), "library")])
def test_a_trial_records_the_fit_path_that_ran_and_the_store_keeps_it(lu2023, sonar, tmp_path, task_model, fast_path):
    from audit.engine.store import ResultStore, fingerprint_details

    protocol = dataclasses.replace(lu2023, budget_size=3, task_model=task_model)
    result = run_trial(protocol, "sonar", sonar.X, sonar.y, "uniform", 0)
    assert result.status == "ok" and result.fast_path == fast_path
    store = ResultStore(tmp_path / "s.sqlite")
    fingerprint = store.register(fingerprint_details(protocol))
    store.save(result, fingerprint)
    assert store.trials(protocol.name, "sonar", "uniform", fingerprint)[0].fast_path == fast_path
    store.close()
