"""Reference oracles: "strategies" that choose their queries by the test labels.

An oracle fits the task model on candidate labeled sets and scores them on the test
rows, so it sees what no query strategy may: the test labels and the hidden labels of the
pool. It declares ``uses_test_labels``, so the runner hands it the trial's
:class:`~adapters.base.TrialView` (task model, model seed, features, every label, budget)
through ``begin_trial`` and then queries it like any strategy. At its first query an
oracle searches its whole query sequence with that view (the split, seeds, task model and
features are the runner's); then it answers the sequence one query at a time, and the
learning curve is the runner's own fits along it. Reports mark oracles "(oracle)": they
are reference bounds, not query strategies. They import no AL library.

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
``tau`` distinct candidates uniformly (the strategy's RNG stream, the one the runner
passes to ``query``), keeps the first one whose addition gives the highest test accuracy
if that beats the current model's, and otherwise falls back to margin sampling with the
current task model over the whole pool (ties to the earlier pool position).

Speed without changing a result: a child set reached from several beams is evaluated
once; an SVC task model is fitted and applied through libsvm with exactly the arguments
SVC.fit and SVC.predict pass (scikit-learn's validation around them is most of the cost
on small sets; the kernel coefficient is LeanSVC's, :func:`audit.fast.svc.libsvm_gamma`);
the test set is predicted in one call (a binary model's labels through BLAS where their
signs are certain, :func:`audit.fast.svc.binary_codes`) and only correct counts are kept; with
``TrialView.jobs`` > 1 the candidates of a round are shared between this process and
jobs - 1 worker processes (:mod:`audit.engine.process_team`). tests/test_oracles.py checks the
result against a plain reference implementation (tests/oracle_reference.py).
"""
from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass
from typing import Any

import numpy as np

from adapters.base import MISSING, FeatureViews, QueryStrategy, TrialView
from audit.engine.metrics import predicted_labels
from audit.engine.models import ModelSpec, margin_scores
from audit.engine.process_team import SharedRounds
from audit.errors import AuditError, StrategyError
from audit.fast.svc import LeanSVC, binary_codes, libsvm_gamma, libsvm_predict_codes

# --- fitting and scoring one labeled set ------------------------------------------------

def _libsvm_arguments(estimator: Any) -> dict[str, Any] | None:
    """The libsvm arguments SVC.fit passes, when calling libsvm directly reproduces SVC
    exactly (a plain SVC: built-in kernel, no class weights, no probabilities, no
    tie-breaking); None otherwise."""
    from sklearn.svm import SVC
    from sklearn.utils import check_random_state

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

    def __init__(self, spec: ModelSpec, model_seed: int, features: FeatureViews, y_train: np.ndarray,
                 y_test: np.ndarray):
        self.spec, self.model_seed, self.features = spec, model_seed, features
        self.y_train, self.y_test = y_train, y_test
        self.libsvm = _libsvm_arguments(spec.build(model_seed))
        # SVC's label encoding (np.unique + inverse) computed once; it holds for every labeled
        # set with all the train rows' classes (every set grown from the initial labels).
        self.classes, self.codes = np.unique(y_train, return_inverse=True)

    def fit(self, positions: np.ndarray) -> tuple[Any, np.ndarray, np.ndarray]:
        """The runner's fit: (fitted scikit-learn model, train rows, test rows), the rows in the
        task scaling for this labeled set (features.views_for: in scope "labeled" the scaler refitted)."""
        X_train, X_test = self.features.views_for(positions, slice(None))
        model = self.spec.build(self.model_seed).fit(X_train[positions], self.y_train[positions])
        return model, X_train, X_test

    def predict(self, positions: np.ndarray) -> np.ndarray:
        """Test-set predictions of the model fitted on ``positions`` (ascending)."""
        if self.libsvm is None:
            model, _, X_test = self.fit(positions)
            return predicted_labels(model.predict(X_test), X_test.shape[0])
        X_labeled, X_test = self.features.views_for(positions, positions)
        codes = self.codes[positions]
        if np.count_nonzero(np.bincount(codes, minlength=self.classes.size)) == self.classes.size:
            classes = self.classes
        else:
            classes, codes = np.unique(self.y_train[positions], return_inverse=True)
        return _libsvm_predict(self.libsvm, _float64(X_labeled), codes.astype(np.float64), classes, _float64(X_test))

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
    gamma = libsvm_gamma(args["gamma"], X)
    _libsvm.set_verbosity_wrap(args["verbose"])  # process-wide in libsvm: a fresh worker would print
    fitted = _libsvm.fit(
        X, codes, svm_type=0, sample_weight=np.empty(0),
        class_weight=np.ones(classes.size), kernel=args["kernel"], C=args["C"], nu=args["nu"],
        probability=False, degree=args["degree"], shrinking=args["shrinking"], tol=args["tol"],
        cache_size=args["cache_size"], coef0=args["coef0"], gamma=gamma, epsilon=args["epsilon"],
        max_iter=args["max_iter"], random_seed=args["random_seed"])
    dual_coef, intercept = fitted[3], fitted[4]
    if not (np.isfinite(intercept).all() and np.isfinite(dual_coef).all()):
        raise ValueError("The dual coefficients or intercepts are not finite. The input data may contain "
                         "large values and need to be preprocessed.")
    if classes.size == 2:
        return classes.take(binary_codes(args, fitted, X_test, gamma))
    return classes.take(np.asarray(libsvm_predict_codes(args, fitted, X_test, gamma), dtype=np.intp))


def _with(positions: np.ndarray, position: int) -> np.ndarray:
    """``positions`` (ascending) plus one more, still ascending (np.insert costs 20x more)."""
    k = int(np.searchsorted(positions, position))
    out = np.empty(positions.size + 1, dtype=positions.dtype)
    out[:k], out[k], out[k + 1:] = positions[:k], position, positions[k:]
    return out


def _count(scorer: Scorer, parents: list[np.ndarray], pairs: np.ndarray) -> np.ndarray:
    """Correct test predictions of each child set parents[b] + {c}, for (b, c) in pairs."""
    return np.array([scorer.correct(_with(parents[b], c)) for b, c in pairs.tolist()], dtype=np.int64)


class Evaluator(SharedRounds):
    """Correct test counts of many child sets, here alone (jobs = 1) or shared with jobs - 1
    team workers (audit/engine/process_team.py); in the order of ``pairs`` whatever ``jobs`` is."""

    def counts(self, parents: list[np.ndarray], pairs: np.ndarray) -> np.ndarray:
        return np.concatenate(self.map_chunks(_count, (parents,), pairs))


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


def beam_search(scorer: Scorer, evaluator: Evaluator, initial: np.ndarray, budget: int,
                beam_width: int) -> tuple[int, ...]:
    """Train positions of the best sequence from the labeled positions ``initial`` (ascending), in query order."""
    beams = [Beam(initial, (), 0)]
    for _ in range(budget):
        beams = next_beams(beams, evaluator, scorer.y_train.size, beam_width)
    best = max(range(len(beams)), key=lambda i: (beams[i].score, -i))
    return beams[best].queried


# --- greedy oracle -----------------------------------------------------------------------

def greedy_search(scorer: Scorer, evaluator: Evaluator, initial: np.ndarray, budget: int, tau: int,
                  rng: np.random.Generator) -> tuple[int, ...]:
    """CDALBench Algorithm 3: train positions in query order, from the labeled positions ``initial`` (ascending)."""
    positions = initial
    labeled = np.zeros(scorer.y_train.size, dtype=bool)
    labeled[positions] = True
    correct = scorer.correct(positions)
    queried = []
    for _ in range(budget):
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
    return tuple(queried)


# --- the oracles as strategies -------------------------------------------------------------

class Oracle(QueryStrategy):
    """A query sequence searched with the trial's test view at the first query, then
    answered one query at a time."""

    uses_test_labels = True
    batch = False  # one query a round

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        for name, value in self.params.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise AuditError(f"{type(self).__name__} parameter {name} must be a positive integer, not {value!r}")
        self._view: TrialView | None = None
        self._sequence: tuple[int, ...] | None = None
        self._answered = 0

    def begin_trial(self, view: TrialView) -> None:
        self._view = view
        self._scorer = Scorer(view.task_model, view.model_seed, view.features, view.y_train, view.y_test)
        self._sequence, self._answered = None, 0

    @abstractmethod
    def _search(self, evaluator: Evaluator, initial: np.ndarray, rng: np.random.Generator) -> tuple[int, ...]:
        """The train positions to query, in order, from the labeled positions ``initial``."""

    def _select(self, X, y, model, batch_size, candidates, rng):
        if self._view is None:
            raise StrategyError(f"{type(self).__name__} chooses by the test labels: it needs the trial's "
                                "test view (begin_trial) before its first query")
        if batch_size > 1:
            raise StrategyError(f"{type(self).__name__} answers one query a round, not {batch_size}")
        if not np.array_equal(np.sort(candidates), np.flatnonzero(y == MISSING)):
            raise StrategyError(f"{type(self).__name__} searches every unlabeled row: it cannot choose "
                                "from a subset of them")
        if self._sequence is None:
            rng = rng if rng is not None else np.random.default_rng(self.random_state)
            with Evaluator(self._scorer, self._view.jobs) as evaluator:
                self._sequence = self._search(evaluator, np.flatnonzero(y != MISSING), rng)
        if self._answered == len(self._sequence):
            raise StrategyError(f"{type(self).__name__} was asked for more than the trial's budget "
                                f"of {self._view.budget} queries")
        self._answered += 1
        return np.array([self._sequence[self._answered - 1]])


class BeamSearchOracle(Oracle):
    """The beam-search oracle of zhan2021 Section 3, as lu2023 re-ran it."""

    implements = "beam-search oracle (zhan2021 Sec. 3), scored by test accuracy"
    param_defaults = {"beam_width": 5}

    def _search(self, evaluator, initial, rng):
        return beam_search(self._scorer, evaluator, initial, self._view.budget, self.params["beam_width"])


class GreedyOracle(Oracle):
    """The greedy oracle of CDALBench Algorithm 3."""

    implements = "greedy oracle (CDALBench Alg. 3), scored by test accuracy"
    param_defaults = {"tau": 20}

    def _search(self, evaluator, initial, rng):
        return greedy_search(self._scorer, evaluator, initial, self._view.budget, self.params["tau"], rng)


STRATEGIES: dict[str, type[Oracle]] = {"bso": BeamSearchOracle, "greedy": GreedyOracle}
