"""The one interface every query-strategy adapter implements.

A strategy object is cheap to construct and is used for one trial (one pool); its
``query`` follows scikit-activeml's contract: given the pool features ``X``, labels
``y`` with ``MISSING`` for unlabeled rows, a fitted query model (or None), a batch
size and the candidate rows in pool order, it returns the chosen row indices. An
adapter may keep per-pool state between the calls of one trial (a library's dataset
object, lowered graph densities, a bandit's weights), as the library itself does; the
sequence of answers over a trial depends only on the arguments and the strategy's seed.

No strategy sees a test label or a hidden pool label, except one that declares
``uses_test_labels`` (a reference oracle, which chooses by test accuracy): the runner
hands it the trial's :class:`TrialView` through :meth:`QueryStrategy.begin_trial`,
and the capability matrix and the reports mark it.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Callable, ClassVar, Protocol

import numpy as np

from audit.engine.models import ModelSpec
from audit.errors import AuditError, StrategyError

MISSING = -1
"""Label value of an unlabeled row in ``y`` (real labels are 0..K-1)."""


class DegenerateQueryWarning(UserWarning):
    """The strategy's scores are undefined in this trial (NaN, or a constant made of NaN), so
    its pick is an artefact of order: the first unlabeled entry, every round. Such a trial
    measures pool-order sampling, not the strategy. The runner records the warning with the
    trial, and reports count those trials per cell (audit/analysis/diagnose/degenerate.py);
    its message says why the scores are undefined."""


@contextmanager
def global_numpy_seed(seed: int):
    """Seed numpy's global RNG for one library call, then put the old state back (for libraries that
    draw from it: an adapter that uses this declares ``process_wide_state``)."""
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(state)


class FeatureViews(Protocol):
    """The task model's features: the train layout (the pool's rows) and the test rows,
    raw and in the task scaling ``scope`` (in scope "labeled" the scaled views change
    every round; the raw ones never do)."""

    scope: str
    X_train_raw: np.ndarray
    X_test_raw: np.ndarray
    X_train: np.ndarray
    X_test: np.ndarray

    def views_for(self, labeled_positions: np.ndarray, train_rows: np.ndarray | slice) -> tuple[np.ndarray, np.ndarray]:
        """(the train layout's ``train_rows``, the test rows) as the task model would see them
        with ``labeled_positions`` labeled (scope "labeled": the scaler refitted on those rows)."""


@dataclass(frozen=True)
class TrialView:
    """What the runner knows of a trial beyond the pool: the task model, its features and
    every label, the test rows' included. Given only to a strategy that declares
    ``uses_test_labels``, before the trial's first fit."""

    task_model: ModelSpec
    model_seed: int
    features: FeatureViews
    y_train: np.ndarray  # every train row's label, the unlabeled pool's included
    y_test: np.ndarray
    budget: int  # labels the trial will query
    jobs: int = 1  # processes the strategy may spread its test scoring over (its result must not change)


class QueryStrategy(ABC):
    """Base class of all adapters.

    Class attributes describe the implementation for the capability matrix:
    ``library`` (PyPI distribution name, or "native"), ``implements`` (what the
    library calls it), ``param_defaults`` (every parameter the adapter passes on, with
    its default; anything else is rejected rather than silently ignored),
    ``model_use`` ("none": model-free; "fitted": the runner passes a fitted query
    model; "own": the library trains the query model itself from the spec it is given),
    ``batch`` (whether batch_size > 1 is supported) and ``uses_test_labels`` (the
    strategy chooses by the test labels: a reference bound, not a query strategy; only
    such a strategy is given the trial's :class:`TrialView`).

    ``distributions``: further PyPI distributions (beyond ``library`` and the numeric stack)
    whose version can change the adapter's answers; the store and the gate fingerprint them
    (:mod:`audit.engine.environment`). ``process_wide_state``: the adapter changes state of the
    whole process while it answers (numpy's global RNG, the stdout file descriptor), so it
    must not share a process with other threads running trials (a Dask worker refuses it).
    """

    library: ClassVar[str] = "native"
    implements: ClassVar[str] = ""
    param_defaults: ClassVar[dict[str, Any]] = {}
    model_use: ClassVar[str] = "none"
    batch: ClassVar[bool] = True
    uses_test_labels: ClassVar[bool] = False
    distributions: ClassVar[tuple[str, ...]] = ()
    process_wide_state: ClassVar[bool] = False

    def __init__(self, query_model: ModelSpec | None = None, random_state: int | None = None, **params: Any):
        unknown = set(params) - set(self.param_defaults)
        if unknown:
            raise AuditError(
                f"{type(self).__name__} does not use parameter(s) {', '.join(sorted(unknown))}; "
                f"it takes: {', '.join(self.param_defaults) or 'none'}"
            )
        if self.model_use == "own" and query_model is None:
            raise AuditError(f"{type(self).__name__} needs a query model spec")
        self.query_model = query_model
        self.random_state = random_state
        self.params = {**self.param_defaults, **params}

    file_labels: dict[int, int] | None = None
    """Class code -> the label value as the data file spells it, set by the runner when the
    protocol sends a library the file's own values (``[labels] libact_binary = "file"``); None:
    the adapter's own convention."""

    @classmethod
    def resolve_defaults(cls, params: dict[str, Any], era: str) -> dict[str, Any]:
        """``params`` with the models they name (a committee, a bandit's arms, a KMeans)
        given the scikit-learn era's defaults for what they leave unset (the protocol knob
        ``[query_models] defaults``); the query model itself is resolved by the runner.
        Unchanged for an adapter that names no model in its parameters."""
        return params

    def get_params(self) -> dict[str, Any]:
        """Every parameter in effect, defaults included (sklearn-style introspection)."""
        params = dict(self.params)
        if self.query_model is not None:
            params["query_model"] = str(self.query_model)
        return params

    @classmethod
    def library_version(cls) -> str:
        """What answers the queries and its version: the AL library, al-audit's own code, or
        a plug-in (a class outside ``adapters``) with the distribution that installed it."""
        if cls.library == "native" and not cls.__module__.startswith("adapters."):
            top = cls.__module__.split(".")[0]
            dists = metadata.packages_distributions().get(top, [])
            installed = f", {dists[0]} {metadata.version(dists[0])}" if dists else ""
            return f"plug-in {cls.__module__}:{cls.__qualname__}{installed}"
        if cls.library == "native":
            from audit.version import __version__

            return f"native (al-audit {__version__})"
        try:
            return f"{cls.library} {metadata.version(cls.library)}"
        except metadata.PackageNotFoundError:
            return f"{cls.library} (not installed)"

    @classmethod
    def availability(cls) -> str | None:
        """None when the strategy can run here, else the reason it cannot."""
        return None

    @classmethod
    def capability_note(cls) -> str | None:
        """What a reader of the capability matrix and the reports must know about how the
        strategy runs here (e.g. LAL's training data: the authors' file or a regenerated one)."""
        return None

    @classmethod
    def prepare(cls, params: dict[str, Any], log: Callable[[str], None]) -> None:
        """Do the one-time work this machine needs before trials with ``params`` can run (LAL's
        regenerated training data), telling the user through ``log`` before anything long.
        The runner calls it before a trial's clock and time limit start, and the drivers once
        before any trial, so no trial's seconds or time limit include it. Cheap when done;
        nothing to do by default."""

    def begin_trial(self, view: TrialView) -> None:
        """Take the trial's test view; the runner calls this only if ``uses_test_labels``."""
        raise NotImplementedError(f"{type(self).__name__} does not use the test labels")

    def query(
        self,
        X: np.ndarray,
        y: np.ndarray,
        model: Any,
        batch_size: int,
        candidates: np.ndarray,
        rng: np.random.Generator | None = None,
    ) -> np.ndarray:
        """Indices into ``X`` (a subset of ``candidates``) to label next.

        Returns ``min(batch_size, len(candidates))`` distinct candidates; the contract is
        checked here, once for every adapter, and a breach raises StrategyError.
        """
        candidates = np.asarray(candidates, dtype=np.int64)
        batch = min(int(batch_size), candidates.size)
        if batch < 1:
            raise StrategyError("nothing to query: empty candidate set or batch size below 1")
        picked = np.asarray(self._select(X, y, model, batch, candidates, rng), dtype=np.int64).ravel()
        if picked.size != batch or np.unique(picked).size != batch:
            raise StrategyError(
                f"{type(self).__name__} returned {picked.size} indices ({np.unique(picked).size} distinct), "
                f"expected {batch}"
            )
        if not np.all(np.isin(picked, candidates)):
            raise StrategyError(f"{type(self).__name__} returned an index that is not an unlabeled candidate")
        return picked

    @abstractmethod
    def _select(
        self,
        X: np.ndarray,
        y: np.ndarray,
        model: Any,
        batch_size: int,
        candidates: np.ndarray,
        rng: np.random.Generator | None,
    ) -> np.ndarray:
        """The adapter's work: ``batch_size`` (<= len(candidates)) distinct candidates."""
