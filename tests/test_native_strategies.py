"""Native versions of the Google-toolbox strategies, checked against their published descriptions.

coreset = k-center greedy (Sener & Savarese 2018), graph = graph density (Ebert et al.
2012), hier = hierarchical sampling (Dasgupta & Hsu 2008), infodiv = informative and
diverse batch sampling, mcm = margin cluster mean sampling (Xu et al. 2003). The
reference computations here are written independently of adapters/native.py (brute
force over full distance matrices).
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.svm import SVC

import adapters
from adapters import MISSING
from adapters.native import (
    GraphDensity,
    Hierarchical,
    InformativeDiverse,
    KCenter,
    Margin,
    MarginClusterMean,
)
from audit.engine.models import margin_scores
from audit.engine.runner import run_trial
from audit.errors import AuditError
from audit.protocols import StrategySpec

NEW = ["coreset", "graph", "hier", "infodiv", "mcm"]
BATCH_SIZES = [1, 2, 5, 10]


def blobs(centers, per=20, scale=0.3, seed=0):
    rng = np.random.default_rng(seed)
    centers = np.asarray(centers, dtype=float)
    X = np.concatenate([c + scale * rng.normal(size=(per, centers.shape[1])) for c in centers])
    return X, np.repeat(np.arange(len(centers)), per)


def partly_labeled(y_true, n_per_class=3):
    y = np.full(y_true.size, MISSING, dtype=np.int64)
    for c in np.unique(y_true):
        rows = np.flatnonzero(y_true == c)[:n_per_class]
        y[rows] = c
    return y


def fitted(cls, X, y):
    if cls.model_use != "fitted":
        return None
    known = y != MISSING
    return SVC(kernel="rbf", gamma="auto").fit(X[known], y[known])


class FixedModel:
    """A "fitted" binary model whose decision values are a given function of X."""

    classes_ = np.array([0, 1])

    def __init__(self, f):
        self.f = f

    def decision_function(self, X):
        return self.f(X)


# --- every new strategy -------------------------------------------------------------

def test_registered_with_the_documented_parameters():
    assert {f"native.{n}" for n in NEW} <= set(adapters.implementations())
    assert KCenter.param_defaults == {"metric": "euclidean"}
    assert GraphDensity.param_defaults["n_neighbors"] == 10
    assert Hierarchical.param_defaults["linkage"] == "ward" and Hierarchical.param_defaults["beta"] == 2.0
    assert InformativeDiverse.model_use == MarginClusterMean.model_use == "fitted"
    assert KCenter.model_use == GraphDensity.model_use == Hierarchical.model_use == "none"


@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("batch", BATCH_SIZES)
@pytest.mark.parametrize("name", NEW)
def test_batches_are_distinct_candidates_over_many_rounds(name, batch, n_classes):
    X, y_true = blobs([[0, 0, 0], [3, 0, 0], [0, 3, 0]][:n_classes], per=40, scale=1.0, seed=batch)
    cls = adapters.strategy_class(f"native.{name}")
    strategy = cls(random_state=0)
    y = partly_labeled(y_true)
    rng = np.random.default_rng(0)
    for _ in range(3):
        candidates = np.flatnonzero(y == MISSING)[1::2]  # a strict subset, in pool order
        assert candidates.size > batch
        picked = strategy.query(X, y, fitted(cls, X, y), batch, candidates, rng)
        assert len(set(picked.tolist())) == batch and set(picked.tolist()) <= set(candidates.tolist())
        y = y.copy()
        y[picked] = y_true[picked]


@pytest.mark.parametrize("name", NEW)
def test_batch_larger_than_candidates_is_clipped(name):
    X, y_true = blobs([[0, 0], [3, 0]], per=10)
    cls = adapters.strategy_class(f"native.{name}")
    y = partly_labeled(y_true)
    candidates = np.flatnonzero(y == MISSING)[:4]
    picked = cls(random_state=0).query(X, y, fitted(cls, X, y), 10, candidates, np.random.default_rng(0))
    assert sorted(picked.tolist()) == candidates.tolist()


@pytest.mark.parametrize("name", NEW)
def test_rejects_bad_parameter_values_or_unknown_ones(name):
    cls = adapters.strategy_class(f"native.{name}")
    with pytest.raises(AuditError, match="does not use parameter"):
        cls(nonsense=1)


def test_bad_parameter_values():
    with pytest.raises(AuditError):
        KCenter(metric="no-such-metric")
    with pytest.raises(AuditError):
        GraphDensity(n_neighbors=0)
    with pytest.raises(AuditError):
        Hierarchical(linkage="sideways")
    with pytest.raises(AuditError):
        Hierarchical(select="sometimes")


# --- coreset: k-center greedy -------------------------------------------------------

def kcenter_reference(X, labeled, candidates, batch):
    D = np.sqrt(((X[:, None, :] - X[None, :, :]) ** 2).sum(-1))
    centers = list(labeled)
    picked = []
    for _ in range(batch):
        best, best_d = None, -1.0
        for c in candidates:
            if c in picked:
                continue
            d = D[c, centers].min() if centers else np.inf
            if d > best_d:  # strict: ties keep the first in candidate order
                best, best_d = c, d
        picked.append(best)
        centers.append(best)
    return picked


def test_coreset_picks_the_farthest_candidate():
    X = np.array([[0.0, 0.0], [1.0, 0.0], [5.0, 0.0], [2.0, 2.0], [-3.0, 0.0]])
    y = np.array([0, MISSING, MISSING, MISSING, MISSING])
    assert KCenter().query(X, y, None, 1, np.arange(1, 5), None).tolist() == [2]
    # second pick: farthest from {0, 2}: row 4 (distance 3) beats row 3 (2.83) and row 1 (1)
    assert KCenter().query(X, y, None, 2, np.arange(1, 5), None).tolist() == [2, 4]


def test_coreset_ties_go_to_the_first_candidate():
    X = np.array([[0.0], [2.0], [-2.0], [1.0]])
    y = np.array([0, MISSING, MISSING, MISSING])
    assert KCenter().query(X, y, None, 1, np.array([1, 2, 3]), None).tolist() == [1]
    assert KCenter().query(X, y, None, 1, np.array([2, 1, 3]), None).tolist() == [2]


def test_coreset_batch_spreads_over_the_clusters():
    X, y_true = blobs([[0, 0], [10, 0], [0, 10], [10, 10]], per=15)
    y = np.full(y_true.size, MISSING)
    y[0] = 0  # one labeled row in the first cluster
    picked = KCenter().query(X, y, None, 3, np.flatnonzero(y == MISSING), None)
    assert sorted(y_true[picked].tolist()) == [1, 2, 3]


@pytest.mark.parametrize("seed", range(5))
def test_coreset_equals_brute_force_and_its_cache_equals_a_fresh_start(seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(50, 3))
    y = np.full(50, MISSING)
    y[rng.choice(50, 4, replace=False)] = 0
    kept = KCenter()
    for batch in (1, 3, 2, 5):
        candidates = np.flatnonzero(y == MISSING)
        picked = kept.query(X, y, None, batch, candidates, None).tolist()
        assert picked == kcenter_reference(X, np.flatnonzero(y != MISSING).tolist(), candidates.tolist(), batch)
        assert picked == KCenter().query(X, y, None, batch, candidates, None).tolist()
        y = y.copy()
        y[picked] = 0


# --- graph density ------------------------------------------------------------------

def graph_density_reference(X, k):
    n = len(X)
    D = np.sqrt(((X[:, None, :] - X[None, :, :]) ** 2).sum(-1))
    np.fill_diagonal(D, np.inf)
    knn = np.argsort(D, axis=1, kind="stable")[:, :k]
    adjacency = np.zeros((n, n), dtype=bool)
    adjacency[np.repeat(np.arange(n), k), knn.ravel()] = True
    adjacency |= adjacency.T
    sigma = np.take_along_axis(D, knn, axis=1).mean()
    W = np.where(adjacency, np.exp(-np.where(adjacency, D, 0) ** 2 / (2 * sigma**2)), 0.0)
    return W.sum(1) / adjacency.sum(1), adjacency


def test_graph_density_matches_the_definition_and_picks_the_densest_first():
    rng = np.random.default_rng(1)
    X = np.concatenate([0.1 * rng.normal(size=(15, 2)), rng.uniform(-5, 5, size=(25, 2))])
    y = np.full(len(X), MISSING)
    strategy = GraphDensity(n_neighbors=5)
    (picked,) = strategy.query(X, y, None, 1, np.arange(len(X)), None)
    density, _ = graph_density_reference(X, 5)
    np.testing.assert_allclose(strategy._density, density)
    assert picked == int(np.argmax(density)) and picked < 15  # inside the tight cluster


def test_graph_lowers_the_neighbours_of_a_pick_so_a_batch_spreads_out():
    X, cluster = blobs([[0, 0], [8, 0]], per=20, scale=0.5, seed=2)
    y = np.full(len(X), MISSING)
    candidates = np.arange(len(X))
    picked = GraphDensity(n_neighbors=10).query(X, y, None, 2, candidates, None)
    assert sorted(cluster[picked].tolist()) == [0, 1]
    # the reference: pick, lower neighbours by the pick's current density, pick again
    density, adjacency = graph_density_reference(X, 10)
    first = int(np.argmax(density))
    density[adjacency[first]] -= density[first]
    density[first] = -np.inf
    assert picked.tolist() == [first, int(np.argmax(density))]


def test_graph_without_carry_over_depends_only_on_the_arguments_and_builds_its_graph_once():
    X, _ = blobs([[0, 0], [8, 0]], per=20, scale=0.5, seed=2)
    y = np.full(len(X), MISSING)
    strategy = GraphDensity()
    first = strategy.query(X, y, None, 3, np.arange(len(X)), None).tolist()
    graph = strategy._indices
    assert strategy.query(X, y, None, 3, np.arange(len(X)), None).tolist() == first
    assert strategy._indices is graph  # cached for the pool
    strategy.query(X.copy(), y, None, 3, np.arange(len(X)), None)
    assert strategy._indices is not graph  # a new pool rebuilds it


def test_graph_carry_over_keeps_lowering_across_calls():
    X, cluster = blobs([[0, 0], [8, 0]], per=20, scale=0.5, seed=2)
    density, adjacency = graph_density_reference(X, 10)
    for carry_over in (True, False):
        strategy, y, picks = GraphDensity(carry_over=carry_over), np.full(len(X), MISSING), []
        for _ in range(2):
            (row,) = strategy.query(X, y, None, 1, np.flatnonzero(y == MISSING), None)
            picks.append(int(row))
            y = y.copy()
            y[row] = cluster[row]
        first = int(np.argmax(density))
        lowered = density.copy()
        if carry_over:  # the sequential reading: the first query lowered its neighbours for good
            lowered[adjacency[first]] -= lowered[first]
        lowered[first] = -np.inf
        assert picks == [first, int(np.argmax(lowered))]


# --- hierarchical sampling ----------------------------------------------------------

def three_blobs_labeled(seed=0):
    """Three far-apart blobs; 12 labels each: blob 0 all 0, blob 1 all 1, blob 2 mostly 1 (9 of 12)."""
    X, blob = blobs([[0, 0], [20, 0], [0, 20]], per=30, scale=1.0, seed=seed)
    y = np.full(len(X), MISSING)
    y[np.flatnonzero(blob == 0)[:12]] = 0
    y[np.flatnonzero(blob == 1)[:12]] = 1
    y[np.flatnonzero(blob == 2)[:12]] = np.random.default_rng(seed).permutation([0] * 3 + [1] * 9)
    return X, y, blob


def test_hier_is_deterministic_for_a_seed_and_differs_between_seeds():
    X, y_true = blobs([[0, 0], [3, 0], [0, 3]], per=30, scale=1.0)
    y = partly_labeled(y_true % 2)

    def run(seed):
        strategy, yy, seq = Hierarchical(), y.copy(), []
        rng = np.random.default_rng(seed)
        for _ in range(6):
            picked = strategy.query(X, yy, None, 2, np.flatnonzero(yy == MISSING), rng)
            seq += picked.tolist()
            yy[picked] = y_true[picked] % 2
        return seq

    assert run(1) == run(1)
    assert run(1) != run(2)
    # rng=None: the strategy's random_state decides
    a = Hierarchical(random_state=4).query(X, y, None, 5, np.flatnonzero(y == MISSING), None)
    b = Hierarchical(random_state=4).query(X, y, None, 5, np.flatnonzero(y == MISSING), None)
    assert a.tolist() == b.tolist()


def test_hier_starts_at_the_root_and_labels_refine_the_pruning():
    X, y, blob = three_blobs_labeled()
    strategy = Hierarchical()
    empty = np.full(len(X), MISSING)
    strategy.query(X, empty, None, 1, np.arange(len(X)), np.random.default_rng(0))
    assert np.flatnonzero(strategy._in_pruning).tolist() == [strategy._root]
    strategy = Hierarchical()
    strategy.query(X, y, None, 1, np.flatnonzero(y == MISSING), np.random.default_rng(0))
    pruning = np.flatnonzero(strategy._in_pruning)
    assert strategy._root not in pruning
    leaves = [strategy._order[strategy._start[v]:strategy._start[v] + strategy._size[v]] for v in pruning]
    assert sorted(np.concatenate(leaves).tolist()) == list(range(len(X)))  # a partition of the rows
    pure = [v for v, rows in zip(pruning, leaves) if set(blob[rows]) <= {0} or set(blob[rows]) <= {1}]
    assert sum(strategy._size[v] for v in pure) == 60  # the two pure blobs are separated


def test_hier_counts_a_node_without_an_admissible_label_as_all_wrong():
    """Dasgupta & Hsu: a node is only worth splitting off once its label is confident."""
    X, y, blob = three_blobs_labeled()
    y[np.flatnonzero(blob == 2)[:12]] = [0, 1] * 6  # blob 2 now 6/6: no admissible label
    strategy = Hierarchical()
    strategy.query(X, y, None, 1, np.flatnonzero(y == MISSING), np.random.default_rng(0))
    pruning = np.flatnonzero(strategy._in_pruning)
    mixes = [set(blob[strategy._order[strategy._start[v]:strategy._start[v] + strategy._size[v]]]) for v in pruning]
    assert {0, 2} in mixes  # blob 0 (pure) stays with blob 2: 18/6 (error 0.25) beats 0 and "1"


def test_hier_active_selection_favours_nodes_with_a_high_error_bound():
    X, y, blob = three_blobs_labeled()
    candidates = np.flatnonzero(y == MISSING)

    def share_from_mixed_blob(select):
        strategy = Hierarchical(select=select)
        rng = np.random.default_rng(0)
        picks = [strategy.query(X, y, None, 1, candidates, rng)[0] for _ in range(300)]
        return np.mean(blob[picks] == 2)

    assert share_from_mixed_blob("active") > 0.6
    assert 0.2 < share_from_mixed_blob("size") < 0.5


def test_hier_credits_a_label_to_the_node_it_was_drawn_from():
    X, y, _ = three_blobs_labeled()
    strategy = Hierarchical()
    (row,) = strategy.query(X, y, None, 1, np.flatnonzero(y == MISSING), np.random.default_rng(3))
    source = strategy._origin[row]
    before = strategy._counts.sum(axis=1).copy()
    y = y.copy()
    y[row] = 1
    strategy.query(X, y, None, 1, np.flatnonzero(y == MISSING), np.random.default_rng(3))
    credited = np.flatnonzero(strategy._counts.sum(axis=1) != before)
    node, path = row, [row]
    while node != source:
        node = strategy._parent[node]
        path.append(node)
    assert sorted(credited.tolist()) == sorted(path)


# --- infodiv ------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(25))
def test_infodiv_equals_margin_at_batch_size_one(seed):
    rng = np.random.default_rng(seed)
    n_classes = 2 + seed % 3
    X = rng.normal(size=(80, 5))
    y_true = rng.integers(n_classes, size=80)
    y_true[:n_classes] = np.arange(n_classes)
    y = np.full(80, MISSING)
    labeled = rng.choice(np.arange(n_classes, 80), 15, replace=False)
    y[labeled] = y_true[labeled]
    y[:n_classes] = y_true[:n_classes]
    model = (SVC(gamma="auto") if seed % 2 else LogisticRegression()).fit(X[y != MISSING], y[y != MISSING])
    candidates = np.flatnonzero(y == MISSING)
    if seed % 5 == 0:
        candidates = candidates[::3]
    expected = Margin().query(X, y, model, 1, candidates, None)
    assert InformativeDiverse(random_state=seed).query(X, y, model, 1, candidates, None).tolist() == expected.tolist()
    assert expected[0] == candidates[np.argmin(margin_scores(model, X[candidates]))]


def test_infodiv_equals_margin_with_tied_margins():
    X = np.arange(10, dtype=float)[:, None]
    model = FixedModel(lambda X: np.where(X[:, 0] > 4, 0.5, 1.0))  # rows 5..9 tie
    y = np.full(10, MISSING)
    candidates = np.array([7, 3, 5, 9])
    assert InformativeDiverse().query(X, y, model, 1, candidates, None).tolist() == [7]
    assert Margin().query(X, y, model, 1, candidates, None).tolist() == [7]


def test_infodiv_keeps_the_pools_cluster_proportions():
    rng = np.random.default_rng(0)
    big = np.c_[rng.normal(0, 0.3, 80), rng.uniform(0, 1, 80)]
    small = np.c_[rng.normal(10, 0.3, 20), rng.uniform(2, 3, 20)]
    X = np.concatenate([big, small])
    model = FixedModel(lambda X: X[:, 1])  # the big cluster holds every small margin
    y = np.full(100, MISSING)
    candidates = np.arange(100)
    picked = InformativeDiverse(random_state=0).query(X, y, model, 10, candidates, None)
    assert (picked < 80).sum() == 8 and (picked >= 80).sum() == 2  # quotas ceil(10 * 0.8), ceil(10 * 0.2)
    margin = margin_scores(model, X)
    assert sorted(picked[picked < 80].tolist()) == sorted(np.argsort(margin[:80])[:8].tolist())
    assert sorted(picked[picked >= 80].tolist()) == sorted((80 + np.argsort(margin[80:])[:2]).tolist())
    # plain margin would have taken all ten from the big cluster
    assert (Margin().query(X, y, model, 10, candidates, None) < 80).all()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_infodiv_equals_us_c_through_the_runner(lu2023, sonar, seed):
    protocol = dataclasses.replace(
        lu2023, strategies={**lu2023.strategies, "infodiv": StrategySpec("infodiv", "native.infodiv", {}, "task")}
    )
    infodiv = run_trial(protocol, "sonar", sonar.X, sonar.y, "infodiv", seed)
    us_c = run_trial(protocol, "sonar", sonar.X, sonar.y, "us-c", seed)
    assert infodiv.status == us_c.status == "ok", (infodiv.error, us_c.error)
    assert infodiv.query_hash == us_c.query_hash
    assert infodiv.aubc == us_c.aubc


# --- mcm ----------------------------------------------------------------------------

def test_mcm_queries_in_margin_points_nearest_the_cluster_centres():
    X, y_true = blobs([[0, 0], [3, 0]], per=100, scale=1.2, seed=5)
    y = partly_labeled(y_true, 5)
    model = SVC(kernel="linear").fit(X[y != MISSING], y[y != MISSING])
    candidates = np.flatnonzero(y == MISSING)
    inside = candidates[np.abs(model.decision_function(X[candidates])) < 1]
    assert inside.size >= 10
    for batch in BATCH_SIZES:
        picked = MarginClusterMean(margin=1.0, random_state=0).query(X, y, model, batch, candidates, None)
        assert set(picked.tolist()) <= set(inside.tolist())
    # batch 1: the in-margin candidate nearest the mean of the in-margin candidates
    (one,) = MarginClusterMean(margin=1.0).query(X, y, model, 1, candidates, None)
    mean = X[inside].mean(axis=0)
    assert one == inside[np.argmin(((X[inside] - mean) ** 2).sum(axis=1))]


def test_mcm_batch_follows_kmeans_centroids():
    from sklearn.cluster import KMeans

    X, cluster = blobs([[0, 0], [0, 6], [0, 12]], per=15, scale=0.5, seed=1)
    model = FixedModel(lambda X: 0.1 * X[:, 0])  # everything is inside the margin
    y = np.full(len(X), MISSING)
    picked = MarginClusterMean(margin=1.0, random_state=0).query(X, y, model, 3, np.arange(len(X)), None)
    assert sorted(cluster[picked].tolist()) == [0, 1, 2]
    centers = KMeans(3, n_init=1, random_state=0).fit(X).cluster_centers_
    expected = [int(np.argmin(((X - c) ** 2).sum(axis=1))) for c in centers]
    assert picked.tolist() == expected


def test_mcm_falls_back_to_the_smallest_margins_when_few_are_inside():
    X = np.arange(20, dtype=float)[:, None]
    model = FixedModel(lambda X: X[:, 0] - 9.5)  # only rows 9 and 10 are inside |f| < 1
    y = np.full(20, MISSING)
    candidates = np.arange(20)
    assert sorted(MarginClusterMean(margin=1.0).query(X, y, model, 2, candidates, None).tolist()) == [9, 10]
    assert MarginClusterMean(margin=1.0).query(X, y, model, 5, candidates, None).tolist() == [9, 10, 8, 11, 7]


# --- through the runner -------------------------------------------------------------

@pytest.mark.parametrize("name", NEW)
def test_runs_a_sonar_trial_deterministically(lu2023, sonar, name):
    query_model = "task" if adapters.strategy_class(f"native.{name}").model_use == "fitted" else None
    protocol = dataclasses.replace(
        lu2023, batch_size=5,
        strategies={**lu2023.strategies, name: StrategySpec(name, f"native.{name}", {}, query_model)},
    )
    a = run_trial(protocol, "sonar", sonar.X, sonar.y, name, 0)
    b = run_trial(protocol, "sonar", sonar.X, sonar.y, name, 0)
    assert a.status == "ok", a.error
    assert a.query_hash == b.query_hash and a.aubc == b.aubc
    queried = [q for r in a.rounds for q in r.queried]
    assert len(queried) == len(set(queried)) == a.rounds[-1].n_labeled - a.rounds[0].n_labeled


def test_mcm_default_margin_is_the_region_closer_than_every_labeled_row():
    """Default "labeled": inside means nearer the boundary than the nearest labeled row."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(80, 2))
    y_true = (X[:, 0] > 0).astype(np.int64)
    y = np.full(80, MISSING, dtype=np.int64)
    labeled = np.concatenate([np.flatnonzero(y_true == 0)[:6], np.flatnonzero(y_true == 1)[:6]])
    y[labeled] = y_true[labeled]
    from sklearn.svm import SVC

    model = SVC(kernel="linear").fit(X[labeled], y[labeled])
    candidates = np.flatnonzero(y == MISSING)
    threshold = np.abs(model.decision_function(X[labeled])).min()
    inside = candidates[np.abs(model.decision_function(X[candidates])) < threshold]
    (pick,) = MarginClusterMean().query(X, y, model, 1, candidates, None)
    assert pick in inside
    nearest_mean = inside[np.argmin(((X[inside] - X[inside].mean(axis=0)) ** 2).sum(axis=1))]
    assert pick == nearest_mean
    with pytest.raises(AuditError):
        MarginClusterMean(margin="wide")
