"""Reference oracles: query "strategies" that choose by the test labels.

An oracle is not a query strategy: it fits the task model on candidate labeled sets and
scores them on the test rows, so it needs the test labels, which adapters never get.
The runner hands a trial whose implementation is ``oracle.*`` to :func:`replay`; the
split, the seeds, the task model and its features are the runner's, so an oracle's
learning curve is what the runner would record if a strategy had queried the same rows.

Two oracles:

``oracle.bso`` (strategy ``bso``): the beam-search oracle of zhan2021 Section 3, as lu2023
re-ran it. Each round, every unlabeled candidate of every beam is added to that beam's
labeled set, the task model is fitted on each resulting set and scored by test
accuracy, and the ``beam_width`` best labeled sets are kept, until the budget is spent.
Beams are labeled *sets*: a set reached from several beams is one state, evaluated once,
and keeps the history of its best parent. Every choice is deterministic:

- the path score of a beam is the sum of its test-set correct counts after each query
  (an exact integer; the area every AUBC variant measures, up to its end-point weights);
- children are ranked by test accuracy, then path score (both descending), then the
  parent beam's rank, then the candidate's pool position (both ascending);
- a set reached from several beams keeps the parent with the highest path score, ties
  to the better-ranked parent (then the earlier candidate);
- the best sequence is the final beam with the highest path score, ties to the better
  rank. With the budget = the whole pool every beam ends in the same set, so the best
  sequence is the highest-scoring path into it.

``oracle.greedy`` (strategy ``greedy-oracle``): CDALBench Algorithm 3. Each round draws
``tau`` distinct candidates uniformly (the strategy's own RNG stream), keeps the first one
whose addition gives the highest test accuracy if that beats the current model's, and
otherwise falls back to margin sampling with the current task model over the whole pool
(ties to the earlier pool position).

Speed without changing a result: a child set reached from several beams is evaluated
once; an SVC task model is fitted and applied through libsvm with exactly the arguments
SVC.fit and SVC.predict pass (scikit-learn's validation around them is most of the cost
on small sets); the test set is predicted in one call and only correct counts are kept;
with jobs > 1 the candidates of a round, and the final learning curve's fits, are shared
between this process and jobs - 1 worker processes that live as long as this process
(each imports scikit-learn once), read each trial's arrays once from a file, and receive
index arrays only. tests/test_oracles.py
checks the result against a plain reference implementation (tests/oracle_reference.py).
"""
from __future__ import annotations

import os
import pickle
import tempfile
import time
import uuid
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from audit.workers import context as worker_context
from audit.errors import AuditError
from audit.metrics import round_metrics
from audit.models import ModelSpec, margin_scores
from audit.protocols import Protocol, StrategySpec
from audit.runner import RoundRecord, _Features, budget_for
from audit.splits import make_split, subsystem_seed

PREFIX = "oracle."


class Oracle:
    """What the capability matrix and the reports need to know about an oracle."""

    param_defaults: ClassVar[dict[str, int]] = {}
    batch: ClassVar[bool] = False  # one query a round

    @classmethod
    def library_version(cls) -> str:
        from audit import __version__

        return f"native (al-audit {__version__})"

    @classmethod
    def availability(cls) -> str | None:
        return None

    @classmethod
    def params(cls, given: dict[str, Any]) -> dict[str, int]:
        """The parameters in effect; unknown names and non-positive integers are input errors."""
        unknown = set(given) - set(cls.param_defaults)
        if unknown:
            raise AuditError(f"{cls.__name__} does not use parameter(s) {', '.join(sorted(unknown))}; "
                             f"it takes: {', '.join(cls.param_defaults)}")
        params = {**cls.param_defaults, **given}
        for name, value in params.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise AuditError(f"{cls.__name__} parameter {name} must be a positive integer, not {value!r}")
        return params


class BeamSearchOracle(Oracle):
    """The beam-search oracle of zhan2021 Section 3, as lu2023 re-ran it."""

    param_defaults = {"beam_width": 5}


class GreedyOracle(Oracle):
    """The greedy oracle of CDALBench Algorithm 3."""

    param_defaults = {"tau": 20}


ORACLES: dict[str, type[Oracle]] = {"bso": BeamSearchOracle, "greedy": GreedyOracle}


def is_oracle(implementation: str) -> bool:
    return implementation.startswith(PREFIX)


def oracle_class(implementation: str) -> type[Oracle]:
    try:
        return ORACLES[implementation.removeprefix(PREFIX)]
    except KeyError:
        known = ", ".join(PREFIX + name for name in ORACLES)
        raise AuditError(f"unknown implementation '{implementation}'; known oracles: {known}") from None


def unavailable_reason(implementation: str) -> str | None:
    """None when the oracle can run here (always, if it exists), else why not."""
    try:
        return oracle_class(implementation).availability()
    except AuditError as exc:
        return str(exc)


# --- fitting and scoring one labeled set ------------------------------------------------

def _libsvm_arguments(estimator: Any) -> dict[str, Any] | None:
    """The libsvm arguments SVC.fit passes, when calling libsvm directly reproduces SVC
    exactly (a plain SVC: built-in kernel, no class weights, no probabilities, no
    tie-breaking); None otherwise."""
    from sklearn.svm import SVC
    from sklearn.utils import check_random_state

    from audit.lean_svm import LeanSVC

    if (type(estimator) not in (SVC, LeanSVC) or estimator.kernel not in ("linear", "poly", "rbf", "sigmoid")
            or estimator.class_weight is not None or estimator.probability not in (False, "deprecated")
            or estimator.break_ties):
        return None
    return {
        "kernel": estimator.kernel, "C": estimator.C, "nu": estimator.nu, "degree": estimator.degree,
        "shrinking": estimator.shrinking, "tol": estimator.tol, "cache_size": estimator.cache_size,
        "coef0": estimator.coef0, "epsilon": estimator.epsilon, "max_iter": estimator.max_iter,
        "gamma": estimator.gamma, "verbose": estimator.verbose,
        # libsvm reads the seed only for probability estimates, which this path excludes.
        "random_seed": check_random_state(estimator.random_state).randint(np.iinfo("i").max),
    }


def _float64(X: np.ndarray) -> np.ndarray:
    """float64 in C order: what scikit-learn converts rows to before libsvm sees them."""
    return np.ascontiguousarray(X, dtype=np.float64)


class Scorer:
    """The task model of one trial fitted on a labeled set and applied to the test rows,
    exactly as the runner fits it (same spec, model seed, features, row order)."""

    def __init__(self, spec: ModelSpec, model_seed: int, features: _Features, y_train: np.ndarray,
                 y_test: np.ndarray):
        self.spec, self.model_seed = spec, model_seed
        self.scope = features.scope
        self.X_train_raw, self.X_test_raw = features.X_train_raw, features.X_test_raw
        self.X_train, self.X_test = _float64(features.X_train), _float64(features.X_test)
        self.y_train, self.y_test = y_train, y_test
        self.libsvm = _libsvm_arguments(spec.build(model_seed))
        # SVC's label encoding (np.unique + inverse) computed once; it holds for every labeled
        # set with all the train rows' classes (every set grown from the initial labels).
        self.classes, self.codes = np.unique(y_train, return_inverse=True)

    def view(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(train rows, test rows) in the task scaling for this labeled set."""
        if self.scope != "labeled":
            return self.X_train, self.X_test
        scaler = StandardScaler().fit(self.X_train_raw[positions])
        return _float64(scaler.transform(self.X_train_raw)), _float64(scaler.transform(self.X_test_raw))

    def fit(self, positions: np.ndarray) -> tuple[Any, np.ndarray, np.ndarray]:
        """The runner's fit: (fitted scikit-learn model, train view, test view)."""
        X_train, X_test = self.view(positions)
        model = self.spec.build(self.model_seed).fit(X_train[positions], self.y_train[positions])
        return model, X_train, X_test

    def predict(self, positions: np.ndarray) -> np.ndarray:
        """Test-set predictions of the model fitted on ``positions`` (ascending)."""
        if self.libsvm is None:
            model, _, X_test = self.fit(positions)
            return model.predict(X_test)
        X_train, X_test = self.view(positions)
        codes = self.codes[positions]
        if np.count_nonzero(np.bincount(codes, minlength=self.classes.size)) == self.classes.size:
            classes = self.classes
        else:
            classes, codes = np.unique(self.y_train[positions], return_inverse=True)
        return _libsvm_predict(self.libsvm, X_train[positions], codes.astype(np.float64), classes, X_test)

    def correct(self, positions: np.ndarray) -> int:
        return int(np.count_nonzero(self.predict(positions) == self.y_test))


def _libsvm_predict(args: dict[str, Any], X: np.ndarray, codes: np.ndarray, classes: np.ndarray,
                    X_test: np.ndarray) -> np.ndarray:
    """SVC(...).fit(X, classes[codes]).predict(X_test) without scikit-learn's validation
    layers (the same libsvm calls with the same arguments; SVC's checks that change an
    outcome are mirrored)."""
    from sklearn.svm import _libsvm

    if classes.size < 2:
        raise ValueError(f"The number of classes has to be greater than one; got {classes.size} class")
    gamma = args["gamma"]
    if gamma == "scale":
        variance = X.var()
        gamma = 1.0 / (X.shape[1] * variance) if variance != 0 else 1.0
    elif gamma == "auto":
        gamma = 1.0 / X.shape[1]
    _libsvm.set_verbosity_wrap(args["verbose"])  # process-wide in libsvm: a fresh worker would print
    support, support_vectors, n_support, dual_coef, intercept, prob_a, prob_b, _, _ = _libsvm.fit(
        X, codes, svm_type=0, sample_weight=np.empty(0),
        class_weight=np.ones(classes.size), kernel=args["kernel"], C=args["C"], nu=args["nu"],
        probability=False, degree=args["degree"], shrinking=args["shrinking"], tol=args["tol"],
        cache_size=args["cache_size"], coef0=args["coef0"], gamma=gamma, epsilon=args["epsilon"],
        max_iter=args["max_iter"], random_seed=args["random_seed"])
    if not (np.isfinite(intercept).all() and np.isfinite(dual_coef).all()):
        raise ValueError("The dual coefficients or intercepts are not finite. The input data may contain "
                         "large values and need to be preprocessed.")
    predicted = _libsvm.predict(
        X_test, support, support_vectors, n_support, dual_coef, intercept, prob_a, prob_b, svm_type=0,
        kernel=args["kernel"], degree=args["degree"], coef0=args["coef0"], gamma=gamma,
        cache_size=args["cache_size"])
    return classes.take(np.asarray(predicted, dtype=np.intp))


def _with(positions: np.ndarray, position: int) -> np.ndarray:
    """``positions`` (ascending) plus one more, still ascending (np.insert costs 20x more)."""
    k = int(np.searchsorted(positions, position))
    out = np.empty(positions.size + 1, dtype=positions.dtype)
    out[:k], out[k], out[k + 1:] = positions[:k], position, positions[k:]
    return out


def _count(scorer: Scorer, parents: list[np.ndarray], pairs: np.ndarray) -> np.ndarray:
    """Correct test predictions of each child set parents[b] + {c}, for (b, c) in pairs."""
    return np.array([scorer.correct(_with(parents[b], c)) for b, c in pairs.tolist()], dtype=np.int64)


_WORKER: dict[str, Any] = {}
_POOLS: dict[int, tuple[ProcessPoolExecutor, Any, Any]] = {}  # workers -> (pool, lock, [generation, next chunk])
CHUNKS_PER_PROCESS = 32  # a round is cut into about this many chunks per process
LOCK_SECONDS = 60.0  # the claim lock is held for microseconds: longer means its holder died


def _start_worker(lock: Any, state: Any) -> None:
    _WORKER["limits"] = threadpool_limits(1)  # the runner's single BLAS thread, for the worker's life
    _WORKER["lock"], _WORKER["state"] = lock, state


def _scorer_in_worker(token: str, path: str) -> Scorer:
    """The trial's scorer, read from its file once per worker and trial."""
    if _WORKER.get("token") != token:
        with open(path, "rb") as f:
            _WORKER["scorer"] = pickle.load(f)
        _WORKER["token"] = token
    return _WORKER["scorer"]


def _curve_points(scorer: Scorer, sets: list[np.ndarray]) -> list[tuple[np.ndarray, float]]:
    """(test predictions, fit seconds) of the runner's fit on each labeled set."""
    out = []
    for positions in sets:
        start = time.perf_counter()
        model, _, X_test = scorer.fit(positions)
        fit_seconds = time.perf_counter() - start
        out.append((model.predict(X_test), fit_seconds))
    return out


def _chunk_work(scorer: Scorer, function, fixed: tuple, items: Any, size: int):
    """Chunk c of a round's work: ``function(scorer, *fixed, items[c*size:(c+1)*size])``."""
    return lambda c: function(scorer, *fixed, items[c * size:(c + 1) * size])


def _claim_chunks(lock: Any, state: Any, generation: int, n_chunks: int, work) -> dict[int, Any]:
    """Take the next unclaimed chunk of round ``generation`` and do it, until none is left or
    the round is over; every process of the team runs this loop on the same counter."""
    done = {}
    while True:
        if not lock.acquire(timeout=LOCK_SECONDS):
            raise BrokenProcessPool("an oracle worker died holding the chunk counter")
        try:
            if state[0] != generation or state[1] >= n_chunks:
                return done
            chunk = state[1]
            state[1] += 1
        finally:
            lock.release()
        done[chunk] = work(chunk)


def _claim_in_worker(token: str, path: str, generation: int, function, fixed: tuple, items: Any, size: int,
                     n_chunks: int) -> dict[int, Any]:
    work = _chunk_work(_scorer_in_worker(token, path), function, fixed, items, size)
    return _claim_chunks(_WORKER["lock"], _WORKER["state"], generation, n_chunks, work)


def _next_round(lock: Any, state: Any) -> int:
    """Open a new round on the team's counter (which also ends any round still running)."""
    if not lock.acquire(timeout=LOCK_SECONDS):
        raise BrokenProcessPool("an oracle worker died holding the chunk counter")
    try:
        state[0] += 1
        state[1] = 0
        return int(state[0])
    finally:
        lock.release()


def _team(workers: int) -> tuple[ProcessPoolExecutor, Any, Any]:
    """Worker processes kept for the life of this process (each imports scikit-learn once,
    seconds, not once per trial), with the lock and counter they share with this process."""
    if workers not in _POOLS:
        ctx = worker_context()
        lock, state = ctx.Lock(), ctx.RawArray("q", 2)
        pool = ProcessPoolExecutor(workers, mp_context=ctx, initializer=_start_worker, initargs=(lock, state))
        _POOLS[workers] = (pool, lock, state)
    return _POOLS[workers]


class Evaluator:
    """Scores many child sets, in this process (jobs = 1) or in this process and ``jobs - 1``
    worker processes.

    The counts come back in the order of ``pairs`` whatever ``jobs`` is, so results do not
    depend on it. With workers, a round is cut into small chunks that every process takes
    from a shared counter (a lock held for microseconds) until none is left, so the
    processes finish a round within one chunk of each other whatever their speed (fixed
    shares left one waiting for the other every round: the VM's cores vary in speed from
    one 100-ms round to the next). One hand-off per worker and round, index arrays only:
    the trial's arrays go to a file once, which each worker reads once.
    """

    def __init__(self, scorer: Scorer, jobs: int = 1):
        self.scorer, self.jobs = scorer, jobs
        self._futures: list[Future] = []
        self._path = None
        if jobs > 1:
            fd, self._path = tempfile.mkstemp(prefix="al-audit-oracle-", suffix=".pickle")
            with os.fdopen(fd, "wb") as f:
                pickle.dump(scorer, f, protocol=pickle.HIGHEST_PROTOCOL)
            self._token = uuid.uuid4().hex

    def _shared(self, function, fixed: tuple, items: Any) -> list[Any]:
        """``function(scorer, *fixed, chunk of items)`` over all the items, as a list of chunk
        results in order: here alone, or by every process of the team."""
        if self._path is None or len(items) < self.jobs:
            return [function(self.scorer, *fixed, items)]
        size = max(1, len(items) // (self.jobs * CHUNKS_PER_PROCESS))
        n_chunks = -(-len(items) // size)
        pool, lock, state = _team(self.jobs - 1)
        try:
            generation = _next_round(lock, state)
            self._futures = [pool.submit(_claim_in_worker, self._token, self._path, generation, function, fixed,
                                         items, size, n_chunks) for _ in range(self.jobs - 1)]
            done = _claim_chunks(lock, state, generation, n_chunks,
                                 _chunk_work(self.scorer, function, fixed, items, size))
            for future in self._futures:
                done.update(future.result())
        except BrokenProcessPool:
            del _POOLS[self.jobs - 1]  # a worker died: the next trial starts fresh workers
            raise
        return [done[chunk] for chunk in range(n_chunks)]

    def counts(self, parents: list[np.ndarray], pairs: np.ndarray) -> np.ndarray:
        return np.concatenate(self._shared(_count, (parents,), pairs))

    def curve(self, sets: list[np.ndarray]) -> list[tuple[np.ndarray, float]]:
        """(test predictions, fit seconds) of the runner's fit on each labeled set, in order."""
        return [point for chunk in self._shared(_curve_points, (), sets) for point in chunk]

    def close(self) -> None:
        if self._futures and self.jobs - 1 in _POOLS:  # stopped mid-round (time limit): end the round
            _, lock, state = _POOLS[self.jobs - 1]
            _next_round(lock, state)
        for future in self._futures:  # and leave no queued work
            future.cancel()
        if self._path is not None:
            os.unlink(self._path)

    def __enter__(self) -> "Evaluator":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# --- beam search -------------------------------------------------------------------------

@dataclass(frozen=True)
class Beam:
    positions: np.ndarray  # labeled train positions, ascending
    queried: tuple[int, ...]  # train positions in query order
    score: int  # path score: correct test predictions summed over the rounds so far


def _shared_children(beams: list[Beam]) -> dict[tuple[int, int], list[tuple[int, int]]]:
    """Children reached from several beams: {first (beam, candidate): every (beam, candidate)}.

    Beams i and j (equal size, distinct) have a common child exactly when they differ in
    one row each: beams[i] + (j's row) == beams[j] + (i's row).
    """
    groups: dict[tuple[int, int], frozenset[tuple[int, int]]] = {}
    for i in range(len(beams)):
        for j in range(i + 1, len(beams)):
            only_i = np.setdiff1d(beams[i].positions, beams[j].positions, assume_unique=True)
            if only_i.size != 1:
                continue
            only_j = np.setdiff1d(beams[j].positions, beams[i].positions, assume_unique=True)
            a, b = (i, int(only_j[0])), (j, int(only_i[0]))
            merged = groups.get(a, frozenset([a])) | groups.get(b, frozenset([b]))
            for key in merged:
                groups[key] = merged
    return {min(g): sorted(g) for g in set(groups.values())}


def next_beams(beams: list[Beam], evaluator: Evaluator, n_train: int, width: int) -> list[Beam]:
    """One round of beam search (see the module docstring for the ranking and merge rules)."""
    pairs = []
    for b, beam in enumerate(beams):
        unlabeled = np.ones(n_train, dtype=bool)
        unlabeled[beam.positions] = False
        candidates = np.flatnonzero(unlabeled)
        pairs.append(np.column_stack((np.full(candidates.size, b), candidates)))
    pairs = np.concatenate(pairs)
    shared = _shared_children(beams)
    repeated = {key for first, keys in shared.items() for key in keys if key != first}
    if repeated:
        pairs = pairs[[(int(b), int(c)) not in repeated for b, c in pairs]]
    counts = evaluator.counts([beam.positions for beam in beams], pairs)
    producers = pairs.copy()
    for row, (b, c) in enumerate(pairs.tolist()):
        if (b, c) in shared:  # the best-scoring parent, ties to the first in (rank, pool) order
            producers[row] = min(shared[(b, c)], key=lambda key: (-beams[key[0]].score, key))
    scores = np.array([beams[b].score for b in producers[:, 0]], dtype=np.int64) + counts
    order = np.lexsort((producers[:, 1], producers[:, 0], -scores, -counts))[:width]
    kept = []
    for row in order.tolist():
        parent, position = beams[producers[row, 0]], int(producers[row, 1])
        kept.append(Beam(_with(parent.positions, position), parent.queried + (position,), int(scores[row])))
    return kept


def beam_search(scorer: Scorer, evaluator: Evaluator, n_initial: int, budget: int,
                beam_width: int) -> tuple[tuple[int, ...], list[float]]:
    """(train positions of the best sequence in query order, search seconds per round)."""
    start = np.arange(n_initial)
    beams = [Beam(start, (), 0)]
    seconds = []
    for _ in range(budget):
        t0 = time.perf_counter()
        beams = next_beams(beams, evaluator, scorer.y_train.size, beam_width)
        seconds.append(time.perf_counter() - t0)
    best = max(range(len(beams)), key=lambda i: (beams[i].score, -i))
    return beams[best].queried, seconds


# --- greedy oracle -----------------------------------------------------------------------

def greedy_search(scorer: Scorer, evaluator: Evaluator, n_initial: int, budget: int, tau: int,
                  rng: np.random.Generator) -> tuple[tuple[int, ...], list[float]]:
    """CDALBench Algorithm 3: (train positions in query order, seconds per round)."""
    positions = np.arange(n_initial)
    labeled = np.zeros(scorer.y_train.size, dtype=bool)
    labeled[positions] = True
    correct = scorer.correct(positions)
    queried, seconds = [], []
    for _ in range(budget):
        t0 = time.perf_counter()
        pool = np.flatnonzero(~labeled)
        drawn = rng.choice(pool, size=min(tau, pool.size), replace=False)
        counts = evaluator.counts([positions], np.column_stack((np.zeros(drawn.size, dtype=np.int64), drawn)))
        best = int(np.argmax(counts))  # the first of the best, in draw order
        if counts[best] > correct:
            pick, correct = int(drawn[best]), int(counts[best])
        else:  # nothing improves test accuracy: margin sampling with the current task model
            model, X_train, _ = scorer.fit(positions)
            pick = int(pool[np.argmin(margin_scores(model, X_train[pool]))])
            correct = scorer.correct(_with(positions, pick))
        positions = _with(positions, pick)
        labeled[pick] = True
        queried.append(pick)
        seconds.append(time.perf_counter() - t0)
    return tuple(queried), seconds


# --- one oracle trial ----------------------------------------------------------------------

def replay(protocol: Protocol, X: np.ndarray, y: np.ndarray, spec: StrategySpec, trial_seed: int,
           jobs: int = 1) -> list[RoundRecord]:
    """One oracle trial, recorded round by round like any strategy's."""
    oracle = oracle_class(spec.implementation)
    params = oracle.params(spec.params)
    if protocol.batch_size != 1:
        raise AuditError(f"{spec.id} ({spec.implementation}) does not support batch size {protocol.batch_size}")
    split = make_split(protocol, y, trial_seed)
    if isinstance(split, str):
        raise AuditError(f"trial seed {trial_seed} is not valid for this protocol: {split}")
    train_rows = split.train
    budget = budget_for(protocol, split.pool.size)
    scorer = Scorer(protocol.task_model, subsystem_seed(protocol.seeds["model"], trial_seed, "model"),
                    _Features(protocol.scaling["task"], X, split), y[train_rows], y[split.test])
    with Evaluator(scorer, jobs) as evaluator:
        if oracle is BeamSearchOracle:
            queried, seconds = beam_search(scorer, evaluator, split.labeled.size, budget, params["beam_width"])
        else:
            rng = np.random.default_rng(subsystem_seed(protocol.seeds["strategy"], trial_seed, "strategy"))
            queried, seconds = greedy_search(scorer, evaluator, split.labeled.size, budget, params["tau"], rng)
        return records(evaluator, train_rows, split.labeled.size, queried, seconds, int(y.max()) + 1)


def records(evaluator: Evaluator, train_rows: np.ndarray, n_initial: int, queried: tuple[int, ...],
            seconds: list[float], n_classes: int) -> list[RoundRecord]:
    """The learning curve of a query sequence, fitted and scored as the runner does."""
    sets = [np.arange(n_initial)]
    for position in queried:
        sets.append(_with(sets[-1], position))
    out = []
    for round_no, (predicted, fit_seconds) in enumerate(evaluator.curve(sets)):
        scores = round_metrics(evaluator.scorer.y_test, predicted, n_classes)
        out.append(RoundRecord(round_no, sets[round_no].size,
                               (int(train_rows[queried[round_no - 1]]),) if round_no else (),
                               fit_seconds=fit_seconds, query_seconds=seconds[round_no - 1] if round_no else 0.0,
                               **scores))
    return out
