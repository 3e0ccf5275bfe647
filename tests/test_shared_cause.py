"""Cross-cell diagnosis: discrepant cells of one replay off in one direction, tested
together, paired by trial seed (audit/analysis/diagnose/shared.py)."""
from __future__ import annotations

import json
import math

import pytest
from scipy import stats

from audit.analysis.diagnose.shared import ALL, groups, shared_causes
from audit.analysis.stats import adjust_pvalues, offset_test, per_seed_offsets
from audit.protocols import PROTOCOL_DIR
from tests.conftest import dataset_or_skip


def test_pooled_statistic_by_hand():
    cells = [{0: 0.80, 1: 0.70, 2: 0.90}, {0: 0.60, 1: 0.65, 2: 0.70, 3: 0.10}]
    offsets = per_seed_offsets(cells, [0.75, 0.60])
    # seed 3 is missing from the first cell: only the seeds every cell finished
    assert offsets == pytest.approx({0: 0.025, 1: 0.0, 2: 0.125})
    test = offset_test(offsets.values())
    # mean 0.05; deviations -0.025, -0.05, 0.075: sd = sqrt(0.00875 / 2) = 0.066144, se = 0.038188
    se = math.sqrt(0.00875 / 2) / math.sqrt(3)
    assert test.n == 3 and test.mean == pytest.approx(0.05)
    assert test.p == pytest.approx(2 * stats.t.sf(0.05 / se, 2))
    assert test.p == pytest.approx(stats.ttest_1samp([0.025, 0.0, 0.125], 0.0).pvalue)
    assert test.ci95 == pytest.approx((0.05 - 4.302653 * se, 0.05 + 4.302653 * se))
    assert test.covers_zero  # 3 seeds: [-0.114, 0.214]
    exact = offset_test([0.01, 0.01])
    assert (exact.ci95, exact.p, exact.covers_zero) == ((0.01, 0.01), 0.0, False)


def _cell(sid, mean, published, verdict="discrepant at 1%", **extra):
    return {"strategy": sid, "status": "ok", "mean": mean, "published_mean": published, "verdict": verdict, **extra}


LIBRARY = {"a": "libact", "b": "libact", "c": "libact", "g": "native", "h": "native", "u": "native"}


def test_groups_share_a_direction_and_a_library_and_all_of_them_together():
    cells = [_cell("a", 0.77, 0.76), _cell("b", 0.76, 0.74), _cell("c", 0.70, 0.72),
             _cell("g", 0.80, 0.78), _cell("h", 0.75, 0.75, "consistent"), _cell("u", 0.60, 0.70)]
    found = {(name, side): [c["strategy"] for c in members] for name, side, members in groups(cells, LIBRARY)}
    # a and b above (libact); g above (native) alone; c and u below, one per library
    assert found == {("libact", "above"): ["a", "b"], (ALL, "above"): ["a", "b", "g"], (ALL, "below"): ["c", "u"]}
    # one library only: no separate "all" group
    assert [n for n, _, _ in groups(cells[:2], LIBRARY)] == ["libact"]
    assert groups(cells[:1], LIBRARY) == []


def _diagnosed(sid, mean, published, rows, status="unexplained"):
    hypotheses = [{"hypothesis": key, "label": label, "per_seed": values} for key, label, values in rows]
    return _cell(sid, mean, published, diagnosis={"status": status, "hypotheses": hypotheses})


def test_line_names_the_knob_the_multiplicity_and_the_baseline():
    seeds = range(6)
    audited = {"a": {s: 0.78 + 0.01 * (s % 2) for s in seeds}, "b": {s: 0.76 + 0.01 * (s % 3) for s in seeds},
               "g": {s: 0.755 + 0.002 * (s % 2) for s in seeds}}
    fixed = {s: audited["a"][s] - 0.02 + 0.001 * (s % 3 - 1) for s in seeds}  # a knob bringing a back to 0.765
    cells = [
        _diagnosed("a", 0.785, 0.765, [("k1", "knob one", fixed), ("k2", "knob two", audited["a"]),
                                       ("k1+k2", "knob one + knob two", fixed)]),
        # b was not changed by k1 (not replayed): its own trials stand in; it lacks the pair
        _diagnosed("b", 0.77, 0.765, [("k2", "knob two", {s: v + 0.001 for s, v in audited["b"].items()})]),
        _cell("g", 0.756, 0.755, "consistent"),
    ]
    [entry] = shared_causes(cells, audited, LIBRARY)
    assert entry["group"] == "libact" and entry["strategies"] == ["a", "b"]
    keys = [k["hypothesis"] for k in entry["knobs"]]
    assert keys == ["k1", "k2"] and entry["skipped_knobs"] == ["knob one + knob two (not replayed for b)"]
    k1 = entry["knobs"][0]
    expected = offset_test(per_seed_offsets([fixed, audited["b"]], [0.765, 0.765]).values())
    assert (k1["mean"], k1["p"]) == pytest.approx((expected.mean, expected.p))
    assert [k["p_holm"] for k in entry["knobs"]] == pytest.approx(adjust_pvalues([k["p"] for k in entry["knobs"]]))
    line = entry["line"]
    assert line.startswith("shared cause (libact: a, b; all above by +0.005..+0.020): ")
    assert "2 knobs tried, Holm over them" in line
    assert ("knob one explains the group" in line) == k1["explains"]
    base = entry["baseline"]
    assert base["strategies"] == ["g"] and base["mean"] == pytest.approx(0.001)
    assert "vs the consistent cells' +0.0010 (g; paired by trial seed, excess" in line


def test_a_knob_moving_members_to_both_sides_explains_nothing():
    """Pooled over the seeds, a knob that puts a 0.03 below and b 0.03 above their published
    values averages to ~0 (its pooled interval covers 0), but it is no shared cause: each
    member's own offset is far from 0, so the knob explains nothing and the line names them."""
    seeds = range(8)
    wiggle = {s: 0.002 * (s % 3 - 1) for s in seeds}
    audited = {"a": {s: 0.78 + wiggle[s] for s in seeds}, "b": {s: 0.79 + wiggle[s] for s in seeds}}
    below = {s: 0.735 + wiggle[s] for s in seeds}   # a's published 0.765: -0.03
    above = {s: 0.795 + 0.001 * (s % 2) for s in seeds}  # b's published 0.765: +0.03
    cells = [_diagnosed("a", 0.78, 0.765, [("k1", "knob one", below)]),
             _diagnosed("b", 0.79, 0.765, [("k1", "knob one", above)])]
    [entry] = shared_causes(cells, audited, LIBRARY)
    [k1] = entry["knobs"]
    assert k1["ci95"][0] < 0 < k1["ci95"][1]  # the pooled test alone would have said "explains"
    assert not k1["explains"] and entry["explained_by"] == []
    assert set(k1["apart"]) == {"a", "b"} and k1["apart"]["a"] == pytest.approx(-0.03, abs=1e-3)
    assert "no knob explains it" in entry["line"] and "it leaves apart a -0.030, b +0.031 (each member" in entry["line"]
    # the same knob bringing both to their published values does explain the group
    near = [_diagnosed(sid, m, 0.765, [("k1", "knob one", {s: 0.765 + wiggle[s] for s in seeds})])
            for sid, m in (("a", 0.78), ("b", 0.79))]
    [entry] = shared_causes(near, audited, LIBRARY)
    assert entry["knobs"][0]["explains"] and entry["knobs"][0]["apart"] == {}
    assert "knob one explains the group" in entry["line"]


def test_no_knob_and_no_baseline_are_said_so():
    audited = {"a": {0: 0.80, 1: 0.81, 2: 0.82}, "b": {0: 0.79, 1: 0.80, 2: 0.82}}
    cells = [_diagnosed("a", 0.81, 0.70, [("k1", "knob one", {0: 0.80, 1: 0.80, 2: 0.81})]),
             _diagnosed("b", 0.80, 0.70, [])]
    [entry] = shared_causes(cells, audited, LIBRARY)
    assert "no knob explains it (1 knob tried, Holm over them; closest: knob one" in entry["line"]
    assert "(no consistent cells in this replay to estimate the shared-split baseline)" in entry["line"]
    undiagnosed = [_cell("a", 0.81, 0.70), _cell("b", 0.80, 0.70)]
    [entry] = shared_causes(undiagnosed, audited, LIBRARY)
    assert "no knob tested (no diagnosis replays to pool)" in entry["line"]


def test_a_real_replay_reports_the_shared_cause(tmp_path):
    """zhan2021 on sonar, us-nc and quire at 10 trials (a 10-query budget) against a user table
    that puts both below their replays: one shared-cause line, in report.md and report.json."""
    import audit

    dataset_or_skip("sonar")
    released = tmp_path / "released-short.toml"
    released.write_text(f'extends = "{PROTOCOL_DIR / "zhan2021-released.toml"}"\nname = "zr-short"\n'
                        "[budget]\nsize = 10\n")
    audited = tmp_path / "zhan-short.toml"
    audited.write_text(f'extends = "{PROTOCOL_DIR / "zhan2021.toml"}"\nname = "zs-short"\n'
                       "base_strategies = [\"us-nc\", \"quire\"]\n"
                       f'[budget]\nsize = 10\n[diagnosis]\nreleased = "{released}"\n')
    table = tmp_path / "mine.csv"
    table.write_text("paper,table,dataset,strategy,metric,mean,scale,aubc_variant\n"
                     "mine,T,sonar,us-nc,accuracy,0.40,fraction,trapezoid\n"
                     "mine,T,sonar,quire,accuracy,0.41,fraction,trapezoid\n")
    replay = audit.reproduce(str(audited), "sonar", strategies=["us-nc", "quire"], trials=10,
                             store=tmp_path / "s.sqlite", out=tmp_path / "rep", references=table)
    report = json.loads((tmp_path / "rep" / "report.json").read_text())
    [entry] = report["shared_causes"]
    assert entry["group"] == "libact" and entry["strategies"] == ["us-nc", "quire"]
    assert entry["direction"] == "above" and entry["knobs"]
    assert {"library-defaults", "released-all"} <= {k["hypothesis"] for k in entry["knobs"]}
    assert all("per_seed" not in h for c in report["strategies"] for h in (c.get("diagnosis") or {}).get("hypotheses", []))
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "## Shared causes" in md and entry["line"] in md
    assert entry["line"].startswith("shared cause (libact: us-nc, quire; all above by ")
    assert f"{len(entry['knobs'])} knobs tried, Holm over them" in entry["line"]
    assert replay is not None
