"""LAL's forests on the lean path: LeanForestRegressor and LeanForest's out-of-bag score must be
scikit-learn's bit for bit (or be scikit-learn's), and a LAL replay the same either way."""
import warnings
from dataclasses import replace

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

from adapters import alipy as al
from audit.engine import scratch
from audit.engine.runner import run_trial
from audit.fast import forest
from audit.fast.forest import LeanForest, LeanForestRegressor
from audit.fast.policy import LIBRARY, fast_path_verified
from audit.protocols import load_protocol
from tests.conftest import assert_same_replay, single_strategy
from tests.plain_libraries import plain_libraries

LAL_SELECTOR = {"n_estimators": 60, "max_depth": 40, "max_features": 6, "oob_score": True, "n_jobs": 1}
"""ALiPy's LAL regressor (2,000 trees, os.cpu_count() jobs there), with fewer trees and one job."""


def _fit_both(reference_class, lean_class, X, y, **params):
    models = []
    for cls in (reference_class, lean_class):
        np.random.seed(42)  # random_state None: the global generator, as ALiPy's forests use it
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            models.append(cls(**params).fit(X, y))
    return models


def _same_trees(reference, lean):
    for a, b in zip(reference.estimators_, lean.estimators_, strict=True):
        for key in ("feature", "threshold", "value", "children_left", "children_right", "max_depth"):
            assert np.array_equal(getattr(a.tree_, key), getattr(b.tree_, key)), key


def _lal_like_rows(rng, n):
    """Rows shaped like LAL's training data: 8 features, the last a labelled-set size."""
    X = np.column_stack([rng.random((n, 7)), rng.integers(2, 50, n)])
    return X, X[:, 0] * 0.1 - X[:, 1] * X[:, 6] + rng.normal(scale=0.05, size=n)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_lean_regressor_grows_and_reads_scikit_learns_trees(seed):
    rng = np.random.default_rng(seed)
    X, y = _lal_like_rows(rng, 300)
    reference, lean = _fit_both(RandomForestRegressor, LeanForestRegressor, X, y, **LAL_SELECTOR)
    assert lean.fast_path_ == "lean-forest-regressor"
    _same_trees(reference, lean)
    assert lean.oob_score_ == reference.oob_score_
    assert np.array_equal(lean.oob_prediction_, reference.oob_prediction_)
    X_new, _ = _lal_like_rows(rng, 150)
    assert np.array_equal(lean.predict(X_new), reference.predict(X_new))


def test_with_several_jobs_the_lean_sum_is_scikit_learns_in_tree_order():
    """scikit-learn adds the trees as its threads finish; its one-job order is the lean one."""
    X, y = _lal_like_rows(np.random.default_rng(3), 200)
    reference, lean = _fit_both(RandomForestRegressor, LeanForestRegressor, X, y, **{**LAL_SELECTOR, "n_jobs": 2})
    X_new, _ = _lal_like_rows(np.random.default_rng(4), 50)
    reference.set_params(n_jobs=1)
    assert np.array_equal(lean.predict(X_new), reference.predict(X_new))


@pytest.mark.parametrize("n_labeled", [6, 40])
def test_the_lean_forests_out_of_bag_score_is_scikit_learns(heart, n_labeled):
    """ALiPy's per-round forest: 50 trees, out-of-bag score, 8 jobs, on a few labelled rows."""
    rows = np.random.default_rng(n_labeled).permutation(heart.y.size)[:n_labeled]
    X, y = heart.X[rows], heart.y[rows]
    reference, lean = _fit_both(RandomForestClassifier, LeanForest, X, y, n_estimators=50, oob_score=True, n_jobs=8)
    assert lean.fast_path_ == "lean-forest"
    _same_trees(reference, lean)
    assert lean.oob_score_ == reference.oob_score_
    assert np.array_equal(lean.oob_decision_function_, reference.oob_decision_function_)
    assert np.array_equal(lean.feature_importances_, reference.feature_importances_)
    for a, b in zip(reference.estimators_, lean.estimators_):
        assert np.array_equal(a.predict_proba(heart.X), b.predict_proba(heart.X))


def test_rows_without_an_out_of_bag_tree_warn_as_scikit_learn_warns():
    X, y = np.arange(12.0).reshape(6, 2), np.array([0, 1, 0, 1, 0, 1])
    for cls in (RandomForestClassifier, LeanForest):
        with pytest.warns(UserWarning, match="Some inputs do not have OOB scores"):
            cls(n_estimators=2, oob_score=True, random_state=0).fit(X, y)


@pytest.mark.parametrize("params, y_kind", [({"criterion": "absolute_error"}, "float"), ({"max_samples": 0.5}, "float"),
                                            ({}, "nan"), ({"oob_score": lambda y, p: 0.0}, "float")])
def test_what_the_lean_regressor_does_not_cover_is_scikit_learns(params, y_kind):
    X, y = _lal_like_rows(np.random.default_rng(5), 80)
    if y_kind == "nan":
        y[3] = np.nan
        with pytest.raises(ValueError, match="NaN"):
            LeanForestRegressor(n_estimators=5).fit(X, y)
        return
    reference, lean = _fit_both(RandomForestRegressor, LeanForestRegressor, X, y, n_estimators=5, **params)
    assert lean.fast_path_ == LIBRARY
    assert np.array_equal(lean.predict(X), reference.predict(X))


def test_without_the_tree_builder_the_regressor_is_scikit_learns(monkeypatch):
    monkeypatch.setattr(forest, "_tree_parts", lambda: None)
    X, y = _lal_like_rows(np.random.default_rng(7), 40)
    assert LeanForestRegressor(n_estimators=5, random_state=1).fit(X, y).fast_path_ == LIBRARY


def test_lals_alipy_object_holds_lean_forests_with_alipys_parameters(sonar):
    qs = al.LAL(random_state=3)._sync(sonar.X, np.r_[[0, 1], np.full(sonar.y.size - 2, -1)])
    assert type(qs.model) is LeanForest and qs.model.get_params() == RandomForestClassifier(
        n_estimators=50, oob_score=True, n_jobs=8).get_params()
    assert type(qs._selector) is LeanForestRegressor and qs._selector.fast_path_ == "lean-forest-regressor"
    assert (qs._selector.n_estimators, qs._selector.max_depth, qs._selector.max_features) == (20, 40, 6)  # conftest: 20


@pytest.mark.parametrize("protocol, dataset, trial, library", [("lu2023", "heart", 0, "fallback"),
                                                                ("zhan2021", "sonar", 1, "as shipped")])
def test_a_lal_replay_with_the_lean_forests_is_the_replay_without_them(request, monkeypatch, protocol, dataset,
                                                                      trial, library):
    """The library side: the lean forests failing their self-check (scikit-learn's fits in the
    same ALiPy object), or ALiPy and scikit-learn as shipped (ALiPy's own training call)."""
    data = request.getfixturevalue(dataset)
    shipped = load_protocol(protocol)
    replay = single_strategy(shipped, shipped.strategy("lal"), budget=12)
    fast = run_trial(replay, dataset, data.X, data.y, "lal", trial)
    if library == "fallback":
        for cls in (LeanForest, LeanForestRegressor):
            monkeypatch.setattr(cls, "_fast_path_verified", lambda self: False)
        plain = run_trial(replay, dataset, data.X, data.y, "lal", trial)
        assert_same_replay(fast, plain, "lean-forest+lean-forest-regressor+lean-svc", "lean-svc+library")
    else:
        with plain_libraries():
            plain = run_trial(replay, dataset, data.X, data.y, "lal", trial)
        assert_same_replay(fast, plain, "lean-forest+lean-forest-regressor+lean-svc", "library")


@pytest.mark.parametrize("rows", ["float32", "fortran", "int", "nan", "width"])
def test_a_lean_trees_probabilities_are_scikit_learns_or_its_error(heart, rows):
    reference, lean = _fit_both(RandomForestClassifier, LeanForest, heart.X[:30], heart.y[:30], n_estimators=3)
    X = {"float32": heart.X.astype(np.float32), "fortran": np.asfortranarray(heart.X), "int": heart.X.astype(int),
         "nan": np.where(np.eye(*heart.X.shape) == 1, np.nan, heart.X), "width": heart.X[:, :5]}[rows]
    for a, b in zip(reference.estimators_, lean.estimators_):
        if rows == "width":
            with pytest.raises(ValueError, match="features"):
                b.predict_proba(X)
        else:
            assert np.array_equal(a.predict_proba(X), b.predict_proba(X))


def test_a_forest_of_stumps_has_scikit_learns_zero_importances():
    X, y = np.ones((10, 3)), np.arange(10) % 2  # no split possible
    reference, lean = _fit_both(RandomForestClassifier, LeanForest, X, y, n_estimators=4)
    assert lean.fast_path_ == "lean-forest"
    assert np.array_equal(reference.feature_importances_, lean.feature_importances_)
    assert not lean.feature_importances_.any()


def test_lal_data_generated_with_the_lean_forests_is_scikit_learns(monkeypatch):
    """adapters/lal_data.py grows its forests through the lean path: the same file content."""
    from adapters import lal_data

    config = lal_data.LalDataConfig(episodes=1, sizes=tuple(range(2, 7)), candidates=4, train_size=80, n_trees=12,
                                    selector_trees=8)
    lean = lal_data.generate(config)
    for cls in (LeanForest, LeanForestRegressor):
        monkeypatch.setattr(cls, "_fast_path_verified", lambda self: False)
    plain = lal_data.generate(config)
    assert all(np.array_equal(a, b) for a, b in zip(lean, plain))


def _count_selector_fits(monkeypatch) -> list[int]:
    """A list that grows by one at every LeanForestRegressor fit of a trial (the once-per-process
    self-check and the once-per-session generation of LAL's training data, which fit some too,
    done first)."""
    fast_path_verified(LeanForestRegressor)
    al.lal_data.ensure(al.LAL._generated_config("LAL_iterative"))
    trained = []
    fit = LeanForestRegressor.fit
    monkeypatch.setattr(LeanForestRegressor, "fit", lambda self, X, y: trained.append(1) or fit(self, X, y))
    return trained


def test_lal_trains_its_selector_once_per_run_and_seed_and_replays_alike(sonar, run_dir, monkeypatch):
    """Two protocols' trials of one seed share the selector (the global random state at its
    training is the same); every trial equals the one that trains its own, outside a run."""
    shipped = load_protocol("zhan2021")
    scaled = replace(shipped, name="zhan2021-scaled", scaling=dict(load_protocol("zhan2021-released").scaling))
    replays = [single_strategy(p, p.strategy("lal"), budget=8) for p in (shipped, scaled)]
    trained = _count_selector_fits(monkeypatch)
    alone = [run_trial(p, "sonar", sonar.X, sonar.y, "lal", seed) for p in replays for seed in (0, 1)]
    assert len(trained) == 4
    with scratch.using(str(run_dir)):
        shared = [run_trial(p, "sonar", sonar.X, sonar.y, "lal", seed) for p in replays for seed in (0, 1)]
    assert len(trained) == 6 and len(list(run_dir.iterdir())) == 2
    for one, other in zip(alone, shared):
        assert_same_replay(one, other, "lean-forest+lean-forest-regressor+lean-svc",
                           "lean-forest+lean-forest-regressor+lean-svc")
    assert alone[0].aubc != alone[2].aubc  # the scaling changes the replay (its task model), not the selector


def test_a_read_back_selector_leaves_the_global_state_where_training_does(sonar, run_dir, monkeypatch):
    trained = _count_selector_fits(monkeypatch)
    states = []
    for _ in range(2):
        with scratch.using(str(run_dir)):
            np.random.seed(5)
            qs = al._ql.QueryInstanceLAL(sonar.X, sonar.y, mode="LAL_iterative", data_path=str(al.lal_data.ensure(
                al.LAL._generated_config("LAL_iterative"))[0]), cls_est=50, train_slt=False)
            al._lean_lal(qs)
            states.append((np.random.get_state(), qs._selector.predict(np.ones((3, 8)))))
    assert len(trained) == 1  # the second selector was read back
    (first, first_scores), (second, second_scores) = states
    assert all(np.array_equal(a, b) for a, b in zip(first, second)) and np.array_equal(first_scores, second_scores)
