"""LeanForest must be RandomForestClassifier bit for bit, or be RandomForestClassifier (LeanForestRegressor:
tests/test_lean_lal.py; its self-check's fallback is here)."""
import numpy as np
import pytest
from sklearn.base import clone
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

from audit.engine.datasets import load_dataset
from audit.engine.models import ModelSpec
from audit.fast import forest
from audit.fast.forest import LeanForest, LeanForestRegressor
from audit.fast.policy import LIBRARY, FastPathFallbackWarning, fast_path_verified, public_view


def _same_forest(reference, lean, X):
    assert np.array_equal(reference.classes_, lean.classes_)
    assert np.array_equal(reference.predict_proba(X), lean.predict_proba(X))
    assert np.array_equal(reference.predict(X), lean.predict(X))
    for a, b in zip(reference.estimators_, lean.estimators_, strict=True):
        for key in ("feature", "threshold", "value", "children_left", "children_right"):
            assert np.array_equal(getattr(a.tree_, key), getattr(b.tree_, key))


@pytest.mark.parametrize("name", ["checkerboard", "sonar", "wine"])
@pytest.mark.parametrize("n_labeled", [20, 120])
def test_the_lean_forest_grows_scikit_learns_trees_on_real_data(name, n_labeled):
    data = load_dataset(name)
    rows = np.random.default_rng(n_labeled).permutation(data.y.size)
    labeled = rows[:n_labeled]
    reference = RandomForestClassifier(n_estimators=100, random_state=6211).fit(data.X[labeled], data.y[labeled])
    lean = LeanForest(n_estimators=100, random_state=6211).fit(data.X[labeled], data.y[labeled])
    assert lean.fast_path_ == "lean-forest"
    _same_forest(reference, lean, data.X)


@pytest.mark.parametrize("params", [{"criterion": "entropy", "max_depth": 3}, {"max_features": None},
                                    {"min_samples_leaf": 3, "min_samples_split": 4}, {"max_features": 0.5}])
def test_the_lean_forest_follows_the_options_it_covers(params):
    data = load_dataset("sonar")
    reference = RandomForestClassifier(n_estimators=15, random_state=3, **params).fit(data.X[:80], data.y[:80])
    lean = LeanForest(n_estimators=15, random_state=3, **params).fit(data.X[:80], data.y[:80])
    assert lean.fast_path_ == "lean-forest"
    _same_forest(reference, lean, data.X)


@pytest.mark.parametrize("params, fit_kwargs", [({"class_weight": "balanced"}, {}), ({"max_samples": 0.5}, {}),
                                                ({}, {"sample_weight": np.linspace(1, 2, 80)})])
def test_options_the_lean_path_does_not_cover_go_through_scikit_learn(params, fit_kwargs):
    data = load_dataset("sonar")
    reference = RandomForestClassifier(n_estimators=15, random_state=3, **params).fit(
        data.X[:80], data.y[:80], **fit_kwargs)
    lean = LeanForest(n_estimators=15, random_state=3, **params).fit(data.X[:80], data.y[:80], **fit_kwargs)
    assert lean.fast_path_ == LIBRARY
    _same_forest(reference, lean, data.X)


@pytest.mark.parametrize("lean_class, parent", [(LeanForest, RandomForestClassifier),
                                                (LeanForestRegressor, RandomForestRegressor)])
def test_a_failed_self_check_sends_every_forest_through_scikit_learn(monkeypatch, lean_class, parent):
    """The check compares with the real forest: a lean path that draws its seeds
    differently fails it, warns, and then fits are scikit-learn's."""
    original = lean_class._fast_fit

    def shifted_seed(self, X, y):
        self.random_state = (self.random_state or 0) + 1
        return original(self, X, y)

    monkeypatch.setattr(lean_class, "_fast_fit", shifted_seed)
    fast_path_verified.cache_clear()
    try:
        data = load_dataset("sonar")
        X, y = data.X[:60], (data.y[:60] if parent is RandomForestClassifier else data.X[:60, 0])
        with pytest.warns(FastPathFallbackWarning, match=parent.__name__):
            model = lean_class(n_estimators=10, random_state=5).fit(X, y)
        assert model.fast_path_ == LIBRARY
        reference = parent(n_estimators=10, random_state=5).fit(X, y)
        assert np.array_equal(reference.predict(data.X), model.predict(data.X))
        if parent is RandomForestClassifier:
            _same_forest(reference, model, data.X)
    finally:
        fast_path_verified.cache_clear()
    monkeypatch.undo()
    assert fast_path_verified(lean_class) is True


def test_without_the_tree_builder_the_forest_is_scikit_learns(monkeypatch):
    monkeypatch.setattr(forest, "_tree_parts", lambda: None)
    data = load_dataset("sonar")
    assert LeanForest(n_estimators=5, random_state=1).fit(data.X[:40], data.y[:40]).fast_path_ == LIBRARY


def test_the_rf_spec_builds_a_lean_forest_that_clones_like_an_estimator():
    model = ModelSpec("rf").build(11)
    assert isinstance(model, LeanForest) and isinstance(model, RandomForestClassifier)
    assert model.get_params()["n_estimators"] == 100 and model.get_params()["random_state"] == 11
    twin = clone(model)
    assert type(twin) is LeanForest and twin.get_params() == model.get_params()


def test_the_forest_class_path_builds_a_lean_forest_seen_as_scikit_learns_forest():
    data = load_dataset("sonar")
    X, y = data.X[:60], data.y[:60]
    params = {"n_estimators": 20, "max_depth": 10, "criterion": "entropy"}
    model = ModelSpec("sklearn.ensemble.RandomForestClassifier", params).build(5).fit(X, y)
    reference = RandomForestClassifier(random_state=5, **params).fit(X, y)
    assert type(model) is LeanForest and model.fast_path_ == "lean-forest"
    view = public_view(model)
    # the class a library that dispatches on class names (ALPBench) sees, with the same forest
    assert f"{type(view).__module__}.{type(view).__qualname__}" == "sklearn.ensemble._forest.RandomForestClassifier"
    _same_forest(reference, view, data.X)
    for a, b in zip(reference.estimators_, view.estimators_, strict=True):
        assert np.array_equal(a.predict_proba(data.X), b.predict_proba(data.X))
    view.fit(data.X[60:120], data.y[60:120])  # refitting the view leaves the model as it was
    _same_forest(reference, model, data.X)
    assert public_view(reference) is reference


def test_the_lean_forest_checks_the_feature_count_like_scikit_learn():
    data = load_dataset("sonar")
    model = LeanForest(n_estimators=5, random_state=1).fit(data.X[:40], data.y[:40])
    with pytest.raises(ValueError, match="features"):
        model.predict_proba(data.X[:5, :10])


def _raised(fit):
    """(exception type, message) that ``fit()`` raises, with the class name made the parent's."""
    with pytest.raises(Exception) as caught:
        fit()
    return type(caught.value), str(caught.value).replace("LeanForest", "RandomForestClassifier")


@pytest.mark.parametrize("params", [{"n_estimators": 0}, {"max_depth": 0}, {"min_samples_leaf": 0},
                                    {"max_features": 1.5}])
def test_bad_parameters_fail_with_scikit_learns_own_error(params):
    data = load_dataset("sonar")
    X, y = data.X[:40], data.y[:40]
    assert _raised(lambda: LeanForest(**params).fit(X, y)) == \
        _raised(lambda: RandomForestClassifier(**params).fit(X, y))


@pytest.mark.parametrize("bad", ["short y", "continuous y", "complex X", "X beyond float32"])
def test_bad_inputs_fail_with_scikit_learns_own_error(bad):
    data = load_dataset("sonar")
    X, y = data.X[:40], data.y[:40]
    X, y = {"short y": (X, y[:-1]), "continuous y": (X, np.linspace(0, 1, 40)), "complex X": (X + 1j, y),
            "X beyond float32": (X * 1e39, y)}[bad]
    assert _raised(lambda: LeanForest(n_estimators=5).fit(X, y)) == \
        _raised(lambda: RandomForestClassifier(n_estimators=5).fit(X, y))
