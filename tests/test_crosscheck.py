"""Cross-implementation audit: identity, divergence and paired tests between libraries."""
from __future__ import annotations

import pytest

from audit.analysis.crosscheck import (
    compare_members,
    crosscheck,
    first_divergence,
    format_crosscheck,
)
from audit.engine.runner import RoundRecord, TrialResult


def trial(seed, queried, aubc):
    rounds = [RoundRecord(0, 20, (), 0.5, 0.5, 0.5, 0, 0)]
    rounds += [RoundRecord(i + 1, 21 + i, (q,), 0.5, 0.5, 0.5, 0, 0) for i, q in enumerate(queried)]
    return TrialResult("p", "d", "s", seed, "ok", aubc, {}, rounds)


def test_first_divergence():
    assert first_divergence(trial(0, [1, 2, 3], 0.5), trial(0, [1, 2, 3], 0.5)) is None
    assert first_divergence(trial(0, [1, 2, 3], 0.5), trial(0, [1, 5, 3], 0.5)) == 2


def test_compare_members_counts_identity_and_tests_the_paired_difference():
    from scipy import stats

    ref = [trial(s, [1, 2, 3], a) for s, a in enumerate([0.70, 0.72, 0.75, 0.71])]
    other = [trial(0, [1, 2, 3], 0.70), trial(1, [1, 4, 3], 0.74), trial(2, [9, 2, 3], 0.78),
             trial(3, [1, 2, 3], 0.71)]
    result = compare_members(ref, other)
    assert result["paired_trials"] == 4 and result["identical"] == 2
    assert result["first_divergence_min"] == 1 and result["first_divergence_median"] == 1.5
    assert result["mean_difference"] == pytest.approx((0 + 0.02 + 0.03 + 0) / 4)
    expected = stats.ttest_rel([0.70, 0.74, 0.78, 0.71], [0.70, 0.72, 0.75, 0.71])
    assert result["p"] == pytest.approx(expected.pvalue)


def test_identical_members_give_p_one_and_failed_trials_are_not_paired():
    ref = [trial(s, [1, 2], 0.7) for s in range(3)]
    other = [trial(s, [1, 2], 0.7) for s in range(3)]
    other[2] = TrialResult("p", "d", "s", 2, "error", error="boom")
    result = compare_members(ref, other)
    assert result["paired_trials"] == 2 and result["identical"] == 2 and result["p"] == 1.0


def test_crosscheck_end_to_end_on_a_small_group_file(tmp_path, sonar):
    groups = tmp_path / "groups.toml"
    groups.write_text('''
base_protocol = "lu2023"
[[group]]
name = "us"
member = [
  { implementation = "libact.uncertainty", params = { method = "entropy" }, query_model = { name = "lr", params = { C = 0.1 } } },
  { implementation = "native.margin", query_model = { name = "lr", params = { C = 0.1 } } },
  { implementation = "nolib.nothing" },
]
[[group]]
name = "uniform"
member = [
  { implementation = "native.uniform", params = { order = "pool" } },
  { implementation = "native.uniform", params = { order = "random" } },
]
''')
    report = crosscheck("sonar", trials=2, store_path=tmp_path / "s.sqlite", out=tmp_path / "out",
                        groups_file=groups, progress=False, log=lambda _: None)
    us = next(g for g in report["groups"] if g["group"] == "us")
    margin = next(m for m in us["members"] if m["implementation"] == "native.margin")
    assert margin["vs_reference"]["identical"] == 2  # entropy and margin rank alike for two classes
    missing = next(m for m in us["members"] if m["implementation"] == "nolib.nothing")
    assert missing["status"] == "unavailable" and "unknown implementation" in missing["reason"]
    uniform = next(g for g in report["groups"] if g["group"] == "uniform")
    pool_order, random_order = uniform["members"]
    assert pool_order["n"] == random_order["n"] == 2  # same implementation twice, kept apart
    assert random_order["vs_reference"]["identical"] == 0
    text = format_crosscheck(report)
    assert "2/2" in text and "unavailable" in text
    assert (tmp_path / "out" / "crosscheck.json").exists()
