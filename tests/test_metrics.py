"""Per-round metrics against scikit-learn, and every AUBC variant against hand arithmetic."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from sklearn.exceptions import UndefinedMetricWarning
from sklearn.metrics import accuracy_score, f1_score, roc_auc_score
from sklearn.preprocessing import label_binarize

from audit.engine.metrics import (
    AUBC_VARIANTS,
    METRICS,
    aubc,
    get_variant,
    round_metrics,
)
from audit.errors import AuditError

# --------------------------------------------------------------------------------------
# round_metrics against scikit-learn
# --------------------------------------------------------------------------------------

def sklearn_metrics(y_true: np.ndarray, y_pred: np.ndarray, n_classes: int) -> dict[str, float]:
    """The reference: scikit-learn on hard labels.

    Multi-class F1 is macro over all n_classes labels (``labels=range(n_classes)``), the
    convention of zhan2021's released code (macro F1 over one-hot indicator columns);
    scikit-learn's bare ``average="macro"`` would drop a class absent from both vectors.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        acc = accuracy_score(y_true, y_pred)
        if n_classes == 2:
            f1 = f1_score(y_true, y_pred, pos_label=1, average="binary", labels=[0, 1], zero_division=0)
            auc = roc_auc_score(y_true, y_pred) if np.unique(y_true).size == 2 else math.nan
        else:
            classes = list(range(n_classes))
            f1 = f1_score(y_true, y_pred, average="macro", labels=classes, zero_division=0)
            t, p = label_binarize(y_true, classes=classes), label_binarize(y_pred, classes=classes)
            if all(np.unique(t[:, k]).size == 2 for k in classes):
                auc = roc_auc_score(t, p, average="macro")
            else:
                auc = math.nan
    return {"accuracy": float(acc), "f1": float(f1), "roc_auc": float(auc)}


def assert_metrics_equal(got: dict[str, float], want: dict[str, float]) -> None:
    assert set(got) == set(METRICS)
    for m in METRICS:
        if math.isnan(want[m]):
            assert math.isnan(got[m]), (m, got, want)
        else:
            assert got[m] == pytest.approx(want[m], abs=1e-12), (m, got, want)


def random_case(seed: int) -> tuple[np.ndarray, np.ndarray, int]:
    rng = np.random.default_rng(seed)
    n_classes = int(rng.choice([2, 2, 3, 4, 5]))
    size = int(rng.integers(1, 80))
    probs = rng.dirichlet(np.ones(n_classes))
    y_true = rng.choice(n_classes, size=size, p=probs)
    # predictions: a random fraction copied from the truth, the rest random
    keep = rng.random(size) < rng.random()
    y_pred = np.where(keep, y_true, rng.choice(n_classes, size=size, p=rng.dirichlet(np.ones(n_classes))))
    return y_true.astype(np.int64), y_pred.astype(np.int64), n_classes


@pytest.mark.parametrize("block", range(4))
def test_round_metrics_match_sklearn_on_random_cases(block):
    nan_aucs = 0
    for seed in range(block * 100, block * 100 + 100):
        y_true, y_pred, k = random_case(seed)
        want = sklearn_metrics(y_true, y_pred, k)
        nan_aucs += math.isnan(want["roc_auc"])
        assert_metrics_equal(round_metrics(y_true, y_pred, k), want)
    assert nan_aucs < 100  # the cases do exercise the defined ROC-AUC path


def test_random_cases_cover_binary_and_multiclass():
    ks = {random_case(s)[2] for s in range(400)}
    assert ks == {2, 3, 4, 5}


@pytest.mark.parametrize("k", [2, 3, 5])
def test_all_correct(k):
    y = np.arange(40) % k
    got = round_metrics(y, y.copy(), k)
    assert got == {"accuracy": 1.0, "f1": 1.0, "roc_auc": 1.0}
    assert_metrics_equal(got, sklearn_metrics(y, y, k))


def test_all_wrong_binary():
    y_true = np.array([0, 1, 1, 0, 1, 0, 0])
    y_pred = 1 - y_true
    got = round_metrics(y_true, y_pred, 2)
    # tp = 0 -> f1 = 0; TPR = 0, TNR = 0 -> AUC = 0
    assert got == {"accuracy": 0.0, "f1": 0.0, "roc_auc": 0.0}
    assert_metrics_equal(got, sklearn_metrics(y_true, y_pred, 2))


def test_all_wrong_multiclass():
    y_true = np.arange(30) % 3
    y_pred = (y_true + 1) % 3
    got = round_metrics(y_true, y_pred, 3)
    assert got["accuracy"] == 0.0 and got["f1"] == 0.0
    # per class: TPR = 0, TNR = 10/20 -> 0.25
    assert got["roc_auc"] == pytest.approx(0.25)
    assert_metrics_equal(got, sklearn_metrics(y_true, y_pred, 3))


@pytest.mark.parametrize("k, const", [(2, 0), (2, 1), (3, 0), (3, 2), (4, 1)])
def test_predictions_of_a_single_class(k, const):
    y_true = np.arange(23) % k
    y_pred = np.full_like(y_true, const)
    got = round_metrics(y_true, y_pred, k)
    assert got["accuracy"] == pytest.approx(np.mean(y_true == const))
    # a constant predictor is exactly at chance on every one-vs-rest problem
    assert got["roc_auc"] == pytest.approx(0.5)
    assert_metrics_equal(got, sklearn_metrics(y_true, y_pred, k))


def test_binary_hand_example():
    y_true = np.array([1, 1, 1, 0, 0, 0, 0, 1])
    y_pred = np.array([1, 0, 1, 0, 1, 0, 0, 1])
    # tp 3, fn 1, fp 1, tn 3: acc 6/8, f1 = 6/(6+1+1), auc = (3/4 + 3/4)/2
    got = round_metrics(y_true, y_pred, 2)
    assert got["accuracy"] == pytest.approx(0.75)
    assert got["f1"] == pytest.approx(0.75)
    assert got["roc_auc"] == pytest.approx(0.75)


@pytest.mark.parametrize("k, cls", [(2, 0), (2, 1), (3, 1), (4, 3)])
def test_single_class_test_set_gives_nan_auc(k, cls):
    y_true = np.full(15, cls)
    y_pred = np.arange(15) % k
    got = round_metrics(y_true, y_pred, k)
    assert math.isnan(got["roc_auc"])
    assert got["accuracy"] == pytest.approx(np.mean(y_pred == cls))
    assert_metrics_equal(got, sklearn_metrics(y_true, y_pred, k))


def test_multiclass_auc_nan_when_one_class_missing_from_test_set():
    y_true = np.array([0, 1, 0, 1, 0, 1])  # class 2 never in the test set
    y_pred = np.array([0, 1, 2, 1, 0, 0])
    got = round_metrics(y_true, y_pred, 3)
    assert math.isnan(got["roc_auc"])
    assert not math.isnan(got["f1"])


def test_binary_no_positives_anywhere():
    y = np.zeros(10, dtype=np.int64)
    got = round_metrics(y, y.copy(), 2)
    # F1 of class 1 with tp = fp = fn = 0 is 0 (scikit-learn's zero_division default)
    assert got["accuracy"] == 1.0 and got["f1"] == 0.0 and math.isnan(got["roc_auc"])
    assert_metrics_equal(got, sklearn_metrics(y, y, 2))


def test_multiclass_f1_counts_a_class_absent_from_truth_and_predictions():
    """Macro F1 runs over all n_classes, like zhan2021's indicator-matrix macro F1."""
    y_true = np.array([0, 1, 1, 0, 1])
    y_pred = np.array([0, 1, 0, 0, 1])  # class 2 appears nowhere
    got = round_metrics(y_true, y_pred, 3)
    # class 0: tp 2 fp 1 fn 0 -> 4/5; class 1: tp 2 fp 0 fn 1 -> 4/5; class 2: 0
    assert got["f1"] == pytest.approx((0.8 + 0.8 + 0.0) / 3)
    classes = [0, 1, 2]
    indicator = f1_score(label_binarize(y_true, classes=classes), label_binarize(y_pred, classes=classes),
                         average="macro", zero_division=0)
    assert got["f1"] == pytest.approx(indicator)


# --------------------------------------------------------------------------------------
# AUBC variants against hand arithmetic
# --------------------------------------------------------------------------------------

VALUES = [0.5, 0.6, 0.8, 0.9]
N_LABELED = [20, 21, 22, 23]  # batch 1, quota 3

# trapezoid incl. initial, x = 0..3: ((0.5+0.6)/2 + (0.6+0.8)/2 + (0.8+0.9)/2) / 3
#   = (0.55 + 0.70 + 0.85) / 3 = 2.1 / 3 = 0.7
# lu2023_code: trapz of [0.6, 0.8, 0.9] with dx = 1 = 0.7 + 0.85 = 1.55; / 3 = 0.516666..
#   rounded to 5 decimals = 0.51667
# lu2023_later: 1.55 / (3 + 1) = 0.3875, no rounding
# zhan2021_code: 2.1 / 3 = 0.7 rounded to 3 decimals = 0.7
# alpbench: raw area with x = 20..23: 0.55 + 0.70 + 0.85 = 2.1 (not divided)
# cdalbench (eq. 1, Alg. 1): the 3 models trained before each acquisition, mean(0.5, 0.6, 0.8)
#   = 1.9 / 3 = 0.633333..; the 0.9 after the last label is never scored
# cdalbench_code (the released logger and table script): all 4 logged accuracies,
#   (0.5 + 0.6 + 0.8 + 0.9) / 4 = 2.8 / 4 = 0.7
EXPECTED = {
    "trapezoid": 2.1 / 3,
    "zhan2021_code": 0.7,
    "lu2023_code": 0.51667,
    "lu2023_later": 0.3875,
    "alpbench": 2.1,
    "cdalbench": 1.9 / 3,
    "cdalbench_code": 0.7,
}


def test_expected_table_covers_every_variant():
    assert set(EXPECTED) == set(AUBC_VARIANTS)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_variant_on_tiny_curve(name):
    variant = get_variant(name)
    assert variant.name == name
    got = variant(VALUES, N_LABELED)
    assert got == pytest.approx(EXPECTED[name], abs=1e-12)
    assert aubc(VALUES, N_LABELED, variant) == got


def test_lu2023_code_rounds_to_exactly_five_decimals():
    got = get_variant("lu2023_code")(VALUES, N_LABELED)
    assert got == 0.51667  # exact: round() returns the float nearest to 0.51667
    assert got != 1.55 / 3


def test_lu2023_later_is_not_rounded():
    # after queries [0.613, 0.8, 0.9]: trapz = 0.7065 + 0.85 = 1.5565; / 4 = 0.389125 (6 decimals kept)
    got = get_variant("lu2023_later")([0.5, 0.613, 0.8, 0.9], N_LABELED)
    assert got == pytest.approx(0.389125, abs=1e-12)
    assert round(got, 5) != got


# A curve whose value rounds differently at 3 and at 5 decimals:
# values [0.5, 0.61, 0.83, 0.9], x = 0..3
#   incl. initial: (0.555 + 0.72 + 0.865) / 3 = 2.14 / 3 = 0.713333..
#     trapezoid 0.713333.., zhan2021_code 0.713
#   after queries: (0.72 + 0.865) / 3 = 1.585 / 3 = 0.528333..
#     lu2023_code 0.52833 (at 3 decimals it would be 0.528)
ROUNDING_VALUES = [0.5, 0.61, 0.83, 0.9]


def test_rounding_at_3_and_5_decimals():
    trap = get_variant("trapezoid")(ROUNDING_VALUES, N_LABELED)
    zhan = get_variant("zhan2021_code")(ROUNDING_VALUES, N_LABELED)
    lu = get_variant("lu2023_code")(ROUNDING_VALUES, N_LABELED)
    assert trap == pytest.approx(2.14 / 3, abs=1e-12)
    assert zhan == 0.713
    assert lu == 0.52833
    assert zhan != round(trap, 5)
    assert lu != round(1.585 / 3, 3)


def test_rounding_rounds_up_as_well_as_down():
    # incl. initial, [0.5, 0.6, 0.8, 0.902]: (0.55 + 0.70 + 0.851) / 3 = 2.101 / 3 = 0.700333.. -> 0.7
    # incl. initial, [0.5, 0.6, 0.8, 0.905]: (0.55 + 0.70 + 0.8525) / 3 = 2.1025 / 3 = 0.700833.. -> 0.701
    assert get_variant("zhan2021_code")([0.5, 0.6, 0.8, 0.902], N_LABELED) == 0.7
    assert get_variant("zhan2021_code")([0.5, 0.6, 0.8, 0.905], N_LABELED) == 0.701


# batch size 2: n_labeled [20, 22, 24], quota 4, values [0.5, 0.7, 0.8]
# trapezoid: x = [0, 2, 4]: 2*(0.5+0.7)/2 + 2*(0.7+0.8)/2 = 1.2 + 1.5 = 2.7; / 4 = 0.675
# zhan2021_code: same, rounded to 3 decimals = 0.675
# lu2023_code: x = [0, 2] over [0.7, 0.8]: 2*(0.75) = 1.5; / 4 = 0.375
# lu2023_later: 1.5 / 5 = 0.3
# alpbench: x = [20, 22, 24]: raw 2.7
# cdalbench: the 2 rounds' models before acquisition, mean(0.5, 0.7) = 0.6
# cdalbench_code: all 3 logged accuracies, mean(0.5, 0.7, 0.8) = 2.0 / 3
BATCH2 = ([0.5, 0.7, 0.8], [20, 22, 24])
BATCH2_EXPECTED = {
    "trapezoid": 0.675,
    "zhan2021_code": 0.675,
    "lu2023_code": 0.375,
    "lu2023_later": 0.3,
    "alpbench": 2.7,
    "cdalbench": 0.6,
    "cdalbench_code": 2.0 / 3,
}


@pytest.mark.parametrize("name", sorted(BATCH2_EXPECTED))
def test_variant_on_batch2_curve(name):
    assert get_variant(name)(*BATCH2) == pytest.approx(BATCH2_EXPECTED[name], abs=1e-12)


def test_ragged_last_batch_matches_zhan2021_get_aubc():
    # batch 2, quota 3: the last step is 1 label. zhan2021's get_aubc:
    # (0.5+0.7)*2/2 + (0.7+0.8)*1/2 = 1.2 + 0.75 = 1.95; / 3 = 0.65
    values, n = [0.5, 0.7, 0.8], [20, 22, 23]
    assert get_variant("trapezoid")(values, n) == pytest.approx(0.65, abs=1e-12)
    assert get_variant("zhan2021_code")(values, n) == 0.65


def test_alpbench_area_does_not_depend_on_initial_size_but_scales_with_x():
    # raw area only depends on the spacing of x; doubling all steps doubles it
    a = get_variant("alpbench")(VALUES, [20, 21, 22, 23])
    b = get_variant("alpbench")(VALUES, [100, 101, 102, 103])
    c = get_variant("alpbench")(VALUES, [20, 22, 24, 26])
    assert a == pytest.approx(b) and c == pytest.approx(2 * a)


@pytest.mark.parametrize("name", sorted(AUBC_VARIANTS))
def test_constant_curve(name):
    v = get_variant(name)([0.8] * 5, [20, 21, 22, 23, 24])
    expected = {"trapezoid": 0.8, "zhan2021_code": 0.8, "lu2023_code": 3 * 0.8 / 4,
                "lu2023_later": 3 * 0.8 / 5, "alpbench": 4 * 0.8, "cdalbench": 0.8,
                "cdalbench_code": 0.8}[name]
    assert v == pytest.approx(expected)


@pytest.mark.parametrize("name", sorted(AUBC_VARIANTS))
@pytest.mark.parametrize("values, n", [([], []), ([0.5], [20])])
def test_fewer_than_two_points_raise(name, values, n):
    with pytest.raises(ValueError):
        get_variant(name)(values, n)


@pytest.mark.parametrize("name", sorted(AUBC_VARIANTS))
def test_mismatched_lengths_raise(name):
    with pytest.raises(ValueError):
        get_variant(name)([0.5, 0.6, 0.7], [20, 21])


def test_get_variant_unknown_lists_known_names():
    with pytest.raises(AuditError) as exc:
        get_variant("nope")
    msg = str(exc.value)
    assert "nope" in msg
    for name in AUBC_VARIANTS:
        assert name in msg


def test_cdalbench_eq1_never_scores_the_last_label():
    # Alg. 1 of CDALBench: acc(i) = Train(L(i)) for i = 1..B, then acquire; so with B = 3 queries
    # the points are the initial model and the models after queries 1 and 2: (0.5 + 0.6 + 0.8) / 3
    variant = get_variant("cdalbench")
    assert variant([0.5, 0.6, 0.8, 0.9], N_LABELED) == pytest.approx(1.9 / 3, abs=1e-15)
    assert variant([0.5, 0.6, 0.8, 0.1], N_LABELED) == variant([0.5, 0.6, 0.8, 1.0], N_LABELED)
    assert variant([0.5, 0.6, 0.8, 0.9], N_LABELED) != variant([0.4, 0.6, 0.8, 0.9], N_LABELED)


def test_cdalbench_code_averages_every_logged_accuracy():
    # the released logger keeps the initial model's test accuracy and one per query (B + 1 values)
    # and the table script divides their sum by their count: the last label counts, unlike eq. 1
    code, paper = get_variant("cdalbench_code"), get_variant("cdalbench")
    assert code([0.5, 0.6, 0.8, 0.9], N_LABELED) == pytest.approx(np.mean([0.5, 0.6, 0.8, 0.9]), abs=1e-15)
    assert code([0.5, 0.6, 0.8, 0.1], N_LABELED) != code([0.5, 0.6, 0.8, 1.0], N_LABELED)
    assert code([0.5, 0.6, 0.8, 0.9], N_LABELED) > paper([0.5, 0.6, 0.8, 0.9], N_LABELED)


def test_a_raw_area_says_its_units_and_a_normalised_aubc_keeps_the_scale():
    from audit.protocols import load_protocol

    assert load_protocol("alpbench-small").aubc_unit == "fraction x labeled rows (raw area)"
    assert load_protocol("zhan2021").aubc_unit == load_protocol("zhan2021").scale
    # CDALBench's AUC is a mean of accuracies: a fraction, not an area (it said "raw area")
    assert get_variant("cdalbench_code").unit("fraction") == get_variant("cdalbench").unit("fraction") == "fraction"


def test_a_column_of_predictions_is_one_label_per_row_and_other_shapes_are_refused():
    """CatBoost predicts an (n, 1) column on three or more classes: compared with the (n,) truth it
    broadcast to an n x n matrix, an "accuracy" of about n / k (70 on vehicle's 282 test rows)."""
    y_true = np.array([0, 1, 2, 2, 1, 0])
    column = np.array([[0], [1], [2], [0], [1], [1]])
    assert round_metrics(y_true, column, 3) == round_metrics(y_true, column[:, 0], 3)
    assert round_metrics(y_true, column, 3)["accuracy"] == 4 / 6
    for bad in (np.zeros((6, 2), dtype=int), np.zeros(5, dtype=int), np.zeros((1, 6), dtype=int)):
        with pytest.raises(ValueError, match="one label per row"):
            round_metrics(y_true, bad, 3)


def test_catboost_on_three_classes_scores_as_its_labels_say():
    pytest.importorskip("catboost", reason="the optional extra 'alpbench' (uv run --extra alpbench pytest)")
    from audit.engine.models import ModelSpec

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(90, 4)), np.arange(90) % 3
    X[:, 0] += y
    model = ModelSpec("catboost", {"iterations": 20, "depth": 3}).build(0).fit(X[:60], y[:60])
    assert np.shape(model.predict(X[60:])) == (30, 1)  # the shape that broke the metric
    labels = np.asarray(model.predict(X[60:])).ravel()
    assert round_metrics(y[60:], model.predict(X[60:]), 3)["accuracy"] == np.mean(labels == y[60:])
