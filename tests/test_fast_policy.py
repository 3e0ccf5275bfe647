"""The one policy of the fast paths: supported versions, scikit-learn's own checks, provenance."""
import warnings

import numpy as np
import pytest
import sklearn
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV
from sklearn.svm import SVC
from sklearn.utils.estimator_checks import check_estimator

from audit.fast import policy
from audit.fast.forest import LeanForest, LeanForestRegressor
from audit.fast.grid import LeanGridLR
from audit.fast.linear import LeanLR
from audit.fast.policy import (
    LIBRARY,
    fast_path_verified,
    provenance,
    recording,
    sklearn_supported,
)
from audit.fast.svc import LeanSVC


def _failed_checks(estimator) -> set[str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(estimator, on_fail=None, on_skip=None)
    return {r["check_name"] for r in results if r["status"] == "failed"}


@pytest.mark.parametrize("parent, fast", [(SVC(), LeanSVC()),
                                          (RandomForestClassifier(n_estimators=10), LeanForest(n_estimators=10)),
                                          (RandomForestRegressor(n_estimators=10), LeanForestRegressor(n_estimators=10)),
                                          (LogisticRegression(), LeanLR()),
                                          (GridSearchCV(LogisticRegression(), {"C": [1.0]}, cv=2),
                                           LeanGridLR(LogisticRegression(), {"C": [1.0]}, cv=2))],
                         ids=["LeanSVC", "LeanForest", "LeanForestRegressor", "LeanLR", "LeanGridLR"])
def test_a_fast_estimator_fails_no_check_estimator_check_its_parent_passes(parent, fast):
    assert _failed_checks(fast) <= _failed_checks(parent)


@pytest.mark.parametrize("fast", [LeanSVC(), LeanForest(n_estimators=3), LeanForestRegressor(n_estimators=3),
                                  LeanLR(), LeanGridLR(LogisticRegression(), {"C": [1.0]}, cv=2)],
                         ids=["LeanSVC", "LeanForest", "LeanForestRegressor", "LeanLR", "LeanGridLR"])
def test_a_deep_copy_of_a_wrapper_that_forwards_attributes_stays_the_wrapper(fast):
    """scikit-activeml's SklearnClassifier forwards unknown attributes to its estimator, so a
    ``__deepcopy__`` on a fast estimator would answer for the wrapper and return the bare
    estimator (twice added for speed, twice broke scikit-activeml's EER and QBC)."""
    import copy

    from skactiveml.classifier import SklearnClassifier

    wrapper = SklearnClassifier(fast, classes=[0, 1], missing_label=-1)
    copied = copy.deepcopy(wrapper)
    assert type(copied) is SklearnClassifier and type(copied.estimator) is type(fast)


def test_the_supported_range_is_the_releases_the_fast_paths_mirror():
    assert sklearn_supported("1.9.0") and sklearn_supported("1.9.1")
    assert not sklearn_supported("1.8.2") and not sklearn_supported("1.10.0") and not sklearn_supported("2.0")


def test_outside_the_supported_range_the_library_runs_without_a_warning(monkeypatch):
    monkeypatch.setattr(sklearn, "__version__", "1.10.0")
    fast_path_verified.cache_clear()
    X = np.random.default_rng(1).normal(size=(30, 3))
    y = np.arange(30) % 2
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert LeanSVC().fit(X, y).fast_path_ == LIBRARY
            assert LeanForest(n_estimators=3).fit(X, y).fast_path_ == LIBRARY
            assert LeanForestRegressor(n_estimators=3).fit(X, y / 2).fast_path_ == LIBRARY
    finally:
        fast_path_verified.cache_clear()


def test_a_trial_records_which_path_each_fit_took():
    X = np.random.default_rng(2).normal(size=(30, 3))
    y = np.arange(30) % 2
    with recording() as ran:
        LogisticRegression().fit(X, y)
    assert provenance(ran) == LIBRARY  # no fast estimator: scikit-learn's own code only
    with recording() as ran:
        LeanSVC().fit(X, y)
        LeanForest(n_estimators=3).fit(X, y)
    assert provenance(ran) == "lean-forest+lean-svc"
    with recording() as ran:
        LeanSVC().fit(X, y)
        LeanSVC(class_weight="balanced").fit(X, y)  # an option the lean path does not cover
    assert provenance(ran) == "lean-svc+library"
    LeanSVC().fit(X, y)  # outside a recording: nothing to record into
    assert provenance(ran) == "lean-svc+library"


def test_parameters_validated_once_per_process_are_not_validated_again_and_bad_ones_still_fail(monkeypatch):
    from sklearn.utils._param_validation import InvalidParameterError

    X = np.random.default_rng(3).normal(size=(30, 3))
    y = np.arange(30) % 2
    LeanSVC(C=0.75, gamma="auto").fit(X, y)
    calls = []
    original = policy.validate_parameter_constraints
    monkeypatch.setattr(policy, "validate_parameter_constraints", lambda *a, **k: calls.append(1) or original(*a, **k))
    LeanSVC(C=0.75, gamma="auto").fit(X, y)  # a fresh estimator, the same values: not validated again
    assert calls == []
    LeanSVC(C=0.76, gamma="auto").fit(X, y)  # new values: validated
    assert calls == [1]
    for bad in ({"C": -0.75}, {"C": "0.75"}, {"gamma": "autox"}):
        with pytest.raises(InvalidParameterError, match=r"parameter of SVC must"):  # the user's estimator, not LeanSVC
            LeanSVC(**{"C": 0.75, "gamma": "auto", **bad}).fit(X, y)
    with pytest.raises(InvalidParameterError):
        LeanForest(n_estimators=0).fit(X, y)
    with pytest.raises(InvalidParameterError):
        LeanForest(n_estimators=0).fit(X, y)  # still raises the second time


