"""The replay engine: one pool-based active-learning trial, and the task that names one
(:mod:`audit.engine.executors` runs many, in parallel).

A trial follows the protocol exactly: split and initial set from the RNG contract
(:mod:`audit.engine.splits`), features scaled in the protocol's scope, a task model trained
and scored on the test rows after every query, and a query model kept separate from it
unless the two are the same spec seen through the same features, in which case the
task model's fit is reused. Library code is reached only through :mod:`adapters`.
"""
from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import hashlib
import inspect
import json
import math
import signal
import threading
import time
import traceback
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import numpy as np
from sklearn.preprocessing import MinMaxScaler, StandardScaler
from threadpoolctl import threadpool_limits

import adapters
from adapters import MISSING
from adapters.base import QueryStrategy, TrialView
from audit.engine import scratch
from audit.engine.metrics import METRICS, get_variant, round_metrics
from audit.engine.splits import TrialSplit, make_split, subsystem_seed, trial_rows
from audit.engine.synthetic import Draw
from audit.errors import AuditError
from audit.fast import policy as fast_policy
from audit.fast.scaler import standard_scaled
from audit.protocols import Protocol, StrategySpec


@dataclass(frozen=True)
class RoundRecord:
    """What one round leaves behind. Round 0 is the initial model (nothing queried)."""

    round: int
    n_labeled: int
    queried: tuple[int, ...]
    accuracy: float
    f1: float
    roc_auc: float
    fit_seconds: float
    query_seconds: float


@dataclass
class TrialResult:
    protocol: str
    dataset: str
    strategy: str
    trial_seed: int
    status: str  # "ok", "error", or "tle" (over the per-trial time limit)
    aubc: float | None = None
    aubc_by_metric: dict[str, float] = field(default_factory=dict)
    rounds: list[RoundRecord] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)  # distinct library warnings raised in the trial
    companions: list["TrialResult"] = field(default_factory=list)  # see run_trial's ``companions``
    fast_path: str | None = None  # which fit path ran (audit.fast.policy.provenance); None: not recorded

    @property
    def query_hash(self) -> str | None:
        """Hash of the queried row sequence: equal hashes mean the same queries."""
        if not self.rounds:
            return None
        sequence = [list(r.queried) for r in self.rounds]
        return hashlib.sha256(json.dumps(sequence).encode()).hexdigest()[:16]


def budget_for(protocol: Protocol, pool_size: int, n_classes: int) -> int:
    """Labels to query in a trial; a budget larger than the pool is an input error unless the
    protocol caps it at the pool (``[budget] cap = "pool"``: ALPBench stops once the pool is used up)."""
    if protocol.budget_size == "pool":
        return pool_size
    size = protocol.budget_rounds * protocol.batch_for(n_classes) if protocol.budget_size == "rounds" \
        else int(protocol.budget_size)
    if protocol.budget_cap == "pool":
        return min(size, pool_size)
    if size > pool_size:
        raise AuditError(f"budget {size} is larger than the unlabeled pool ({pool_size} rows)")
    return size


SCALERS = {"standard": StandardScaler, "minmax": MinMaxScaler}


class _Features:
    """Feature views of the train layout, the test rows and the validation rows in one
    scaling scope. Scope "train" fits the protocol's scaler on the train and validation
    rows (every row not in the test set); with ``test_fit = "test"`` the test rows get a
    scaler fitted on themselves, as CDALBench's released code did (a leakage-like quirk:
    the test set's own minimum and maximum shape its features)."""

    def __init__(self, scope: str, X: np.ndarray, split: TrialSplit, scaler: str = "standard",
                 test_fit: str = "train"):
        self.scope, self.scaler, self.test_fit = scope, SCALERS[scaler], test_fit
        self.X_train_raw = X[split.train]
        self.X_test_raw = X[split.test]
        self.X_val_raw = X[split.validation]
        self.X_train, self.X_test, self.X_val = self.X_train_raw, self.X_test_raw, self.X_val_raw
        if scope == "train":
            self._scale(np.concatenate([self.X_train_raw, self.X_val_raw]))

    def _scaled(self, fit_rows: np.ndarray, *arrays: np.ndarray) -> list[np.ndarray]:
        """``arrays`` transformed by the protocol's scaler fitted on ``fit_rows``; a StandardScaler
        through its bit-identical lean route (audit/fast/scaler.py): scope "labeled" refits it
        every round, and the oracles for each of thousands of candidate sets a round."""
        if self.scaler is StandardScaler:
            return standard_scaled(fit_rows, *arrays)
        scaler = self.scaler().fit(fit_rows)
        return [scaler.transform(a) for a in arrays]

    def _with_test(self, fit_rows: np.ndarray, *arrays: np.ndarray) -> list[np.ndarray]:
        """``arrays`` scaled by the scaler fitted on ``fit_rows``, then the test rows as the task
        model sees them with it (test_fit "test": by a scaler fitted on themselves)."""
        if self.test_fit == "train":
            return self._scaled(fit_rows, *arrays, self.X_test_raw)
        return self._scaled(fit_rows, *arrays) + self._scaled(self.X_test_raw, self.X_test_raw)

    def _scale(self, fit_rows: np.ndarray) -> None:
        with_val = [self.X_val_raw] if len(self.X_val_raw) else []
        self.X_train, *val, self.X_test = self._with_test(fit_rows, self.X_train_raw, *with_val)
        self.X_val = val[0] if val else self.X_val_raw

    def update(self, labeled_positions: np.ndarray) -> None:
        """Scope "labeled": refit the scaler on the current labeled rows (once a round)."""
        if self.scope == "labeled":
            self._scale(self.X_train_raw[labeled_positions])

    def views_for(self, labeled_positions: np.ndarray, train_rows: np.ndarray | slice) -> tuple[np.ndarray, np.ndarray]:
        """(the train layout's ``train_rows``, the test rows) as the task model sees them when
        ``labeled_positions`` is the labeled set, without changing this round's views: in scope
        "labeled" scaled by the scaler refitted on those rows, else the fixed views."""
        if self.scope != "labeled":
            return self.X_train[train_rows], self.X_test
        fit_rows = self.X_train_raw[labeled_positions]
        rows = fit_rows if train_rows is labeled_positions else self.X_train_raw[train_rows]  # the oracles' usual call
        X_rows, X_test = self._with_test(fit_rows, rows)
        return X_rows, X_test


class TrialTimeout(BaseException):
    """Raised inside a trial when it exceeds its time limit. Not an Exception, so that a library's
    ``except Exception`` does not turn it into its own error (cvxpy's OSQP interface re-raises
    anything from the solver's setup as SolverError) or swallow it and run on past the limit."""


@contextlib.contextmanager
def _time_limit(seconds: float | None):
    """Interrupt the trial after `seconds`.

    On a process's main thread (local workers) by SIGALRM; on another thread (a Dask
    worker runs tasks in a thread pool, where signals cannot be caught) by raising
    TrialTimeout asynchronously in that thread. Either way, code inside a C extension is
    interrupted when it returns to Python.
    """
    if not seconds:
        yield
        return
    if threading.current_thread() is threading.main_thread():
        def expire(signum, frame):
            raise TrialTimeout()

        previous = signal.signal(signal.SIGALRM, expire)
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        return
    thread_id = threading.get_ident()
    timer = threading.Timer(seconds, ctypes.pythonapi.PyThreadState_SetAsyncExc,
                            (ctypes.c_ulong(thread_id), ctypes.py_object(TrialTimeout)))
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        timer.join()


def run_trial(
    protocol: Protocol, dataset_name: str, X: np.ndarray, y: np.ndarray, strategy_id: str, trial_seed: int,
    time_limit: float | None = None, jobs: int = 1, companions: tuple[Protocol, ...] = (), given: Draw | None = None,
) -> TrialResult:
    """Replay one trial; a failure of the strategy or its library becomes an error result,
    a trial over ``time_limit`` seconds a "tle" result (as lu2023 Table 3 reports TLE).
    ``jobs`` > 1 lets a strategy that uses the test labels (an oracle) score its candidates in
    that many processes (same result).

    ``companions`` are protocols that differ from ``protocol`` only in name and task model
    (the columns of a compatibility grid). The queries do not depend on the task model,
    so each companion's task model is trained and scored on this trial's queries, and its
    result, the one a replay under the companion would give, is in ``result.companions``.
    ``given``: a train/test set's own split (``Dataset.given``), its rows ``X``, ``y``.
    """
    protocol = protocol.for_dataset(dataset_name)
    companions = tuple(c.for_dataset(dataset_name) for c in companions)
    results = [TrialResult(p.name, dataset_name, strategy_id, trial_seed, "error") for p in (protocol, *companions)]
    result = results[0]
    start = time.perf_counter()
    caught: list[warnings.WarningMessage] = []
    ran: set[str] = set()  # the fit paths the trial took (audit.fast.policy)
    try:
        with threadpool_limits(1):  # the machine's one-time work, not the trial's: before its clock and limit
            prepare_strategy(protocol, protocol.strategy(strategy_id))
        start = time.perf_counter()
        with threadpool_limits(1), _time_limit(time_limit), warnings.catch_warnings(record=True) as caught, \
                fast_policy.recording(ran):
            # One BLAS thread: the same floating-point path whatever the executor. Library
            # warnings are recorded with the trial instead of flooding the terminal; the
            # papers' SVC(probability=True) is deprecated in scikit-learn 1.9 and asked for on purpose.
            warnings.simplefilter("default")
            warnings.filterwarnings("ignore", message="The `probability` parameter was deprecated",
                                    category=FutureWarning)
            runs = _replay(protocol, X, y, protocol.strategy(strategy_id), trial_seed, jobs, companions, dataset_name,
                           given)
        variant = get_variant(protocol.aubc_variant)
        for each, rounds in zip(results, runs):
            n_labeled = [r.n_labeled for r in rounds]
            each.rounds = rounds
            each.aubc_by_metric = {m: variant([getattr(r, m) for r in rounds], n_labeled) for m in METRICS}
            each.aubc = each.aubc_by_metric[protocol.aubc_metric]
            each.status = "ok"
    except TrialTimeout:
        _fail(results, "tle", f"time limit of {time_limit:g} s per trial exceeded")
    except AuditError as exc:
        _fail(results, "error", str(exc))
    except Exception as exc:  # a library failing mid-trial is recorded, the audit goes on
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        _fail(results, "error",
              f"{type(exc).__name__}: {exc} (at {frame.filename.rsplit('/', 1)[-1]}:{frame.lineno})")
    seconds = time.perf_counter() - start
    for each in results:
        each.fast_path = fast_policy.provenance(ran)
        each.warnings = sorted({f"{w.category.__name__}: {w.message}".splitlines()[0][:200] for w in caught})
        each.seconds = seconds
    result.companions = results[1:]
    return result


def _fail(results: list[TrialResult], status: str, error: str) -> None:
    for each in results:
        each.status, each.error, each.rounds = status, error, []
        each.aubc, each.aubc_by_metric = None, {}


def _check_companions(protocol: Protocol, spec: StrategySpec, strategy_cls: type[QueryStrategy],
                      companions: tuple[Protocol, ...]) -> None:
    """Companions must share everything but the task model, and the strategy must not query
    with it (an oracle scores its candidates with it)."""
    if not companions:
        return
    if spec.query_model == "task" or strategy_cls.uses_test_labels:
        raise AuditError(f"{spec.id} queries with the task model: its queries change with the task model, "
                         f"so other task models cannot be scored on them")
    for companion in companions:
        if dataclasses.replace(companion, name=protocol.name, task_model=protocol.task_model) != protocol:
            raise AuditError(f"protocol '{companion.name}' differs from '{protocol.name}' in more than its "
                             f"task model: it cannot be scored on the same queries")


def bound_strategy(protocol: Protocol, spec: StrategySpec) -> tuple[Any, dict[str, Any]]:
    """The query model and parameters a strategy really runs with: the models it names get the
    protocol's ``[query_models] defaults`` for what they leave unset (the task model, and a
    strategy querying with it, keep their explicit params)."""
    strategy_cls = adapters.strategy_class(spec.implementation)
    era = protocol.query_model_defaults
    query_spec = protocol.query_model_for(spec)
    if query_spec is not None and spec.query_model != "task":
        query_spec = query_spec.with_defaults(era)
    return query_spec, strategy_cls.resolve_defaults(dict(spec.params), era)


def prepare_strategy(protocol: Protocol, spec: StrategySpec, log: Callable[[str], None] = lambda line: None) -> None:
    """The strategy's one-time work on this machine (:meth:`QueryStrategy.prepare`), with the
    parameters it really runs with."""
    strategy_cls = adapters.strategy_class(spec.implementation)
    strategy_cls.prepare({**strategy_cls.param_defaults, **bound_strategy(protocol, spec)[1]}, log)


def prepare_strategies(tasks: Iterable[TrialTask], log: Callable[[str], None]) -> None:
    """Before a run's first trial: each strategy's one-time work, announced through ``log``
    (so the progress bar does not stall unexplained inside a trial). A failure is left to
    the trials, which record it as their error."""
    seen = set()
    for task in tasks:
        key = (task.protocol.name, task.dataset, task.strategy)
        if key in seen:
            continue
        seen.add(key)
        protocol = task.protocol.for_dataset(task.dataset)
        with contextlib.suppress(Exception):
            prepare_strategy(protocol, protocol.strategy(task.strategy), log)


def first_equal_row_labels(X_train: np.ndarray, y_train: np.ndarray) -> np.ndarray:
    """Per train row, the label of the first train row (in train-layout order) with equal
    features: what libact 0.1.6's ``IdealLabeler`` answers for a queried feature vector."""
    _, first, inverse = np.unique(X_train, axis=0, return_index=True, return_inverse=True)
    return y_train[first[inverse.ravel()]]


def conflicting_duplicates(X: np.ndarray, y: np.ndarray) -> int:
    """Rows whose features equal another row's with a different label (where the label
    lookup by feature vector can answer a label the row does not have)."""
    _, inverse = np.unique(X, axis=0, return_inverse=True)
    inverse = inverse.ravel()
    labels_per_group = {}
    for group, label in zip(inverse.tolist(), y.tolist()):
        labels_per_group.setdefault(group, set()).add(label)
    return int(sum(len(labels_per_group[g]) > 1 for g in inverse.tolist()))


def file_label_values(dataset_name: str) -> dict[int, int]:
    """Class code -> the label as the data file spells it (``[labels] libact_binary = "file"``)."""
    from audit.engine.datasets import encode_labels, get_info

    spellings = [label for label, _ in get_info(dataset_name).class_counts]
    _, by_code = encode_labels(spellings)
    return {code: int(float(spelling)) for code, spelling in enumerate(by_code)}


def _replay(protocol: Protocol, X: np.ndarray, y: np.ndarray, spec: StrategySpec, trial_seed: int,
            jobs: int = 1, companions: tuple[Protocol, ...] = (), dataset_name: str = "",
            given: Draw | None = None) -> list[list[RoundRecord]]:
    """The rounds of the trial under ``protocol``, then under each companion (see run_trial)."""
    strategy_cls = adapters.strategy_class(spec.implementation)
    _check_companions(protocol, spec, strategy_cls, companions)
    from audit.engine.datasets import REGISTRY  # as file_label_values: not at import time

    info = REGISTRY.get(dataset_name)
    X, y, drawn = trial_rows(protocol, X, y, info.generator if info is not None else None, dataset_name, trial_seed,
                             given)
    split = make_split(protocol, y, trial_seed, drawn)
    if isinstance(split, str):
        raise AuditError(f"trial seed {trial_seed} is not valid for this protocol: {split}")
    n_classes = int(y.max()) + 1
    batch_size = protocol.batch_for(n_classes)
    model_seed = subsystem_seed(protocol.seeds["model"], trial_seed, "model")
    strategy_seed = subsystem_seed(protocol.seeds["strategy"], trial_seed, "strategy")
    rng = np.random.default_rng(strategy_seed)

    train_rows = split.train
    y_train = y[train_rows]
    y_test = y[split.test]
    n_initial = split.labeled.size
    budget = budget_for(protocol, split.pool.size, n_classes)

    task_features = _Features(protocol.scaling["task"], X, split, protocol.scaler, protocol.scaler_test_fit)
    query_spec, params = bound_strategy(protocol, spec)
    shares_task_fit = spec.query_model == "task" or (
        query_spec is not None and query_spec.key == protocol.task_model.key
        and protocol.scaling["query"] == protocol.scaling["task"]
    )
    query_features = task_features if shares_task_fit else _Features(
        protocol.scaling["query"], X, split, protocol.scaler, protocol.scaler_test_fit)

    strategy = strategy_cls(
        query_model=query_spec if strategy_cls.model_use == "own" else None,
        random_state=strategy_seed,
        **params,
    )
    if protocol.libact_binary == "file":
        strategy.file_labels = file_label_values(dataset_name)
    # [labels] reveal: the label a queried row gets (its own, or the first equal train row's)
    revealed = (first_equal_row_labels(task_features.X_train_raw, y_train)
                if protocol.reveals_equal_row(strategy_cls.library) else y_train)
    if batch_size > 1 and not strategy_cls.batch:
        raise AuditError(f"{spec.id} ({spec.implementation}) does not support batch size {batch_size}")
    if strategy_cls.uses_test_labels:  # declared: it alone is given the test rows and every label
        strategy.begin_trial(TrialView(protocol.task_model, model_seed, task_features, y_train, y_test, budget, jobs))

    labeled_mask = np.zeros(train_rows.size, dtype=bool)
    labeled_mask[:n_initial] = True
    y_known = np.full(train_rows.size, MISSING, dtype=np.int64)
    y_known[:n_initial] = y_train[:n_initial]

    task_specs = [protocol.task_model, *(c.task_model for c in companions)]
    records: list[list[RoundRecord]] = [[] for _ in task_specs]
    kept: dict[int, Any] = {}  # warm-started task models, kept across rounds

    def fit_and_score(round_no: int, queried: tuple[int, ...], query_seconds: float) -> Any:
        """Fit and score every task model on the labeled rows; returns the protocol's own."""
        positions = np.flatnonzero(labeled_mask)
        task_features.update(positions)
        models = []
        for index, (task_spec, task_records) in enumerate(zip(task_specs, records)):
            t0 = time.perf_counter()
            model = kept[index] if index in kept else task_spec.build(model_seed)
            if _warm_started(model):
                kept[index] = model
            model = model.fit(task_features.X_train[positions], y_known[positions],
                              **_validation_args(model, task_features, y[split.validation]))
            fit_seconds = time.perf_counter() - t0
            scores = round_metrics(y_test, model.predict(task_features.X_test), n_classes)
            task_records.append(RoundRecord(round_no, positions.size, queried, fit_seconds=fit_seconds,
                                            query_seconds=query_seconds, **scores))
            models.append(model)
        return models[0]

    task_model = fit_and_score(0, (), 0.0)
    spent = 0
    for round_no in range(1, math.ceil(budget / batch_size) + 1):
        batch = min(batch_size, budget - spent)
        candidates = np.flatnonzero(~labeled_mask)
        t0 = time.perf_counter()
        if strategy_cls.model_use != "fitted":
            query_model = None
        elif shares_task_fit:
            query_model = task_model
        else:
            positions = np.flatnonzero(labeled_mask)
            query_features.update(positions)
            query_model = query_spec.build(model_seed).fit(query_features.X_train[positions], y_known[positions])
        picked = strategy.query(query_features.X_train, y_known, query_model, batch, candidates, rng)
        query_seconds = time.perf_counter() - t0
        labeled_mask[picked] = True
        y_known[picked] = revealed[picked]
        spent += batch
        task_model = fit_and_score(round_no, tuple(int(r) for r in train_rows[picked]), query_seconds)
    return records


def _warm_started(model: Any) -> bool:
    """scikit-learn's convention: ``warm_start=True`` continues from the previous fit, so the
    runner keeps the estimator across rounds instead of building a fresh one."""
    return bool(getattr(model, "get_params", dict)().get("warm_start", False))


def _validation_args(model: Any, features: "_Features", y_val: np.ndarray) -> dict[str, Any]:
    """``validation=(X_val, y_val)`` for a model whose fit takes it (early stopping on the
    protocol's validation rows); nothing when the protocol has none or the model cannot use it."""
    if not len(y_val) or "validation" not in inspect.signature(model.fit).parameters:
        return {}
    return {"validation": (features.X_val, y_val)}


# --- many trials --------------------------------------------------------------------

@dataclass(frozen=True)
class TrialTask:
    """One unit of work: picklable, so any executor can run it."""

    protocol: Protocol
    dataset: str
    data_dir: str | None
    strategy: str
    trial_seed: int
    time_limit: float | None = None
    jobs: int = 1  # processes inside the trial (for a strategy that uses the test labels: TrialView.jobs)
    companions: tuple[Protocol, ...] = ()  # protocols scored on the same queries (run_trial)
    scratch: str | None = None  # the run's scratch directory (audit/engine/scratch.py); None: none


def execute_task(task: TrialTask, arrays: tuple[np.ndarray, np.ndarray, Draw | None] | None = None) -> TrialResult:
    """Run one task; ``arrays`` is the data set's (X, y, its own split or None) already shipped
    to this worker, None loads it here."""
    if arrays is None:
        from audit.engine.datasets import load_dataset

        data = load_dataset(task.dataset, task.data_dir)
        arrays = data.X, data.y, data.given
    X, y, given = arrays
    with scratch.using(task.scratch):
        return run_trial(task.protocol, task.dataset, X, y, task.strategy, task.trial_seed, task.time_limit,
                         task.jobs, task.companions, given)
