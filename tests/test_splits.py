"""The RNG contract: trial seed -> split, initial set, pool order; seed planning; subsystem seeds."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from audit.engine.datasets import DataError, load_dataset
from audit.engine.splits import TrialSplit, make_split, plan_seeds, subsystem_seed
from audit.protocols import SUBSYSTEMS, load_protocol

LU2023 = load_protocol("lu2023")


def with_split(protocol, **changes):
    return dataclasses.replace(protocol, split=dataclasses.replace(protocol.split, **changes))


def with_seeds(protocol, **changes):
    return dataclasses.replace(protocol, seeds={**protocol.seeds, **changes})


def released_code_split(n: int, s: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """lu2023's released calls, written out: (test, labeled, pool)."""
    idx = np.arange(n)
    np.random.default_rng(s).shuffle(idx)
    train = idx[: int(0.6 * n)]
    test = idx[int(0.6 * n):]
    tr = train.copy()
    np.random.default_rng(s).shuffle(tr)
    return test, tr[:20], tr[20:]


def released_code_valid(y: np.ndarray, s: int) -> bool:
    """The released code's skip rule: train split and initial labels hold every class."""
    test, labeled, pool = released_code_split(y.size, s)
    k = int(y.max()) + 1
    train = np.concatenate([labeled, pool])
    return np.unique(y[train]).size == k and np.unique(y[labeled]).size == k


@pytest.fixture(scope="module")
def sonar_y() -> np.ndarray:
    try:
        return load_dataset("sonar").y
    except DataError as exc:
        pytest.skip(f"sonar data absent: {exc}")


def imbalanced_y() -> np.ndarray:
    """60 rows, 2 positives: many seeds put no positive in the initial 20 (or in train)."""
    y = np.zeros(60, dtype=np.int64)
    y[[7, 41]] = 1
    return y


# ------------------------------------------------------------------------ lu2023 split

@pytest.mark.parametrize("seed", [0, 1, 2, 5, 17, 42, 99, 149])
def test_lu2023_split_replicates_released_code_on_sonar(sonar_y, seed):
    assert sonar_y.size == 208
    split = make_split(LU2023, sonar_y, seed)
    assert isinstance(split, TrialSplit), split
    test, labeled, pool = released_code_split(sonar_y.size, seed)
    assert split.trial_seed == seed
    np.testing.assert_array_equal(split.test, test)
    np.testing.assert_array_equal(split.labeled, labeled)
    np.testing.assert_array_equal(split.pool, pool)  # same order, not just the same set
    assert (split.test.size, split.labeled.size, split.pool.size) == (84, 20, 104)


def test_zhan2021_uses_the_same_split_calls(sonar_y):
    zhan = load_protocol("zhan2021")
    for seed in (0, 3, 11):
        a, b = make_split(LU2023, sonar_y, seed), make_split(zhan, sonar_y, seed)
        for part in ("test", "labeled", "pool"):
            np.testing.assert_array_equal(getattr(a, part), getattr(b, part))


def test_split_is_a_partition(sonar_y):
    split = make_split(LU2023, sonar_y, 4)
    everything = np.concatenate([split.test, split.labeled, split.pool])
    np.testing.assert_array_equal(np.sort(everything), np.arange(sonar_y.size))
    np.testing.assert_array_equal(split.train, np.concatenate([split.labeled, split.pool]))
    assert set(np.unique(sonar_y[split.labeled])) == {0, 1}


def test_split_is_deterministic_and_seed_dependent(sonar_y):
    a, b = make_split(LU2023, sonar_y, 8), make_split(LU2023, sonar_y, 8)
    np.testing.assert_array_equal(a.pool, b.pool)
    np.testing.assert_array_equal(a.test, b.test)
    c = make_split(LU2023, sonar_y, 9)
    assert not np.array_equal(a.test, c.test)


def test_split_matches_released_code_on_other_sizes():
    # n where 0.6 n is not an integer, and a balanced y so every seed is valid
    for n in (61, 99, 257):
        y = np.arange(n) % 2
        for seed in (0, 13):
            split = make_split(LU2023, y, seed)
            test, labeled, pool = released_code_split(n, seed)
            np.testing.assert_array_equal(split.test, test)
            np.testing.assert_array_equal(split.labeled, labeled)
            np.testing.assert_array_equal(split.pool, pool)


# ------------------------------------------------------------------------ skip-seed

def test_skip_rule_matches_released_code_for_every_candidate_seed():
    y = imbalanced_y()
    reasons = set()
    n_valid = 0
    for seed in range(150):
        outcome = make_split(LU2023, y, seed)
        if released_code_valid(y, seed):
            assert isinstance(outcome, TrialSplit), (seed, outcome)
            test, labeled, pool = released_code_split(y.size, seed)
            np.testing.assert_array_equal(outcome.labeled, labeled)
            n_valid += 1
        else:
            assert isinstance(outcome, str) and outcome, seed
            reasons.add(outcome)
    assert 0 < n_valid < 150
    # both kinds of failure occur with 2 positives in 60 rows
    assert any("train split" in r for r in reasons)
    assert any("initial labels" in r for r in reasons)


def test_train_split_missing_a_class_is_reported():
    y = imbalanced_y()
    seed = next(s for s in range(150)
                if np.unique(y[np.concatenate(released_code_split(60, s)[1:])]).size < 2)
    reason = make_split(LU2023, y, seed)
    assert isinstance(reason, str) and "train split misses a class" in reason


def test_initial_labels_missing_a_class_is_reported():
    y = imbalanced_y()
    seed = next(s for s in range(150)
                if np.unique(y[np.concatenate(released_code_split(60, s)[1:])]).size == 2
                and np.unique(y[released_code_split(60, s)[1]]).size < 2)
    reason = make_split(LU2023, y, seed)
    assert isinstance(reason, str) and "initial labels" in reason


def test_redraw_rule_keeps_the_test_split_and_fixes_the_initial_set():
    y = imbalanced_y()
    redraw = with_split(LU2023, initial_rule="redraw")
    seed = next(s for s in range(150) if isinstance(make_split(LU2023, y, s), str)
                and "initial labels" in make_split(LU2023, y, s))
    split = make_split(redraw, y, seed)
    assert isinstance(split, TrialSplit)
    assert set(np.unique(y[split.labeled])) == {0, 1}
    np.testing.assert_array_equal(split.test, released_code_split(60, seed)[0])


def test_min_per_class_two():
    y = imbalanced_y()
    strict = with_split(LU2023, min_per_class=2)
    for seed in range(60):
        outcome = make_split(strict, y, seed)
        test, labeled, pool = released_code_split(60, seed)
        if np.bincount(y[labeled], minlength=2).min() >= 2:
            assert isinstance(outcome, TrialSplit)
        else:
            assert isinstance(outcome, str)


def test_no_pool_left_is_a_reason():
    y = np.arange(30) % 2  # train split of int(0.6 * 30) = 18 rows < 20 initial labels
    reason = make_split(LU2023, y, 0)
    assert isinstance(reason, str) and "no pool" in reason


def test_plan_seeds_returns_valid_seeds_in_order_with_skips():
    y = imbalanced_y()
    seeds, skipped = plan_seeds(LU2023, y, n_trials=5)
    assert len(seeds) == 5
    assert seeds == sorted(seeds) and len(set(seeds)) == 5
    expected_valid = [s for s in range(150) if released_code_valid(y, s)][:5]
    assert seeds == expected_valid
    # every seed up to the last kept one is either kept or skipped, with its reason
    skipped_seeds = [s for s, _ in skipped]
    assert skipped_seeds == sorted(skipped_seeds)
    assert sorted(seeds + skipped_seeds) == list(range(seeds[-1] + 1))
    assert skipped, "this y must skip some seeds"
    for s, reason in skipped:
        assert make_split(LU2023, y, s) == reason
        assert not released_code_valid(y, s)
    assert plan_seeds(LU2023, y, n_trials=5) == (seeds, skipped)


def test_plan_seeds_default_trial_count_on_a_balanced_small_set():
    y = np.arange(100) % 2
    seeds, skipped = plan_seeds(LU2023, y)
    valid = [s for s in range(150) if released_code_valid(y, s)]
    assert seeds == valid[:100]
    assert len(seeds) == 100


def test_plan_seeds_large_set_uses_the_large_counts():
    y = np.arange(2000) % 2
    seeds, skipped = plan_seeds(LU2023, y)
    assert seeds == list(range(10)) and skipped == []


def test_plan_seeds_stays_within_the_protocols_candidate_seeds():
    y = imbalanced_y()  # fewer than 100 of seeds 0..149 are valid
    assert sum(released_code_valid(y, s) for s in range(150)) < 100
    seeds, skipped = plan_seeds(LU2023, y)
    assert max(seeds) < 150
    assert all(s < 150 for s, _ in skipped)


# ------------------------------------------------------------------------ subsystem seeds

def test_subsystem_seed_trial_and_fixed():
    for sub in SUBSYSTEMS:
        assert subsystem_seed("trial", 17, sub) == 17
        assert subsystem_seed(1126, 17, sub) == 1126
        assert subsystem_seed(0, 99, sub) == 0


def test_subsystem_seed_spawn_is_stable_and_distinct():
    table = {(sub, s): subsystem_seed("spawn", s, sub) for sub in SUBSYSTEMS for s in range(20)}
    assert len(set(table.values())) == len(table)  # different subsystems and trial seeds differ
    for (sub, s), value in table.items():
        assert isinstance(value, int) and value >= 0
        assert subsystem_seed("spawn", s, sub) == value
        assert value != s
    # independent of the call order: a fresh computation gives the same numbers
    assert subsystem_seed("spawn", 3, "strategy") == table[("strategy", 3)]


def test_spawned_initial_seed_moves_only_the_initial_set(sonar_y):
    spawned = with_seeds(LU2023, initial="spawn")
    a, b = make_split(LU2023, sonar_y, 5), make_split(spawned, sonar_y, 5)
    np.testing.assert_array_equal(a.test, b.test)  # the split subsystem is untouched
    np.testing.assert_array_equal(np.sort(a.train), np.sort(b.train))
    assert not np.array_equal(a.labeled, b.labeled)
    # the initial set comes from default_rng(spawned seed) shuffling the same train rows
    n = sonar_y.size
    train = np.arange(n)
    np.random.default_rng(5).shuffle(train)
    train = train[: int(0.6 * n)].copy()
    np.random.default_rng(subsystem_seed("spawn", 5, "initial")).shuffle(train)
    np.testing.assert_array_equal(b.labeled, train[:20])
    np.testing.assert_array_equal(b.pool, train[20:])


def test_fixed_split_seed_ignores_the_trial_seed(sonar_y):
    fixed = with_seeds(LU2023, split=123)
    a, b = make_split(fixed, sonar_y, 0), make_split(fixed, sonar_y, 1)
    np.testing.assert_array_equal(a.test, b.test)
    np.testing.assert_array_equal(a.test, released_code_split(sonar_y.size, 123)[0])
    assert not np.array_equal(a.labeled, b.labeled)  # initial still follows the trial seed


# ------------------------------------------------------------------------ pool order

def test_pool_order_file_sorts_the_pool(sonar_y):
    file_order = with_split(LU2023, pool_order="file")
    for seed in (0, 6, 21):
        shuffled, filed = make_split(LU2023, sonar_y, seed), make_split(file_order, sonar_y, seed)
        assert np.all(np.diff(filed.pool) > 0)
        assert not np.all(np.diff(shuffled.pool) > 0)
        np.testing.assert_array_equal(filed.pool, np.sort(shuffled.pool))
        np.testing.assert_array_equal(filed.labeled, shuffled.labeled)
        np.testing.assert_array_equal(filed.test, shuffled.test)
