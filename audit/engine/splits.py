"""The RNG contract: trial seed -> split, initial labeled set, pool order, and seeds.

Each subsystem (split, initial set, strategy, model) draws from its own generator, so a
change in one (say, a strategy that consumes more random numbers) never moves another.
The "lu2023" split method replicates the released code's calls exactly: trial seed s
gives the same train/test split and initial set as that code.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from audit.engine.preprocess import prepare
from audit.engine.synthetic import Draw, draw
from audit.errors import AuditError
from audit.protocols import OPTIONAL_SEEDS, SUBSYSTEMS, Protocol, SplitSpec

MAX_REDRAWS = 1000


def subsystem_seed(source: int | str, trial_seed: int, subsystem: str) -> int:
    """Seed of one subsystem: fixed, the trial seed itself, or an independent child stream."""
    if isinstance(source, int):
        return source
    if source == "trial":
        return trial_seed
    child = np.random.SeedSequence([trial_seed, SUBSYSTEMS.index(subsystem)])
    return int(child.generate_state(1)[0])


def data_seed(protocol: Protocol, trial_seed: int) -> int:
    """s_D: the seed a generated data set is drawn with (the trial seed unless the protocol says)."""
    return subsystem_seed(protocol.seeds.get("data", OPTIONAL_SEEDS["data"]), trial_seed, "data")


@dataclass(frozen=True)
class TrialSplit:
    """Row indices of the data set: test rows, initial labeled rows, the pool in pool order,
    and the validation rows (empty unless the protocol sets [split] validation_ratio)."""

    trial_seed: int
    test: np.ndarray
    labeled: np.ndarray
    pool: np.ndarray
    validation: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))

    @property
    def train(self) -> np.ndarray:
        """Train rows as the runner lays them out: initial labels first, then the pool."""
        return np.concatenate([self.labeled, self.pool])


def _has_classes(y: np.ndarray, rows: np.ndarray, n_classes: int, minimum: int) -> bool:
    counts = np.bincount(y[rows], minlength=n_classes)
    return bool(np.all(counts >= minimum))


def make_split(protocol: Protocol, y: np.ndarray, trial_seed: int, given: Draw | None = None) -> TrialSplit | str:
    """The trial's split, or the reason the seed is skipped. ``given``: the draw of a
    generated data set for this trial (its test rows are the split's under method "given")."""
    spec: SplitSpec = protocol.split
    if spec.method == "zhan2021-released":
        return _released_split(spec, y, trial_seed)
    if spec.method == "alpbench":
        return _alpbench_split(protocol, y, trial_seed)
    n_classes = int(y.max()) + 1
    split_rng = np.random.default_rng(subsystem_seed(protocol.seeds["split"], trial_seed, "split"))
    if spec.method == "given":
        if given is None:
            return "the split is the data set's own test rows, and this data set has none"
        train, test = given.train.copy(), given.test.copy()
    else:
        rows = np.arange(y.size)
        split_rng.shuffle(rows)
        n_train = int(y.size * (1 - spec.test_ratio))
        train, test = rows[:n_train], rows[n_train:]
    validation = np.empty(0, dtype=np.int64)
    if protocol.validation_ratio:  # drawn from the train rows by the split seed, before the initial set
        order = split_rng.permutation(train.size)
        cut = int(train.size * protocol.validation_ratio)
        validation, train = train[order[:cut]], train[np.sort(order[cut:])]
    n_train = train.size
    if not _has_classes(y, train, n_classes, 1):
        return "the train split misses a class"
    if spec.initial_labels >= n_train:
        return f"{spec.initial_labels} initial labels leave no pool in a train split of {n_train}"
    initial_rng = np.random.default_rng(subsystem_seed(protocol.seeds["initial"], trial_seed, "initial"))
    order = train.copy()
    if spec.initial_rule == "per-class":
        initial_rng.shuffle(order)
        labeled = _first_per_class(y, order, n_classes, spec.initial_labels)
        if labeled is None:
            return f"the train split has fewer than {spec.initial_labels} of some class"
        pool = order[~np.isin(order, labeled)]
        return TrialSplit(trial_seed, test, labeled, np.sort(pool) if spec.pool_order == "file" else pool, validation)
    for _ in range(MAX_REDRAWS):
        initial_rng.shuffle(order)
        labeled, pool = order[: spec.initial_labels], order[spec.initial_labels :]
        if _has_classes(y, labeled, n_classes, spec.min_per_class):
            break
        if spec.initial_rule == "skip-seed":
            return f"the initial labels have fewer than {spec.min_per_class} of some class"
    else:
        return f"no initial set with {spec.min_per_class} per class in {MAX_REDRAWS} draws"
    if spec.pool_order == "file":
        pool = np.sort(pool)
    return TrialSplit(trial_seed, test, labeled.copy(), pool.copy(), validation)


def _first_per_class(y: np.ndarray, order: np.ndarray, n_classes: int, per_class: int) -> np.ndarray | None:
    """The first ``per_class`` rows of each class in ``order``, in that order (CDALBench's seed
    set: walk the shuffled train rows, keep a row while its class is short); None if a class is short."""
    taken = np.zeros(n_classes, dtype=int)
    picked = []
    for row in order:
        if taken[y[row]] < per_class:
            taken[y[row]] += 1
            picked.append(row)
            if len(picked) == per_class * n_classes:
                return np.array(picked, dtype=order.dtype)
    return None


def _alpbench_split(protocol: Protocol, y: np.ndarray, trial_seed: int) -> TrialSplit | str:
    """ALPBench 0.1.2's ``create_dataset_split``: scikit-learn's stratified ``train_test_split``
    of all rows (test share ``test_ratio``, the split seed), then of the train rows into the
    initial labeled set and the pool (the initial seed); a class missing from the labeled set
    gets one pool row of it, drawn by ``np.random.seed(initial seed); np.random.choice``, as
    there. The pool is the other train rows in row order (ALPBench's mask over the rows)."""
    from sklearn.model_selection import train_test_split

    spec = protocol.split
    split_seed = subsystem_seed(protocol.seeds["split"], trial_seed, "split")
    initial_seed = subsystem_seed(protocol.seeds["initial"], trial_seed, "initial")
    classes = np.unique(y)
    rows = np.arange(y.size)
    try:
        train, test = train_test_split(rows, test_size=spec.test_ratio, random_state=split_seed, stratify=y)
        n_initial = protocol.initial_for(classes.size)
        if n_initial >= train.size:
            return f"{n_initial} initial labels leave no pool in a train split of {train.size}"
        labeled, unlabeled = train_test_split(train, test_size=1 - n_initial / train.size,
                                              random_state=initial_seed, stratify=y[train])
    except ValueError as exc:  # a class too small to stratify
        return f"the stratified split fails: {str(exc).splitlines()[0]}"
    if spec.initial_rule == "top-up":
        for label in classes:
            if label not in y[labeled]:
                draw = np.random.RandomState(initial_seed).choice(np.flatnonzero(y[unlabeled] == label))
                labeled = np.append(labeled, unlabeled[draw])
    if not _has_classes(y, labeled, int(y.max()) + 1, spec.min_per_class):
        return f"the initial labels have fewer than {spec.min_per_class} of some class"
    pool = np.setdiff1d(train, labeled)  # sorted: row order
    return TrialSplit(trial_seed, np.asarray(test), np.asarray(labeled), pool)


RELEASED_SEED = 4666


class _ReleasedSequence:
    """zhan2021's released split calls, replayed in sequence from one global ``random.seed(4666)``.

    Our best reading of that code (we cannot run it), per trial k = 0, 1, ...:
    ``test = random.sample(range(n), int(test_ratio * n))``; train = the other rows in file
    order; ``initial = random.sample(train, initial_labels)``, redrawn until every class has
    ``min_per_class`` rows; pool = the rest of train in file order. Trial k therefore
    depends on every draw of trials 0..k-1, so the splits are computed once, in order,
    and kept (extended lazily) instead of re-simulated per trial.
    """

    def __init__(self, y: np.ndarray, test_ratio: float, initial_labels: int, min_per_class: int):
        self.y, self.test_ratio, self.initial_labels, self.min_per_class = y, test_ratio, initial_labels, min_per_class
        self.rng = random.Random(RELEASED_SEED)
        self.splits: list[TrialSplit | str] = []
        self.redraws: list[int] = []  # extra initial draws per trial, for the diagnosis

    def _next(self, trial: int) -> TrialSplit | str:
        y, n = self.y, self.y.size
        n_classes = int(y.max()) + 1
        test = self.rng.sample(range(n), int(self.test_ratio * n))
        in_test = set(test)
        train = [i for i in range(n) if i not in in_test]
        for redraw in range(MAX_REDRAWS):
            labeled = self.rng.sample(train, self.initial_labels)
            if _has_classes(y, np.array(labeled), n_classes, self.min_per_class):
                self.redraws.append(redraw)
                break
        else:
            self.redraws.append(MAX_REDRAWS)
            return f"no initial set with {self.min_per_class} per class in {MAX_REDRAWS} draws"
        chosen = set(labeled)
        pool = [i for i in train if i not in chosen]
        return TrialSplit(trial, np.array(test), np.array(labeled), np.array(pool))

    def get(self, trial: int) -> TrialSplit | str:
        while len(self.splits) <= trial:
            self.splits.append(self._next(len(self.splits)))
        return self.splits[trial]


@lru_cache(maxsize=16)
def _released_sequence(y_bytes: bytes, test_ratio: float, initial_labels: int, min_per_class: int) -> _ReleasedSequence:
    return _ReleasedSequence(np.frombuffer(y_bytes, dtype=np.int64), test_ratio, initial_labels, min_per_class)


def released_redraws(spec: SplitSpec, y: np.ndarray, trial_seed: int) -> int:
    """How many initial sets trial k of the released sequence drew and threw away."""
    sequence = _released_sequence(np.asarray(y, dtype=np.int64).tobytes(), spec.test_ratio, spec.initial_labels,
                                  spec.min_per_class if spec.initial_rule == "redraw" else 0)
    sequence.get(trial_seed)
    return sequence.redraws[trial_seed]


def _released_split(spec: SplitSpec, y: np.ndarray, trial_seed: int) -> TrialSplit | str:
    """Trial k of the released sequence (seeds below 0 do not exist in it)."""
    if spec.initial_labels >= int(y.size * (1 - spec.test_ratio)):
        return f"{spec.initial_labels} initial labels leave no pool"
    minimum = spec.min_per_class if spec.initial_rule == "redraw" else 0
    sequence = _released_sequence(np.asarray(y, dtype=np.int64).tobytes(), spec.test_ratio,
                                  spec.initial_labels, minimum)
    split = sequence.get(trial_seed)
    if isinstance(split, str):
        return split
    if spec.initial_rule == "skip-seed" and not _has_classes(y, split.labeled, int(y.max()) + 1, spec.min_per_class):
        return f"the initial labels have fewer than {spec.min_per_class} of some class"
    if spec.pool_order == "shuffled":  # a counterfactual: the released draws with a shuffled pool
        pool = np.random.default_rng([RELEASED_SEED, trial_seed]).permutation(split.pool)
        return TrialSplit(trial_seed, split.test, split.labeled, pool)
    return split


def trial_rows(protocol: Protocol, X: np.ndarray, y: np.ndarray, generator: str | None, name: str,
               trial_seed: int, given: Draw | None = None) -> tuple[np.ndarray, np.ndarray, Draw | None]:
    """(X, y, draw) one trial sees: a generated set's (``generator``) draw for the trial's data
    seed; a train/test set's own split ``given`` (its rows are ``X``, ``y``); a file's own rows
    ``X``, ``y`` after the protocol's preprocessing (``[data] preprocess``, audit.engine.preprocess),
    with no draw. The planner and the runner both take the rows here."""
    if not generator and given is None:
        X, y = prepare(protocol.preprocess, X, y, name)
        return X, y, None
    if protocol.preprocess != "none":  # it may drop rows, and the draw's test rows are indices
        kind = "a generated data set" if generator else "split into published train and test files"
        raise AuditError(f"protocol '{protocol.name}' preprocesses files ([data] preprocess = "
                         f"\"{protocol.preprocess}\"); '{name}' is {kind}")
    drawn = given if given is not None else draw(generator, data_seed(protocol, trial_seed))
    return drawn.X, drawn.y, drawn


def seed_split(protocol: Protocol, data, trial_seed: int) -> tuple[np.ndarray, np.ndarray, TrialSplit | str]:
    """(X, y, split) of one trial on a loaded data set (:func:`trial_rows`, then the split)."""
    X, y, drawn = trial_rows(protocol, data.X, data.y, data.info.generator, data.info.name, trial_seed, data.given)
    return X, y, make_split(protocol, y, trial_seed, drawn)


def plan_seeds(protocol: Protocol, y: np.ndarray, n_trials: int | None = None,
               data=None) -> tuple[list[int], list[tuple[int, str]]]:
    """The trial seeds a replay uses (the first valid ones) and the seeds skipped, with reasons.

    Seeds are tried from 0 through the protocol's candidate range (lu2023: 0..149); only
    when more trials are asked for than the range holds does it widen, to twice that number.

    Validity depends only on the seed, never on a strategy, so every strategy of a
    trial sees the same split. ``data`` (a loaded Dataset): a generated set's seeds are
    checked on their own draws.
    """
    wanted, candidates = protocol.trials.for_size(y.size)
    wanted = wanted if n_trials is None else n_trials
    seeds: list[int] = []
    skipped: list[tuple[int, str]] = []
    seed, last = 0, candidates if wanted <= candidates else 2 * wanted
    while len(seeds) < wanted and seed < last:
        outcome = make_split(protocol, y, seed) if data is None else seed_split(protocol, data, seed)[2]
        if isinstance(outcome, str):
            skipped.append((seed, outcome))
        else:
            seeds.append(seed)
        seed += 1
    return seeds, skipped
