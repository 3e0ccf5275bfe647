"""Random forests that fit and predict exactly like scikit-learn's, without their per-tree overhead.

On the small labeled sets of an active-learning replay, ``RandomForestClassifier.fit``
spends most of its time on Python bookkeeping per tree (parameter introspection, input
checks, a joblib call), not on building trees: about 0.13 s for 100 trees on 500 rows of
2 features, of which the trees themselves take a fraction. lu2023's compatibility grids
refit a forest after every query of a ~1,000-query trial, so that overhead was the run
time, and ALiPy's LAL fits a 50-tree forest with out-of-bag scoring every round and asks a
2,000-tree regressor for every candidate's score. :class:`LeanForest` (a
``RandomForestClassifier``) and :class:`LeanForestRegressor` (a ``RandomForestRegressor``)
build and read the same trees through scikit-learn's own tree builder, with the same random
draws in the same order, so trees, out-of-bag scores and predictions are bit-identical.
They follow the fast-path policy of :mod:`audit.fast.policy` (supported scikit-learn
releases, the forest's own parameter and input validation, a once-per-process self-check)
and take the lean path only for the options they reproduce (the defaults, with any
``n_estimators``, ``criterion`` (a regressor: ``squared_error`` only), ``max_depth``,
``max_features``, ``min_samples_split``/``min_samples_leaf`` as integers, ``oob_score``
True or False, and any ``n_jobs``: the trees do not depend on it); otherwise they are
scikit-learn's forests.

Predictions sum the trees in tree order, which is scikit-learn's order with ``n_jobs`` 1;
with more jobs scikit-learn adds the trees as its threads finish them, so its last bits can
change from one call to the next, and the lean sum is the one its threads give when they
finish in order.
"""
from __future__ import annotations

import numbers
import warnings

import numpy as np
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor
from sklearn.metrics import r2_score
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor
from sklearn.utils import check_random_state

from audit.fast.policy import FastPathMixin, public_view

_MAX_SEED = np.iinfo(np.int32).max
_FLOAT32_MAX = np.finfo(np.float32).max  # the trees split float32 features
# Parameters the lean path reproduces at these values only (the forests' defaults).
_FIXED = {"bootstrap": True, "warm_start": False, "ccp_alpha": 0.0, "max_samples": None, "max_leaf_nodes": None,
          "min_weight_fraction_leaf": 0.0, "monotonic_cst": None}


def _tree_parts():
    """scikit-learn's private tree-building classes, or None when this version lacks them."""
    try:
        from sklearn.tree._criterion import MSE, Entropy, Gini
        from sklearn.tree._splitter import BestSplitter
        from sklearn.tree._tree import DepthFirstTreeBuilder, Tree
    except ImportError:
        return None
    return ({"gini": Gini, "entropy": Entropy, "log_loss": Entropy, "squared_error": MSE}, BestSplitter,
            DepthFirstTreeBuilder, Tree)


class _LeanTrees(FastPathMixin):
    """The lean fit both forests share: the trees, then the out-of-bag attributes."""

    _lean_criteria: frozenset[str]

    def _fast_options(self, X, y, sample_weight) -> bool:
        params = self.get_params(deep=False)
        return (sample_weight is None and _tree_parts() is not None and self.criterion in self._lean_criteria
                and type(self.oob_score) is bool and self._lean_targets_ok(y)
                and all(type(params[k]) is type(v) and params[k] == v for k, v in _FIXED.items())
                and isinstance(self.min_samples_split, numbers.Integral)
                and isinstance(self.min_samples_leaf, numbers.Integral)
                and np.abs(X).max() <= _FLOAT32_MAX)  # the trees' float32 copy is finite too

    def _lean_targets_ok(self, y) -> bool:
        return True

    def _fast_fit(self, X, y):
        criteria, splitter_class, builder_class, tree_class = _tree_parts()
        X = np.ascontiguousarray(X, dtype=np.float32)
        n_samples, n_features = X.shape
        Y, n_classes, criterion_size = self._lean_targets(y)  # the trees' target column, class counts, criterion's size
        self.n_outputs_, self.n_features_in_ = 1, n_features
        self._n_samples, self._n_samples_bootstrap, self._sample_weight = n_samples, n_samples, None
        self.__dict__.pop("feature_names_in_", None)  # an array has none, as validate_data resets it
        self.estimator_ = self.estimator  # the forests' _validate_estimator
        max_features = _max_features(self.max_features, n_features)
        max_depth = _MAX_SEED if self.max_depth is None else self.max_depth
        min_samples_split = max(self.min_samples_split, 2 * self.min_samples_leaf)
        tree_params = {k: getattr(self, k) for k in self.estimator_params}
        # The forest's generator hands each tree a seed, in tree order, as the forests do.
        forest_rng = check_random_state(self.random_state)
        seeds = [forest_rng.randint(_MAX_SEED) for _ in range(self.n_estimators)]
        # Each tree draws its bootstrap from a generator seeded with its seed, and its splitter
        # draws from a second one seeded the same. Re-seeding one generator gives the same
        # streams without building a RandomState (about 0.2 ms each) twice a tree.
        tree_rng = np.random.RandomState()
        trees, counts = [], []
        for seed in seeds:
            tree_rng.seed(seed)
            count = np.bincount(tree_rng.randint(0, n_samples, n_samples).astype(np.int32),
                                minlength=n_samples).astype(np.float64)  # the bootstrap as row weights
            tree_rng.seed(seed)
            splitter = splitter_class(criteria[self.criterion](1, criterion_size), max_features,
                                      self.min_samples_leaf, 0.0, tree_rng, None)
            tree = tree_class(n_features, n_classes, 1)
            builder_class(splitter, min_samples_split, self.min_samples_leaf, 0.0, max_depth,
                          self.min_impurity_decrease).build(tree, X, Y, count, None)
            estimator = self._lean_estimator(**{**tree_params, "random_state": seed})
            estimator.tree_, estimator.n_outputs_ = tree, 1
            estimator.n_features_in_, estimator.max_features_ = n_features, max_features
            self._lean_tree_attributes(estimator)
            trees.append(estimator)
            counts.append(count)
        self.estimators_ = trees
        if self.oob_score:
            self._lean_oob(X, Y, counts)
        return self

    @property
    def feature_importances_(self):
        """The forests' mean of the trees' importances over the trees that split, normalised;
        computed in this thread (the forests hand each tree's look-up to a pool of ``n_jobs``
        threads and take the results in tree order, so the values are the same)."""
        if self.__dict__.get("fast_path_") != self.fast_path_name:
            return super().feature_importances_
        importances = [tree.feature_importances_ for tree in self.estimators_ if tree.tree_.node_count > 1]
        if not importances:
            return np.zeros(self.n_features_in_, dtype=np.float64)
        importances = np.mean(importances, axis=0, dtype=np.float64)
        return importances / np.sum(importances)

    def _lean_oob(self, X, Y, counts):
        """The out-of-bag predictions (each tree on the rows its bootstrap left out, summed in
        tree order, divided by each row's count) and score, as the forests compute them."""
        n_samples = X.shape[0]
        width = self._lean_oob_width()
        oob = np.zeros((n_samples, width), dtype=np.float64)
        n_oob = np.zeros((n_samples, 1), dtype=np.int64)
        for estimator, count in zip(self.estimators_, counts):
            unsampled = np.flatnonzero(count == 0)
            oob[unsampled] += estimator.tree_.predict(X[unsampled])[:, :width]
            n_oob[unsampled] += 1
        if (n_oob == 0).any():
            warnings.warn("Some inputs do not have OOB scores. This probably means too few trees were used "
                          "to compute any reliable OOB estimates.", UserWarning, stacklevel=3)
            n_oob[n_oob == 0] = 1
        oob /= n_oob
        self._lean_oob_attributes(Y, oob)


class LeanForest(_LeanTrees, RandomForestClassifier):
    """``RandomForestClassifier`` with a lean fit/predict_proba for the options listed above."""

    fast_path_name = "lean-forest"
    _lean_criteria = frozenset({"gini", "entropy", "log_loss"})

    def _fast_options(self, X, y, sample_weight) -> bool:
        return self.class_weight is None and super()._fast_options(X, y, sample_weight)

    @classmethod
    def _agrees_with_parent(cls) -> bool:
        return _agrees_with_random_forest()

    def _lean_estimator(self, **params):
        return _LeanTreeClassifier(**params)

    def _lean_targets(self, y):
        self.classes_, encoded = np.unique(y, return_inverse=True)
        self.n_classes_ = int(self.classes_.size)
        n_classes = np.array([self.n_classes_], dtype=np.intp)
        return np.ascontiguousarray(encoded.reshape(-1, 1), dtype=np.float64), n_classes, n_classes

    def _lean_tree_attributes(self, estimator):
        # a tree sees the encoded labels
        estimator.classes_, estimator.n_classes_ = np.arange(self.n_classes_, dtype=np.float64), self.n_classes_

    def _lean_oob_width(self) -> int:
        return self.n_classes_

    def _lean_oob_attributes(self, Y, oob):
        self.oob_decision_function_ = oob
        # accuracy_score's value: the mean of the exact 0/1 matches, without its target checks
        self.oob_score_ = float(np.mean(Y[:, 0] == np.argmax(oob, axis=1)))

    def predict_proba(self, X):
        if self.__dict__.get("fast_path_") != self.fast_path_name:
            return super().predict_proba(X)
        X = self._validate_X_predict(X)  # the forest's own checks: fitted, feature count, float32
        proba = np.zeros((X.shape[0], self.n_classes_), dtype=np.float64)
        for estimator in self.estimators_:  # summed in tree order, then divided, as the forest does
            proba += estimator.tree_.predict(X)[:, : self.n_classes_]
        proba /= len(self.estimators_)
        return proba


class _LeanTreeClassifier(DecisionTreeClassifier):
    """A tree of a lean forest: its ``predict_proba`` of finite float rows of the fitted width
    reads the tree on their float32 copy, which is all ``validate_data`` would do to them
    (ALiPy's LAL asks each of 50 trees every round)."""

    def predict_proba(self, X, check_input=True):
        if check_input and type(X) is np.ndarray and X.ndim == 2 and X.dtype.kind == "f" and X.dtype.itemsize <= 8 \
                and X.shape[0] > 0 and X.shape[1] == self.n_features_in_ and bool(np.isfinite(X).all()):
            return self.tree_.predict(np.asarray(X, dtype=np.float32))[:, : self.n_classes_]
        return super().predict_proba(X, check_input)


class LeanForestRegressor(_LeanTrees, RandomForestRegressor):
    """``RandomForestRegressor`` with a lean fit/predict for the options listed above."""

    fast_path_name = "lean-forest-regressor"
    _lean_criteria = frozenset({"squared_error"})
    _target_kinds = "f"

    @classmethod
    def _agrees_with_parent(cls) -> bool:
        return _agrees_with_random_forest_regressor()

    def _lean_targets_ok(self, y) -> bool:
        return bool(np.isfinite(y).all())  # the regressor's validation refuses a NaN or infinite target

    def _lean_estimator(self, **params):
        return DecisionTreeRegressor(**params)

    def _lean_targets(self, y):
        # a regression tree holds one value per node; its criterion takes the row count
        return np.ascontiguousarray(y.reshape(-1, 1), dtype=np.float64), np.array([1], dtype=np.intp), y.shape[0]

    def _lean_tree_attributes(self, estimator):
        pass

    def _lean_oob_width(self) -> int:
        return 1

    def _lean_oob_attributes(self, Y, oob):
        self.oob_prediction_ = oob[:, 0]
        self.oob_score_ = r2_score(Y, self.oob_prediction_)

    def predict(self, X):
        if self.__dict__.get("fast_path_") != self.fast_path_name:
            return super().predict(X)
        X = self._validate_X_predict(X)  # the forest's own checks: fitted, feature count, float32
        prediction = np.zeros(X.shape[0], dtype=np.float64)
        for estimator in self.estimators_:  # summed in tree order, then divided, as the forest does
            prediction += estimator.tree_.predict(X)[:, 0]
        prediction /= len(self.estimators_)
        return prediction


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


def _same_trees(reference, lean) -> bool:
    return len(reference.estimators_) == len(lean.estimators_) and all(
        np.array_equal(getattr(a.tree_, k), getattr(b.tree_, k))
        for a, b in zip(reference.estimators_, lean.estimators_)
        for k in ("feature", "threshold", "value", "children_left", "children_right"))


def _fitted_pair(reference_class, params, X, y):
    """A scikit-learn forest and the lean one with its parameters fitted on the lean path alone."""
    with warnings.catch_warnings():  # a check, not a fit of the trial: its warnings are not the trial's
        warnings.simplefilter("ignore")
        reference = reference_class(**params).fit(X, y)
        lean = _LEAN_OF[reference_class](**reference.get_params())
        lean._fast_fit(X, y)
    lean.fast_path_ = lean.fast_path_name
    return reference, lean


def _agrees_with_random_forest() -> bool:
    """Do lean and scikit-learn forests agree bit for bit here (trees, probabilities, also of
    the lean forest seen as a RandomForestClassifier (:func:`public_view`), out-of-bag
    attributes, feature importances)?

    Compared on small fixed problems (two and three classes, ties in the features), once
    per process (:func:`audit.fast.policy.fast_path_verified`).
    """
    rng = np.random.default_rng(20231)
    cases = ((2, {"n_estimators": 12}),
             (2, {"n_estimators": 9, "oob_score": True, "n_jobs": 2}),
             (3, {"n_estimators": 7, "max_features": None, "criterion": "entropy", "max_depth": 4,
                  "min_samples_leaf": 2, "oob_score": True}))
    for n_classes, params in cases:
        X = np.round(rng.normal(size=(60, 5)), 1)
        y = rng.integers(0, n_classes, size=60) * 2 + 1  # labels 1, 3, 5: encoded by the forest
        X_new = rng.normal(size=(25, 5))
        reference, lean = _fitted_pair(RandomForestClassifier, {"random_state": 7, **params}, X, y)
        if not (_same_trees(reference, lean) and np.array_equal(reference.predict_proba(X_new), lean.predict_proba(X_new))
                and np.array_equal(reference.predict_proba(X_new), public_view(lean).predict_proba(X_new))
                and np.array_equal(reference.classes_, lean.classes_) and _same_oob(reference, lean)
                and np.array_equal(reference.feature_importances_, lean.feature_importances_)
                and all(np.array_equal(a.predict_proba(X_new), b.predict_proba(X_new))
                        for a, b in zip(reference.estimators_, lean.estimators_))):
            return False
    return True


def _agrees_with_random_forest_regressor() -> bool:
    """Do lean and scikit-learn regression forests agree bit for bit here (trees,
    predictions, out-of-bag attributes)? scikit-learn sums the trees' predictions in tree
    order with ``n_jobs`` 1, the order the lean path always takes."""
    rng = np.random.default_rng(20232)
    cases = ({"n_estimators": 12},
             {"n_estimators": 30, "max_depth": 6, "max_features": 3, "oob_score": True})
    for params in cases:
        X = np.round(rng.normal(size=(70, 5)), 1)
        y = np.round(X[:, 0] - X[:, 1] ** 2 + rng.normal(size=70), 2)  # ties in the target as well
        X_new = rng.normal(size=(25, 5))
        reference, lean = _fitted_pair(RandomForestRegressor, {"random_state": 11, **params}, X, y)
        if not (_same_trees(reference, lean) and np.array_equal(reference.predict(X_new), lean.predict(X_new))
                and _same_oob(reference, lean)):
            return False
    return True


def _same_oob(reference, lean) -> bool:
    names = ("oob_score_", "oob_decision_function_", "oob_prediction_")
    return all(hasattr(reference, k) == hasattr(lean, k) and (not hasattr(reference, k) or np.array_equal(
        getattr(reference, k), getattr(lean, k))) for k in names)


_LEAN_OF = {RandomForestClassifier: LeanForest, RandomForestRegressor: LeanForestRegressor}
