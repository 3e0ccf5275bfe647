"""Strategies written in this project, from their published descriptions.

Besides the baselines (uniform, margin) this module holds native versions of the
strategies that the published benchmarks took from the unreleased Google
active-learning toolbox: k-center greedy (coreset), graph density (graph),
hierarchical sampling (hier), the informative-and-diverse batch sampler (infodiv) and
margin cluster mean sampling (mcm). Each is written from the method's paper; the
docstrings say where a choice had to be made and what was simplified.
"""
from __future__ import annotations

import struct
import warnings
from typing import Any

import numpy as np
from scipy.spatial.distance import cdist

from adapters.base import MISSING, DegenerateQueryWarning, QueryStrategy
from audit.engine.models import margin_scores
from audit.errors import AuditError, StrategyError


class Uniform(QueryStrategy):
    """Passive baseline.

    order="pool" takes the next candidates in pool order, as the Google toolbox's
    uniform sampler does (random only when the pool was shuffled); order="random"
    draws without replacement from the strategy's RNG.
    """

    implements = "uniform sampling"
    param_defaults = {"order": "pool"}

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        if self.params["order"] not in ("pool", "random"):
            raise AuditError(f"Uniform order must be 'pool' or 'random', not {self.params['order']!r}")

    def _select(self, X, y, model, batch_size, candidates, rng):
        if self.params["order"] == "pool":
            return np.asarray(candidates[:batch_size])
        return rng.choice(candidates, size=batch_size, replace=False)


class Margin(QueryStrategy):
    """Uncertainty sampling by margin: the candidates closest to the query model's boundary.

    Ties go to the earlier candidate in pool order (stable sort).
    """

    implements = "margin uncertainty sampling"
    model_use = "fitted"

    def _select(self, X, y, model, batch_size, candidates, rng):
        scores = margin_scores(model, X[candidates])
        return np.asarray(candidates)[np.argsort(scores, kind="stable")[:batch_size]]


def _strategy_rng(strategy: QueryStrategy, rng: np.random.Generator | None) -> np.random.Generator:
    """The runner's generator, or (direct calls) one stream derived once from random_state."""
    if rng is not None:
        return rng
    own = getattr(strategy, "_own_rng", None)
    if own is None:
        own = strategy._own_rng = np.random.default_rng(strategy.random_state)
    return own


def _quiet_kmeans(n_clusters: int, random_state: int | None, X: np.ndarray) -> Any:
    """KMeans (k-means++, one initialisation); duplicate points only warn, so silence that."""
    from sklearn.cluster import KMeans

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return KMeans(n_clusters=n_clusters, n_init=1, random_state=random_state).fit(X)


class KCenter(QueryStrategy):
    """k-center greedy (Sener & Savarese 2018, the "core-set" approach), on the features X.

    Each pick is the candidate whose minimum distance to the labeled rows and to the rows
    already picked in this batch is largest (the greedy 2-approximation of the minimax
    facility-location problem); ties go to the first candidate in candidate order. With
    no labeled row at all, every distance is infinite and the first candidate is taken.

    The minimum-distance vector over the train rows is kept per pool and updated only
    with the rows labeled since the previous call, so a round costs O(n d) per new label.
    ``metric`` is any :func:`scipy.spatial.distance.cdist` metric name.
    """

    implements = "k-center greedy (core-set)"
    param_defaults = {"metric": "euclidean"}

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        try:
            cdist(np.zeros((1, 2)), np.ones((1, 2)), metric=self.params["metric"])
        except (ValueError, TypeError) as exc:
            raise AuditError(f"KCenter metric {self.params['metric']!r} is not a scipy cdist metric: {exc}") from None
        self._X: np.ndarray | None = None
        self._min_dist: np.ndarray | None = None
        self._counted: np.ndarray | None = None

    def _distances_to_labeled(self, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        labeled = y != MISSING
        if self._X is not X or self._counted.size != labeled.size or np.any(self._counted & ~labeled):
            self._X = X
            self._min_dist = np.full(X.shape[0], np.inf)
            self._counted = np.zeros(X.shape[0], dtype=bool)
        new = np.flatnonzero(labeled & ~self._counted)
        for start in range(0, new.size, 256):
            rows = new[start:start + 256]
            d = cdist(X, X[rows], metric=self.params["metric"]).min(axis=1)
            np.minimum(self._min_dist, d, out=self._min_dist)
        self._counted = labeled.copy()
        return self._min_dist

    def _select(self, X, y, model, batch_size, candidates, rng):
        min_dist = self._distances_to_labeled(X, y)[candidates]  # a copy: fancy indexing
        X_cand = X[candidates]
        picked: list[int] = []
        for _ in range(batch_size):
            j = int(np.argmax(min_dist))
            picked.append(j)
            np.minimum(min_dist, cdist(X_cand, X_cand[j:j + 1], metric=self.params["metric"])[:, 0], out=min_dist)
            min_dist[picked] = -np.inf  # duplicates of a picked row stay eligible, the row itself not
        return candidates[picked]


class GraphDensity(QueryStrategy):
    """Graph density (Ebert, Fritz & Schiele 2012, "RALF"), on the features X.

    A symmetric k-nearest-neighbour graph over all train rows (i ~ j when either is among
    the other's ``n_neighbors`` nearest, euclidean) carries gaussian edge weights
    ``w_ij = exp(-d_ij^2 / (2 sigma^2))``; the bandwidth ``sigma`` is the mean distance of
    every train row to its ``n_neighbors`` nearest neighbours (1 if that is 0). The
    density of a row is the sum of its edge weights divided by its degree. A batch is
    built by taking the densest candidate (ties: first in candidate order) and then
    lowering the density of each graph neighbour by the picked row's current density, so
    that the next pick moves to another dense region; repeat. (Taken literally, a pick
    whose density has already gone negative raises its neighbours; that is kept.)

    ``carry_over=False`` (default) starts every call from the unchanged densities (only
    the batch spreads out; at batch size 1 the rows are queried in decreasing density).
    ``carry_over=True`` keeps the lowered densities for the rest of the trial, i.e. the
    sequential reading of the method, where every query lowers its neighbours for good
    (labeled rows that this object did not pick lower nothing). The graph is built once
    per pool.
    """

    implements = "graph density"
    param_defaults = {"n_neighbors": 10, "carry_over": False}

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        k = self.params["n_neighbors"]
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise AuditError(f"GraphDensity n_neighbors must be a positive integer, not {k!r}")
        self._X: np.ndarray | None = None

    def _build(self, X: np.ndarray) -> None:
        from sklearn.neighbors import NearestNeighbors

        n = X.shape[0]
        self._X, self._sigma = X, 1.0
        if n < 2:
            self._indptr, self._indices = np.zeros(n + 1, dtype=np.int64), np.zeros(0, dtype=np.int64)
            self._density = np.zeros(n)
        else:
            k = min(self.params["n_neighbors"], n - 1)
            dist, ind = NearestNeighbors(n_neighbors=k).fit(X).kneighbors()  # self excluded
            self._sigma = sigma = float(dist.mean()) or 1.0
            rows = np.repeat(np.arange(n), k)
            codes = np.unique(np.concatenate([rows * n + ind.ravel(), ind.ravel() * n + rows]))
            src, dst = codes // n, codes % n  # sorted by source row: CSR order
            d = np.sqrt(((X[src] - X[dst]) ** 2).sum(axis=1))
            weights = np.exp(-d**2 / (2 * sigma**2))
            degree = np.bincount(src, minlength=n)
            self._density = np.bincount(src, weights=weights, minlength=n) / np.maximum(degree, 1)
            self._indptr = np.concatenate([[0], np.cumsum(degree)])
            self._indices = dst
        self._current = self._density.copy()

    def _select(self, X, y, model, batch_size, candidates, rng):
        if self._X is not X:
            self._build(X)
        density = self._current if self.params["carry_over"] else self._density.copy()
        picked: list[int] = []
        for _ in range(batch_size):
            values = density[candidates]
            values[picked] = -np.inf
            j = int(np.argmax(values))
            picked.append(j)
            row = candidates[j]
            density[self._indices[self._indptr[row]:self._indptr[row + 1]]] -= density[row]
        return candidates[picked]


class Hierarchical(QueryStrategy):
    """Hierarchical sampling (Dasgupta & Hsu 2008), on the features X.

    A cluster tree over all train rows (scipy agglomerative ``linkage``, "ward" by
    default) is built once per pool. The algorithm keeps a pruning P of the tree (a set of
    nodes whose leaves partition the rows), starting from the root. For every node v and
    label l it counts the labels of the rows that were sampled uniformly from a subtree
    containing v, giving the estimate p_vl = n_vl / n_v with the confidence interval
    p_vl +- (1/n_v + sqrt(p_vl (1 - p_vl) / n_v)) clipped to [0, 1]. (v, l) is admissible
    when 1 - LB(p_vl) < beta (1 - UB(p_vl')) for every other label l' (beta = 2: the
    paper's choice). A node's error is 1 - p_vl for its best admissible label and 1 when
    none is admissible; its score is the smaller of that and the size-weighted score of
    its children, and the best pruning of a subtree splits a node exactly when its
    children's weighted score is strictly smaller (so a node is split only once some of
    its descendants have confident, admissible labels). After labels arrive, each pruning node containing a new label is replaced by the best
    pruning of its subtree (the pruning only refines, as in the paper).

    A query draws a pruning node with probability proportional to its size (the number
    of train rows under it) times its error bound 1 - LB(p_{v,L(v)}) (``select="active"``,
    the paper's active variant) or to its size alone (``select="size"``), then a uniformly
    random candidate below it. A label is credited to the nodes on the path from its row
    up to the node it was drawn from; labels this object did not draw (the initial set)
    count as drawn from the root. Randomness comes only from the ``rng`` argument.

    Simplifications: only unlabeled candidates are drawn (the paper samples any row of
    the node and reuses known labels for free), so the within-node sample is uniform over
    the candidates, not over the node; nodes without candidates get probability 0; a batch
    draws ``batch_size`` times from the same pruning (labels refine it at the next call);
    the confidence constant is 1; if a new class appears, or a row becomes unlabeled, the
    counts are rebuilt from the root with the remembered draw nodes.
    """

    implements = "hierarchical sampling"
    param_defaults = {"linkage": "ward", "beta": 2.0, "select": "active"}
    LINKAGES = ("ward", "complete", "average", "single", "centroid", "median", "weighted")

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        if self.params["linkage"] not in self.LINKAGES:
            raise AuditError(f"Hierarchical linkage must be one of {', '.join(self.LINKAGES)}, "
                             f"not {self.params['linkage']!r}")
        if self.params["select"] not in ("active", "size"):
            raise AuditError(f"Hierarchical select must be 'active' or 'size', not {self.params['select']!r}")
        if not float(self.params["beta"]) > 1:
            raise AuditError(f"Hierarchical beta must be > 1, not {self.params['beta']!r}")
        self._X: np.ndarray | None = None

    # --- the tree (once per pool) ---
    def _build_tree(self, X: np.ndarray) -> None:
        from scipy.cluster.hierarchy import leaves_list, linkage

        n = X.shape[0]
        self._X, self._n = X, n
        m = 2 * n - 1
        self._left = np.full(m, -1, dtype=np.int64)
        self._right = np.full(m, -1, dtype=np.int64)
        self._parent = np.full(m, -1, dtype=np.int64)
        self._size = np.ones(m, dtype=np.int64)
        self._start = np.zeros(m, dtype=np.int64)
        if n >= 2:
            Z = linkage(X, method=self.params["linkage"])
            internal = np.arange(n, m)
            self._left[n:], self._right[n:] = Z[:, 0].astype(np.int64), Z[:, 1].astype(np.int64)
            self._size[n:] = Z[:, 3].astype(np.int64)
            self._parent[self._left[n:]] = internal
            self._parent[self._right[n:]] = internal
            left, right, size, start = self._left, self._right, self._size, self._start
            for node in range(m - 1, n - 1, -1):  # parents before children
                start[left[node]] = start[node]
                start[right[node]] = start[node] + size[left[node]]
            self._order = leaves_list(Z).astype(np.int64)  # node v covers _order[start:start+size]
        else:
            self._order = np.arange(n, dtype=np.int64)
        self._root = m - 1
        self._origin: dict[int, int] = {}
        self._reset_counts(2)

    def _reset_counts(self, n_classes: int) -> None:
        m = 2 * self._n - 1
        self._n_classes = n_classes
        self._counts = np.zeros((m, n_classes))
        self._score = np.ones(m)
        self._split = np.zeros(m, dtype=bool)
        self._label = np.zeros(m, dtype=np.int64)
        self._bound = np.ones(m)  # 1 - LB(p_{v, L(v)})
        self._in_pruning = np.zeros(m, dtype=bool)
        self._in_pruning[self._root] = True
        self._counted = np.zeros(self._n, dtype=bool)

    # --- label bookkeeping ---
    def _rescore(self, node: int) -> None:
        """Label, error bound, score and split decision of one node from its counts."""
        counts = self._counts[node]
        n_v = counts.sum()
        if n_v == 0:
            own, self._label[node], self._bound[node] = 1.0, 0, 1.0
        else:
            p = counts / n_v
            delta = 1.0 / n_v + np.sqrt(p * (1 - p) / n_v)
            err_upper = 1 - np.maximum(p - delta, 0.0)  # 1 - LB(p_vl)
            err_lower = 1 - np.minimum(p + delta, 1.0)  # 1 - UB(p_vl)
            lowest = np.partition(err_lower, 1)[:2]
            others = np.where(err_lower == lowest[0], lowest[1], lowest[0])  # min over l' != l
            admissible = err_upper < float(self.params["beta"]) * others
            error = np.where(admissible, 1 - p, 1.0)
            label = int(np.argmin(error)) if admissible.any() else int(np.argmax(p))
            own = float(error[label])
            self._label[node], self._bound[node] = label, float(err_upper[label])
        left, right = self._left[node], self._right[node]
        if left >= 0:
            split_score = (self._size[left] * self._score[left] + self._size[right] * self._score[right]) / self._size[node]
            self._split[node] = split_score < own
            self._score[node] = min(own, split_score)
        else:
            self._split[node] = False
            self._score[node] = own

    def _path(self, row: int, top: int) -> list[int]:
        path, node = [row], row
        while node != top:
            node = int(self._parent[node])
            if node < 0:
                raise AuditError("hierarchical sampling: a label's draw node does not contain it")
            path.append(node)
        return path

    def _owner(self, row: int) -> int:
        node = row
        while not self._in_pruning[node]:
            node = int(self._parent[node])
        return node

    def _absorb_labels(self, y: np.ndarray) -> None:
        labeled = y != MISSING
        n_classes = max(2, int(y.max()) + 1)
        if n_classes > self._n_classes or np.any(self._counted & ~labeled):
            self._reset_counts(max(n_classes, self._n_classes))
        new = np.flatnonzero(labeled & ~self._counted)
        if new.size == 0:
            return
        for row in new:
            path = self._path(int(row), self._origin.get(int(row), self._root))
            self._counts[path, y[row]] += 1
            for node in path:  # leaf first: children are scored before their parents
                self._rescore(node)
        self._counted = labeled.copy()
        for top in {self._owner(int(row)) for row in new}:
            self._in_pruning[top] = False
            stack = [top]
            while stack:
                node = stack.pop()
                if self._split[node]:
                    stack += [int(self._left[node]), int(self._right[node])]
                else:
                    self._in_pruning[node] = True

    def _select(self, X, y, model, batch_size, candidates, rng):
        rng = _strategy_rng(self, rng)
        if self._X is not X:
            self._build_tree(X)
        self._absorb_labels(y)
        available = np.zeros(self._n, dtype=bool)
        available[candidates] = True
        available = available[self._order]  # in leaf order: a node is a contiguous slice
        cumulative = np.concatenate([[0], np.cumsum(available)])
        nodes = np.flatnonzero(self._in_pruning)
        starts, sizes = self._start[nodes], self._size[nodes]
        n_available = cumulative[starts + sizes] - cumulative[starts]
        weight = sizes * (self._bound[nodes] if self.params["select"] == "active" else 1.0)
        weight = np.where(n_available > 0, weight, 0.0)
        picked: list[int] = []
        for _ in range(batch_size):
            cumw = np.cumsum(weight)
            i = min(int(np.searchsorted(cumw, rng.random() * cumw[-1], side="right")), nodes.size - 1)
            while weight[i] == 0:  # guard against the float edge of the last bin
                i -= 1
            start = starts[i]
            slots = np.flatnonzero(available[start:start + sizes[i]])
            position = start + slots[rng.integers(slots.size)]
            row = int(self._order[position])
            available[position] = False
            n_available[i] -= 1
            if n_available[i] == 0:
                weight[i] = 0.0
            picked.append(row)
            self._origin[row] = int(nodes[i])
        return np.asarray(picked, dtype=np.int64)


class InformativeDiverse(QueryStrategy):
    """Informative and diverse batch sampling: small margin, pool-like cluster mix.

    Candidates are ranked by the fitted query model's margin (smallest first, stable: ties
    in candidate order), and clustered by k-means on X (k = number of classes the model
    knows, k-means++ with one initialisation, ``random_state`` of the strategy). Cluster
    c holds the share p_c of the candidates and gets a quota of ceil(batch_size * p_c)
    picks; the batch is filled by walking down the margin ranking and taking each
    candidate whose cluster is still under quota. The quotas always admit the first
    candidate, so at batch size 1 the pick is exactly the Margin pick (no clustering is
    done then), which lu2023 (Appendix A.5) uses as a sanity check.
    """

    implements = "informative and diverse batch sampling"
    model_use = "fitted"

    def _select(self, X, y, model, batch_size, candidates, rng):
        order = np.argsort(margin_scores(model, X[candidates]), kind="stable")
        if batch_size == 1:
            return candidates[order[:1]]
        classes = getattr(model, "classes_", None)
        n_classes = len(classes) if classes is not None else np.unique(y[y != MISSING]).size
        k = min(max(int(n_classes), 1), candidates.size)
        if k < 2:
            return candidates[order[:batch_size]]
        cluster = _quiet_kmeans(k, self.random_state, X[candidates]).labels_
        quota = np.ceil(batch_size * np.bincount(cluster, minlength=k) / candidates.size).astype(np.int64)
        taken = np.zeros(k, dtype=np.int64)
        picked: list[int] = []
        for j in order:
            c = cluster[j]
            if taken[c] < quota[c]:
                taken[c] += 1
                picked.append(int(j))
                if len(picked) == batch_size:
                    break
        if len(picked) < batch_size:  # cannot happen (sum of quotas >= batch), kept as a guard
            chosen = set(picked)
            picked += [int(j) for j in order if int(j) not in chosen][:batch_size - len(picked)]
        return candidates[picked]


class MarginClusterMean(QueryStrategy):
    """Representative margin cluster mean sampling (Xu, Yu, Tresp, Xu & Wang 2003).

    The candidates inside the margin of the fitted query model are clustered by k-means
    with k = batch_size. ``margin="labeled"`` (default) counts a candidate as inside when
    it lies closer to the boundary than every labeled row (``margin_scores`` below the
    smallest labeled one): the region the labeled data has not covered yet, as the Google
    toolbox's sampler defines it. A number instead is a fixed threshold (1.0 is the SVM's
    margin |f(x)| < 1; for more classes the top-two gap, a heuristic). Clustering uses
    k-means++, one initialisation, the strategy's ``random_state``; the in-margin
    candidate nearest (euclidean) to each centroid is queried, centroid by centroid,
    skipping rows already taken; ties go to the first in candidate order. At batch size 1
    the single centroid is the mean of the in-margin candidates, so the pick is the
    in-margin candidate nearest that mean (computed directly, no k-means). When fewer than
    batch_size candidates lie inside the margin, the batch_size smallest-margin candidates
    are taken (what clustering them into batch_size clusters would give).
    """

    implements = "margin cluster mean sampling"
    model_use = "fitted"
    param_defaults = {"margin": "labeled"}

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        margin = self.params["margin"]
        if margin != "labeled" and not isinstance(margin, (int, float)):
            raise AuditError(f"mcm margin must be 'labeled' or a number, not {margin!r}")

    def _select(self, X, y, model, batch_size, candidates, rng):
        scores = margin_scores(model, X[candidates])
        threshold = self.params["margin"]
        if threshold == "labeled":
            threshold = margin_scores(model, X[y != MISSING]).min()
        inside = np.flatnonzero(scores < float(threshold))
        if inside.size < batch_size:
            return candidates[np.argsort(scores, kind="stable")[:batch_size]]
        points = X[candidates[inside]]
        if batch_size == 1:
            centers = points.mean(axis=0, keepdims=True)
        else:
            centers = _quiet_kmeans(batch_size, self.random_state, points).cluster_centers_
        distances = cdist(centers, points, metric="sqeuclidean")
        picked: list[int] = []
        for row in distances:
            row[picked] = np.inf
            picked.append(int(np.argmin(row)))
        return candidates[inside[picked]]


def libact_sigma_term(sigma: float) -> float:
    """What libact 0.1.6's C code adds to the Fisher diagonal for ``sigma``.

    ``estVar`` parses ``sigma`` with the format "d" (a C double) into a variable declared
    ``int``, so on a little-endian machine (x86-64) the int holds the low 32 bits of the
    double's bit pattern; ``Fisher`` then adds ``1.0/sigma*sigma`` (parsed as
    ``(1.0/sigma)*sigma``) with that int converted back to double. For every sigma whose
    low 32 bits are zero (100.0, 1.0, 2.0, ...) the int is 0 and the term is ``inf * 0``,
    NaN; otherwise (0.1, 3.7, ...) it is 1.0 up to one rounding, whatever sigma was meant to be.
    """
    as_int = struct.unpack("<i", struct.pack("<d", float(sigma))[:4])[0]
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(np.float64(1.0) / np.float64(as_int) * np.float64(as_int))


def _sigmoid(values: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return 1 / (1 + np.exp(-values))


def _predict_real(model: Any, X: np.ndarray) -> np.ndarray:
    """libact's ``LogisticRegression.predict_real``: the decision values, as (-d, d) for two classes."""
    values = model.decision_function(X)
    return np.vstack((-values, values)).T if values.ndim == 1 else values


def libact_trace_variance(sigma_term: float, PI: np.ndarray, X: np.ndarray, epi: np.ndarray,
                          ex: np.ndarray) -> float:
    """libact 0.1.6's ``estVar`` (trace optimality): ``trace(A pinv(F))``, in closed form.

    As the C code builds them, with K = ``PI.shape[1]`` labels and d features:
    ``A = sum_n kron(G_n G_n, x_n x_n^T)`` over the labeled rows, ``G_n = diag(pi_n) - pi_n pi_n^T``;
    ``F = kron(P, ex ex^T) + sigma_term I`` with ``P_pp = epi_p (1 - epi_p)`` and, off the
    diagonal, ``P_pq = +epi_p epi_q`` (the C code's sign, not the Fisher information's minus).
    F is the identity times ``sigma_term`` plus a rank-K term along ``ex``; with
    ``P = V diag(lam) V^T`` and ``c = ex.ex``,
    ``pinv(F) = I / sigma_term + kron(V diag(1/(sigma_term + c lam) - 1/sigma_term) V^T, u u^T)``,
    ``u = ex / sqrt(c)``, so the trace needs no (K d) x (K d) matrix:
    ``sum_n |G_n|_F^2 |x_n|^2 / sigma_term + sum_n tr(G_n G_n W) (x_n.ex)^2 / c``.
    A NaN ``sigma_term`` (see :func:`libact_sigma_term`) makes the C code's SVD fail to
    converge; its pseudo-inverse then keeps no singular value and the score is 0.0.
    (The C code also drops singular values <= 1e-30; ``sigma_term + c lam`` that small does
    not occur with ``sigma_term`` = 1.)
    """
    if not np.isfinite(sigma_term):
        return 0.0
    G = PI[:, :, None] * np.eye(PI.shape[1]) - PI[:, :, None] * PI[:, None, :]
    M = G @ G  # (n, K, K), symmetric
    P = np.outer(epi, epi)
    np.fill_diagonal(P, epi * (1.0 - epi))
    lam, V = np.linalg.eigh(P)
    c = float(ex @ ex)
    score = float(np.einsum("nkk->n", M) @ np.einsum("nd,nd->n", X, X)) / sigma_term
    if c > 0:
        W = (V * (1.0 / (sigma_term + c * lam) - 1.0 / sigma_term)) @ V.T
        along = (X @ ex) ** 2 / c
        score += float(np.einsum("npq,pq->n", M, W) @ along)
    return score


class VarianceReduction(QueryStrategy):
    """Variance reduction (Schein & Ungar 2007), re-implemented from libact 0.1.6, picks included.

    libact's ``VarianceReduction.make_query`` trains the LR query model on the labeled
    rows and, for every unlabeled row x (in row order) and every i in
    ``range(label_count)`` (the number of distinct labels present), retrains it on the
    labeled rows plus (x, i), takes ``PI = sigmoid(decision values)`` on the labeled rows
    and on x, and scores ``E(x) = sum_i sigmoid(d(x))_i * estVar(sigma, PI, X, PI_x, x)``;
    the pick is the first minimum. This class computes the same, with these libact 0.1.6
    behaviours kept because they decide its picks:

    - binary labels are -1/+1 (as the libact adapter passes them), yet the hypothetical
      labels are 0 and 1: with i = 0 the retrained model sees a third class, and
      ``sigmoid(d(x))_0`` (the weight of i = 0) is the probability of class -1;
    - the variance term is :func:`libact_trace_variance` with the C code's sign of the
      off-diagonal Fisher blocks and its diagonal term :func:`libact_sigma_term`: sigma
      is read as a C int, so sigma = 100 (lu2023) adds NaN, every score is 0.0 and the pick
      is the first unlabeled row (Uniform in pool order); sigma = 0.1 (zhan2021) adds 1.0;
    - the scores go through ``multiprocessing.Pool(n_jobs).map`` in chunks of
      ``ceil(n / (4 n_jobs))`` rows; within a chunk the tasks share one pickled copy of the
      LR estimator, which each task refits, so every row but a chunk's first is weighted by
      the model fitted on the labeled rows plus the previous row with label
      ``label_count - 1``. ``n_jobs`` sets only this chunking here (the work is serial).

    libact stores ``optimality`` and never reads it (the score is always the trace), so
    this class takes no such parameter. The query model is trained with scikit-learn's
    ``LogisticRegression`` built from the spec, as libact's wrapper does.
    Differences from libact's own run: floating-point rounding (closed-form trace instead
    of an SVD pseudo-inverse), and no "SVD failed to converge" lines on stdout.
    """

    implements = "variance reduction (Schein & Ungar 2007) as libact 0.1.6 computes it"
    param_defaults = {"sigma": 100.0, "n_jobs": 1}
    model_use = "own"
    batch = False

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        sigma, n_jobs = self.params["sigma"], self.params["n_jobs"]
        if isinstance(sigma, bool) or not isinstance(sigma, (int, float)) or not sigma > 0:
            raise AuditError(f"VarianceReduction sigma must be a positive number, not {sigma!r}")
        if isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs < 1:
            raise AuditError(f"VarianceReduction n_jobs must be a positive integer, not {n_jobs!r}")
        if self.query_model.name != "lr":
            raise AuditError(f"VarianceReduction needs an LR query model (name 'lr'), not {self.query_model}")
        self._sigma_term = libact_sigma_term(float(sigma))
        self._X: np.ndarray | None = None
        self._to_libact: np.ndarray | None = None

    def _fit(self, X: np.ndarray, y: np.ndarray) -> Any:
        return self.query_model.build(self.random_state).fit(X, y)

    def _select(self, X, y, model, batch_size, candidates, rng):
        if batch_size != 1:
            raise StrategyError("VarianceReduction queries one example at a time")
        if self._X is not X:  # a new pool: binary labels become -1/+1 as the libact adapter maps them
            known = y[y != MISSING]
            self._X = X
            self._to_libact = np.array([-1, 1]) if known.size and known.max() <= 1 else None
        labeled = np.flatnonzero(y != MISSING)
        y_labeled = y[labeled] if self._to_libact is None else self._to_libact[y[labeled]]
        rows = np.sort(np.asarray(candidates))
        if not np.isfinite(self._sigma_term):
            warnings.warn(DegenerateQueryWarning(
                f"VR scores are all 0.0: libact reads sigma={self.params['sigma']} as a C int, 0, and adds inf*0 (NaN) "
                "to the Fisher diagonal; each query is the first unlabeled entry"))
            return rows[:1]  # libact's min() takes the first row
        X_l = X[labeled]
        label_count = np.unique(y_labeled).size
        chunk = -(-rows.size // (4 * self.params["n_jobs"]))  # Pool.map's chunksize
        base = self._fit(X_l, y_labeled)
        errors: list[float] = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", category=RuntimeWarning)
            for start in range(0, rows.size, chunk):
                current = base  # each chunk unpickles the model as fitted on the labeled rows
                for row in rows[start:start + chunk]:
                    x = X[row]
                    weight = _sigmoid(_predict_real(current, x[None, :]))[-1]
                    X_plus = np.vstack((X_l, x[None, :]))
                    total = 0.0
                    for i in range(label_count):
                        current = self._fit(X_plus, np.append(y_labeled, i))
                        PI = _sigmoid(_predict_real(current, X_plus))
                        total += weight[i] * libact_trace_variance(self._sigma_term, PI[:-1], X_l, PI[-1], x)
                    errors.append(float(total))
        return rows[[errors.index(min(errors))]]


class NotWritten(QueryStrategy):
    """A strategy a published protocol ran that al-audit cannot run faithfully: listed in the
    capability matrix as unavailable with ``reason``, never replaced by a look-alike."""

    reason = ""

    @classmethod
    def availability(cls) -> str | None:
        return cls.reason

    def _select(self, X, y, model, batch_size, candidates, rng):
        raise StrategyError(self.reason)


def _not_written(name: str, reason: str) -> type[QueryStrategy]:
    return type(name, (NotWritten,), {"implements": name, "reason": reason, "__doc__": reason, "__module__": __name__})


# CDALBench's methods no library here provides (its Table 3, App. J)
NOT_WRITTEN = {
    "bald": _not_written("BALD (MC dropout)", "CDALBench's BALD samples Monte-Carlo dropout masks of the one "
                         "classifier; scikit-activeml's GreedyBALD samples an ensemble, and Table 7's tabular "
                         "MLPs have dropout 0, so no faithful BALD can be built from what the paper states"),
    "coregcn": _not_written("Core-GCN", "Core-GCN trains a graph convolutional network on the classifier's "
                            "embeddings; no installed library provides it, and App. J does not state it fully"),
    "galaxy": _not_written("GALAXY", "GALAXY's graph bisection over the classifier's outputs is in no "
                           "installed library, and App. J does not state it fully"),
    "dsa": _not_written("DSA", "distance-based surprise adequacy is in no installed library, and App. J does "
                        "not state its set construction fully"),
    "lsa": _not_written("LSA", "likelihood-based surprise adequacy is in no installed library, and App. J "
                        "does not state its density model"),
}


STRATEGIES: dict[str, type[QueryStrategy]] = {
    **NOT_WRITTEN,
    "uniform": Uniform,
    "margin": Margin,
    "coreset": KCenter,
    "graph": GraphDensity,
    "hier": Hierarchical,
    "infodiv": InformativeDiverse,
    "mcm": MarginClusterMean,
    "vr": VarianceReduction,
}
