"""ALPBench 0.1.2 query strategies (the optional extra ``alpbench``: ``uv run --extra alpbench``).

ALPBench's contract is ``QueryStrategy.sample(learner, X_l, y_l, X_u, num_queries)``: a
learner already fitted on the labeled rows, the labeled rows in the order they were labeled
(the initial set, then each batch as it was queried), the unlabeled candidates in pool order,
and the answer as indices into ``X_u``. This adapter hands it exactly that: it keeps the order
in which the rows of its trial were labeled, and maps the answer back to rows of ``X``.

ALPBench seeds each strategy with one integer (``seed``; its default setup uses 42 for all),
but several strategies also draw from numpy's global RNG (PowerBALD's Gumbel noise, the
ensembles' member seeds, KMeans without a ``random_state``). So each query runs with the
global RNG seeded from the trial's strategy generator and restored afterwards: the picks
depend only on the arguments and the seed (``process_wide_state``).

The learner is the query model the runner fits (``query_model = "task"`` in the ALPBench
protocols: the pipeline's own learner). ALPBench dispatches on the learner's class name
(``sklearn.ensemble._forest.RandomForestClassifier``, ``xgboost.sklearn.XGBClassifier``, ...),
so the protocols name scikit-learn classes by class path, and a learner fitted through one of
al-audit's fast paths (``sklearn.ensemble.RandomForestClassifier`` builds a LeanForest) is
handed over as its scikit-learn class (``audit.fast.policy.public_view``), a copy whose repeated
fits on the same rows are skipped (``learner_for_alpbench``).
"""
from __future__ import annotations

import copy
import hashlib
from typing import Any

import numpy as np

from adapters.base import MISSING, QueryStrategy, global_numpy_seed
from audit.errors import StrategyError
from audit.extras import missing
from audit.fast.policy import public_view

EXTRA = "alpbench"
"""The pyproject optional extra that installs this library (``uv run --extra alpbench``)."""

try:
    from alpbench.pipeline import QueryStrategy as _qs
except ImportError as exc:  # reported by adapters.unavailable_reason for every strategy here
    raise ImportError(missing(EXTRA, "the ALPBench adapter") or f"alpbench is not importable ({exc})") from exc


class AlpbenchStrategy(QueryStrategy):
    """Shared plumbing: one ALPBench strategy object per trial, asked through ``sample``."""

    library = "alpbench"
    distributions = ("scikit-activeml", "xgboost", "catboost")
    process_wide_state = True
    alpbench_class: str = ""
    unavailable_because: str | None = None  # a reason this strategy cannot meet the contract here
    min_rows: int = 1  # labeled + candidate rows the library needs to answer at all

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        seed = 0 if self.random_state is None else int(self.random_state)
        self._fallback_rng = np.random.default_rng(seed)
        self._strategy = getattr(_qs, self.alpbench_class)(seed, **self.params)
        self._labeled_order: list[int] = []  # rows of X in the order they were labeled

    @classmethod
    def availability(cls) -> str | None:
        if not hasattr(_qs, cls.alpbench_class):
            return f"alpbench has no {cls.alpbench_class}"
        return cls.unavailable_because

    def _labeled_rows(self, y: np.ndarray) -> np.ndarray:
        """Labeled rows as ALPBench holds them: the order so far, then any newly labeled rows
        (the initial set, or rows labeled by someone else) in ascending order."""
        known = set(np.flatnonzero(y != MISSING).tolist())
        order = [row for row in self._labeled_order if row in known]
        order += sorted(known.difference(order))
        self._labeled_order = order
        return np.asarray(order, dtype=np.int64)

    def _select(self, X, y, model, batch_size, candidates, rng):
        y = np.asarray(y, dtype=np.int64)
        if y.shape[0] != X.shape[0]:
            raise StrategyError("y must have one entry per row of X")
        labeled = self._labeled_rows(y)
        if labeled.size == 0:
            raise StrategyError(f"alpbench {self.implements} needs at least one labeled row")
        X = np.asarray(X, dtype=float)
        candidates = np.asarray(candidates, dtype=np.int64)
        if batch_size >= candidates.size:  # the answer is forced (ALPBench's pipeline takes them all too)
            self._labeled_order += candidates.tolist()
            return candidates
        if labeled.size + candidates.size < self.min_rows:
            raise StrategyError(f"alpbench {self.implements} needs at least {self.min_rows} labeled and candidate "
                                f"rows, got {labeled.size + candidates.size}")
        seed = int((rng if rng is not None else self._fallback_rng).integers(2**31 - 1))
        with global_numpy_seed(seed):
            answer = self._strategy.sample(learner=learner_for_alpbench(model), X_l=X[labeled], y_l=y[labeled],
                                           X_u=X[candidates], num_queries=int(batch_size))
        if answer is None:  # TypicalCluster ends without an answer when too few clusters are uncovered
            raise StrategyError(f"alpbench {self.implements} returned no rows (too few uncovered clusters)")
        picked = candidates[np.asarray(answer, dtype=np.int64).ravel()]
        self._labeled_order += picked.tolist()
        return picked


def learner_for_alpbench(model: Any) -> Any:
    """The fitted learner as ALPBench gets it: a shallow copy of ``model`` (the runner's fit is
    not refitted in place), of the scikit-learn class a fast path stands in for (``public_view``:
    ALPBench dispatches on class names), whose ``fit`` skips a repeat (``_FitSkippingRepeats``)
    when the fit is a function of the parameters and inputs: a scikit-learn estimator without a
    warm start whose ``random_state``, if it has one, is an integer."""
    if model is None:
        return None
    learner = public_view(model)
    learner = copy.copy(model) if learner is model else learner
    params = learner.get_params(deep=False) if hasattr(learner, "get_params") else {}
    seeded = isinstance(params.get("random_state", 0), (int, np.integer))
    if type(learner).__module__.startswith("sklearn.") and seeded and not params.get("warm_start", False):
        learner.fit = _FitSkippingRepeats(learner)
    return learner


class _FitSkippingRepeats:
    """A learner's ``fit`` that skips a fit on exactly the rows and labels of its previous fit.

    ALPBench's ``Ensemble`` fits a learner it has no branch for (MLP, SVC) ``ensemble_size``
    times on the same rows; each fit of a deterministic learner (one thread per trial, see
    ``learner_for_alpbench``) leaves the same model, so the first is kept."""

    def __init__(self, learner: Any):
        self._learner = learner
        self._fitted_on: tuple | None = None

    def __call__(self, X, y, **kwargs):
        inputs = None if kwargs else tuple((a.shape, a.dtype.str, hashlib.sha256(np.ascontiguousarray(a).data).digest())
                                           for a in (np.asarray(X), np.asarray(y)))
        if inputs is None or inputs != self._fitted_on:
            self._fitted_on = None
            type(self._learner).fit(self._learner, X, y, **kwargs)
            self._fitted_on = inputs
        return self._learner


def _strategy(key: str, alpbench_class: str, model_use: str, ensemble: bool = False,
              unavailable_because: str | None = None, min_rows: int = 1) -> type[AlpbenchStrategy]:
    """The adapter class of one ALPBench strategy (they differ only in these attributes)."""
    return type(f"Alpbench_{key}", (AlpbenchStrategy,), {
        "__doc__": f"ALPBench's ``{alpbench_class}`` (its default-setup name ``{key}``).",
        "__module__": __name__,
        "implements": alpbench_class,
        "alpbench_class": alpbench_class,
        "model_use": model_use,
        "param_defaults": {"ensemble_size": 10} if ensemble else {},
        "unavailable_because": unavailable_because,
        "min_rows": min_rows,
    })


_RANDOM_MARGIN_DUPLICATES = (
    "ALPBench 0.1.2's RandomMarginQueryStrategy draws its random half and its margin half independently, "
    "so one batch can name a row twice; al-audit's contract refuses a batch with a repeated row")

_EPISTEMIC_CLASSES = (
    "ALPBench 0.1.2 wraps the learner in scikit-activeml's SklearnClassifier without its classes, and "
    "scikit-activeml 1.0.1's EpistemicUncertaintySampling reads them (TypeError: len(None)); it supports only "
    "logistic regression and Parzen-window classifiers besides")

STRATEGIES: dict[str, type[QueryStrategy]] = {
    # the names of ALPBench's default setup (alpbench/evaluation/experimenter/DefaultSetup.py), 23 strategies
    key: _strategy(key, *spec) for key, spec in {
        "random": ("RandomQueryStrategy", "none"),
        "random_margin": ("RandomMarginQueryStrategy", "fitted", False, _RANDOM_MARGIN_DUPLICATES),
        # (labeled + candidates) // 10 agglomerative clusters: fewer than 10 rows give none
        "cluster_margin": ("ClusterMarginQueryStrategy", "fitted", False, None, 10),
        "core_set": ("CoreSetQueryStrategy", "none"),
        "epistemic": ("EpistemicUncertaintyQueryStrategy", "fitted", False, _EPISTEMIC_CLASSES),
        "entropy": ("EntropyQueryStrategy", "fitted"),
        "falcun": ("FalcunQueryStrategy", "fitted"),
        "margin": ("MarginQueryStrategy", "fitted"),
        "max_entropy": ("MaxEntropyQueryStrategy", "fitted", True),
        "least_confident": ("LeastConfidentQueryStrategy", "fitted"),
        "mc_logloss": ("MonteCarloEERLogLoss", "fitted"),
        "mc_misclass": ("MonteCarloEERMisclassification", "fitted"),
        "kmeans": ("KMeansQueryStrategy", "none"),
        "discrim": ("DiscriminativeQueryStrategy", "fitted"),
        "qbc_entropy": ("QueryByCommitteeEntropyQueryStrategy", "fitted", True),
        "qbc_kl": ("QueryByCommitteeKLQueryStrategy", "fitted", True),
        "bald": ("BALDQueryStrategy", "fitted", True),
        "power_margin": ("PowerMarginQueryStrategy", "fitted"),
        "min_margin": ("MinMarginQueryStrategy", "fitted", True),
        "typ_cluster": ("TypicalClusterQueryStrategy", "none"),
        "weighted_cluster": ("WeightedClusterQueryStrategy", "fitted"),
        "qbc_variance_ratio": ("QBCVarianceRatioQueryStrategy", "fitted", True),
        "power_bald": ("PowerBALDQueryStrategy", "fitted", True),
    }.items()
}
