"""A random forest that fits and predicts exactly like scikit-learn's, without its per-tree overhead.

On the small labeled sets of an active-learning replay, ``RandomForestClassifier.fit``
spends most of its time on Python bookkeeping per tree (parameter introspection, input
checks, a joblib call), not on building trees: about 0.13 s for 100 trees on 500 rows of
2 features, of which the trees themselves take a fraction. lu2023's compatibility grids
refit a forest after every query of a ~1,000-query trial, so that overhead was the run
time. :class:`LeanForest` is a ``RandomForestClassifier`` whose ``fit`` and
``predict_proba`` build and read the same trees through scikit-learn's own tree builder,
with the same random draws in the same order, so trees and probabilities are
bit-identical. It follows the fast-path policy of :mod:`audit.fast.policy` (supported
scikit-learn releases, the forest's own parameter and input validation, a once-per-process
self-check) and takes the lean path only for the options it reproduces (the defaults, with
any ``n_estimators``, ``criterion``, ``max_depth``, ``max_features``,
``min_samples_split``/``min_samples_leaf`` as integers); otherwise it is
``RandomForestClassifier``.
"""
from __future__ import annotations

import numbers

import numpy as np
from sklearn.ensemble import RandomForestClassifier
from sklearn.tree import DecisionTreeClassifier
from sklearn.utils import check_random_state

from audit.fast.policy import FastPathMixin

_MAX_SEED = np.iinfo(np.int32).max
_FLOAT32_MAX = np.finfo(np.float32).max  # the trees split float32 features
# Parameters the lean path reproduces at these values only (RandomForestClassifier's defaults).
_FIXED = {"bootstrap": True, "oob_score": False, "warm_start": False, "class_weight": None,
          "ccp_alpha": 0.0, "max_samples": None, "max_leaf_nodes": None, "min_weight_fraction_leaf": 0.0,
          "monotonic_cst": None}


def _tree_parts():
    """scikit-learn's private tree-building classes, or None when this version lacks them."""
    try:
        from sklearn.tree._criterion import Entropy, Gini
        from sklearn.tree._splitter import BestSplitter
        from sklearn.tree._tree import DepthFirstTreeBuilder, Tree
    except ImportError:
        return None
    return {"gini": Gini, "entropy": Entropy, "log_loss": Entropy}, BestSplitter, DepthFirstTreeBuilder, Tree


class LeanForest(FastPathMixin, RandomForestClassifier):
    """``RandomForestClassifier`` with a lean fit/predict_proba for the options listed above."""

    fast_path_name = "lean-forest"

    def _fast_options(self, X, y, sample_weight) -> bool:
        params = self.get_params(deep=False)
        return (sample_weight is None and _tree_parts() is not None
                and all(type(params[k]) is type(v) and params[k] == v for k, v in _FIXED.items())
                and isinstance(self.min_samples_split, numbers.Integral)
                and isinstance(self.min_samples_leaf, numbers.Integral)
                and np.abs(X).max() <= _FLOAT32_MAX)  # the trees' float32 copy is finite too

    @classmethod
    def _agrees_with_parent(cls) -> bool:
        return _agrees_with_random_forest()

    def _fast_fit(self, X, y):
        criteria, splitter_class, builder_class, tree_class = _tree_parts()
        X = np.ascontiguousarray(X, dtype=np.float32)
        n_samples, n_features = X.shape
        self.classes_, encoded = np.unique(y, return_inverse=True)
        self.n_classes_ = int(self.classes_.size)
        self.n_outputs_, self.n_features_in_ = 1, n_features
        self._n_samples, self._n_samples_bootstrap = n_samples, n_samples
        self.__dict__.pop("feature_names_in_", None)  # an array has none, as validate_data resets it
        self.estimator_ = DecisionTreeClassifier()
        Y = np.ascontiguousarray(encoded.reshape(-1, 1), dtype=np.float64)
        tree_classes = np.arange(self.n_classes_, dtype=np.float64)  # a tree sees the encoded labels
        n_classes = np.array([self.n_classes_], dtype=np.intp)
        max_features = _max_features(self.max_features, n_features)
        max_depth = _MAX_SEED if self.max_depth is None else self.max_depth
        min_samples_split = max(self.min_samples_split, 2 * self.min_samples_leaf)
        tree_params = {k: getattr(self, k) for k in self.estimator_params}
        # The forest's generator hands each tree a seed, in tree order, as RandomForestClassifier does.
        forest_rng = check_random_state(self.random_state)
        seeds = [forest_rng.randint(_MAX_SEED) for _ in range(self.n_estimators)]
        # Each tree draws its bootstrap from a generator seeded with its seed, and its splitter
        # draws from a second one seeded the same. Re-seeding one generator gives the same
        # streams without building a RandomState (about 0.2 ms each) twice a tree.
        tree_rng = np.random.RandomState()
        trees = []
        for seed in seeds:
            tree_rng.seed(seed)
            counts = np.bincount(tree_rng.randint(0, n_samples, n_samples).astype(np.int32),
                                 minlength=n_samples).astype(np.float64)  # the bootstrap as row weights
            tree_rng.seed(seed)
            splitter = splitter_class(criteria[self.criterion](1, n_classes), max_features, self.min_samples_leaf,
                                      0.0, tree_rng, None)
            tree = tree_class(n_features, n_classes, 1)
            builder_class(splitter, min_samples_split, self.min_samples_leaf, 0.0, max_depth,
                          self.min_impurity_decrease).build(tree, X, Y, counts, None)
            estimator = DecisionTreeClassifier(**{**tree_params, "random_state": seed})
            estimator.tree_, estimator.classes_, estimator.n_classes_ = tree, tree_classes, self.n_classes_
            estimator.n_outputs_, estimator.n_features_in_, estimator.max_features_ = 1, n_features, max_features
            trees.append(estimator)
        self.estimators_ = trees
        return self

    def predict_proba(self, X):
        if self.__dict__.get("fast_path_") != self.fast_path_name:
            return super().predict_proba(X)
        X = self._validate_X_predict(X)  # the forest's own checks: fitted, feature count, float32
        proba = np.zeros((X.shape[0], self.n_classes_), dtype=np.float64)
        for estimator in self.estimators_:  # summed in tree order, then divided, as the forest does
            proba += estimator.tree_.predict(X)[:, : self.n_classes_]
        proba /= len(self.estimators_)
        return proba


def _max_features(option, n_features: int) -> int:
    if option == "sqrt":
        return max(1, int(np.sqrt(n_features)))
    if option == "log2":
        return max(1, int(np.log2(n_features)))
    if option is None:
        return n_features
    if isinstance(option, numbers.Integral):
        return int(option)
    return max(1, int(option * n_features)) if option > 0 else 0


def _agrees_with_random_forest() -> bool:
    """Do lean and scikit-learn forests agree bit for bit here (trees and probabilities)?

    Compared on small fixed problems (two and three classes, ties in the features), once
    per process (:func:`audit.fast.policy.fast_path_verified`).
    """
    rng = np.random.default_rng(20231)
    cases = ((2, {"n_estimators": 12}),
             (3, {"n_estimators": 7, "max_features": None, "criterion": "entropy", "max_depth": 4,
                  "min_samples_leaf": 2}))
    for n_classes, params in cases:
        X = np.round(rng.normal(size=(60, 5)), 1)
        y = rng.integers(0, n_classes, size=60) * 2 + 1  # labels 1, 3, 5: encoded by the forest
        X_new = rng.normal(size=(25, 5))
        reference = RandomForestClassifier(random_state=7, **params).fit(X, y)
        lean = LeanForest(**reference.get_params())
        lean._fast_fit(X, y)
        lean.fast_path_ = lean.fast_path_name
        same_trees = all(np.array_equal(getattr(a.tree_, k), getattr(b.tree_, k))
                         for a, b in zip(reference.estimators_, lean.estimators_)
                         for k in ("feature", "threshold", "value", "children_left"))
        if not (same_trees and np.array_equal(reference.predict_proba(X_new), lean.predict_proba(X_new))
                and np.array_equal(reference.classes_, lean.classes_)):
            return False
    return True
