"""Cross-cell diagnosis ("shared cause"): when several discrepant cells of one replay (one
protocol, one data set) miss their published values in the same direction, test the
diagnosis knobs over those cells together.

The cells of a replay share their trial seeds, hence their splits, and per-trial AUBCs of
different strategies on one split are strongly correlated (docs/zhan2021-libact.md): six
cells above their published values are closer to one observation than to six. So the
pooled statistic is paired by trial seed. For a group of cells c = 1..m with published
means p_c and, under a knob K, AUBC a_{c,s}^K on trial seed s (every seed all m cells
finished):

    d_s^K = (1/m) sum_c (a_{c,s}^K - p_c)

and the knob explains the group when 0 is inside the 95% t-interval of mean_s d_s^K (the
pooled published mean inside the pooled interval) and no member is left apart: a pooled
mean near 0 can be cells moved to both sides of their published values (one +0.03, another
-0.03), which is no shared cause, so each member's own offsets a_{c,s}^K - p_c are t-tested
against 0 as well, Holm over the members, and a knob that leaves a member significantly off
(at 5%) explains nothing; the line names the members it leaves apart. p is the one-sample
t-test of the d_s^K against 0. The knobs tried are a family: their p-values are
Holm-adjusted (audit.analysis.stats.adjust_pvalues), and the number tried is stated with
every line.

The same replay's consistent cells give the shared-split baseline: b_s, the same per-seed
mean over those cells of (AUBC - published), estimates how lucky the published splits were
for every strategy alike. The group's own offset is tested against it paired by seed
(the t-test of d_s - b_s). Nothing here replays: the per-seed values are the ones the
per-cell diagnosis already read or ran (each row's ``per_seed``).
"""
from __future__ import annotations

from typing import Any

from audit.analysis.stats import adjust_pvalues, offset_test, per_seed_offsets

MIN_GROUP = 2  # discrepant cells that must share a direction to be tested together
ALPHA_APART = 0.05  # a member whose own offset under a knob is this significant (Holm) is left apart
ALL = "all discrepant cells"
DIAGNOSED = ("explained", "unexplained")  # statuses of a cell whose knob replays ran


def _discrepant(cell: dict[str, Any]) -> bool:
    return (cell.get("status") == "ok" and str(cell.get("verdict", "")).startswith("discrepant")
            and cell.get("published_mean") is not None and cell.get("mean") is not None)


def _consistent(cell: dict[str, Any]) -> bool:
    return (cell.get("status") == "ok" and str(cell.get("verdict", "")).startswith("consistent")
            and cell.get("published_mean") is not None and not cell.get("uses_test_labels"))


def direction(cell: dict[str, Any]) -> str:
    return "above" if cell["mean"] > cell["published_mean"] else "below"


def groups(cells: list[dict[str, Any]], library_of: dict[str, str]) -> list[tuple[str, str, list[dict[str, Any]]]]:
    """(name, direction, cells): the discrepant cells of one direction, by adapter library, and
    all of them together when they span more than one library; only groups of MIN_GROUP or more."""
    out = []
    for side in ("above", "below"):
        same = [c for c in cells if _discrepant(c) and direction(c) == side]
        by_library: dict[str, list[dict[str, Any]]] = {}
        for c in same:
            by_library.setdefault(library_of[c["strategy"]], []).append(c)
        out += [(library, side, members) for library, members in by_library.items() if len(members) >= MIN_GROUP]
        if len(by_library) > 1 and len(same) >= MIN_GROUP:
            out.append((ALL, side, same))
    return out


def _knob_values(members: list[dict[str, Any]], audited: dict[str, dict[int, float]]
                 ) -> tuple[list[tuple[str, str, list[dict[int, float]]]], list[str]]:
    """Per knob tried in any member's diagnosis: (key, label, per-seed AUBCs per member). A
    single knob a member did not replay changes nothing that cell computes: its own trials
    stand in. A pair or the released replay a member lacks (its diagnosis stopped earlier)
    cannot be pooled: such a knob is listed as skipped."""
    rows = [{r["hypothesis"]: r for r in (c.get("diagnosis") or {}).get("hypotheses", [])} for c in members]
    keys = list(dict.fromkeys(k for r in rows for k in r))
    tried, skipped = [], []
    for key in keys:
        values, label = [], next(r[key]["label"] for r in rows if key in r)
        for cell, own in zip(members, rows):
            if key in own and "per_seed" in own[key]:
                values.append(own[key]["per_seed"])
            elif ("+" not in key and key != "released-all"
                  and (cell.get("diagnosis") or {}).get("status") in DIAGNOSED):
                values.append(audited[cell["strategy"]])
            else:
                skipped.append(f"{label} (not replayed for {cell['strategy']})")
                break
        else:
            tried.append((key, label, values))
    return tried, skipped


def shared_cause(name: str, side: str, members: list[dict[str, Any]], audited: dict[str, dict[int, float]],
                 baseline_cells: list[dict[str, Any]]) -> dict[str, Any]:
    """The pooled test of one group and its report line."""
    sids = [c["strategy"] for c in members]
    published = [c["published_mean"] for c in members]
    offsets = [c["mean"] - c["published_mean"] for c in members]
    tried, skipped = _knob_values(members, audited)
    knobs = []
    for key, label, values in tried:
        test = offset_test(per_seed_offsets(values, published).values())
        apart = _left_apart(sids, values, published)
        knobs.append({"hypothesis": key, "label": label, "n": test.n, "mean": test.mean, "ci95": list(test.ci95),
                      "p": test.p, "apart": apart, "explains": test.covers_zero and not apart})
    for knob, adjusted in zip(knobs, adjust_pvalues([k["p"] for k in knobs])):
        knob["p_holm"] = adjusted
    group_seeds = per_seed_offsets([audited[s] for s in sids], published)
    own = offset_test(group_seeds.values())
    base_sids = [c["strategy"] for c in baseline_cells]
    baseline = None
    if baseline_cells:
        base_seeds = per_seed_offsets([audited[s] for s in base_sids], [c["published_mean"] for c in baseline_cells])
        common = sorted(set(group_seeds) & set(base_seeds))
        base = offset_test(base_seeds[s] for s in common)
        excess = offset_test(group_seeds[s] - base_seeds[s] for s in common)
        baseline = {"strategies": base_sids, "n": base.n, "mean": base.mean, "ci95": list(base.ci95),
                    "excess": {"n": excess.n, "mean": excess.mean, "ci95": list(excess.ci95), "p": excess.p}}
    entry = {"group": name, "direction": side, "strategies": sids, "offsets": offsets, "knobs": knobs,
             "skipped_knobs": skipped, "explained_by": [k["hypothesis"] for k in knobs if k["explains"]],
             "group_offset": {"n": own.n, "mean": own.mean, "ci95": list(own.ci95), "p": own.p},
             "baseline": baseline}
    entry["line"] = shared_cause_line(entry)
    return entry


def _left_apart(sids: list[str], values: list[dict[int, float]], published: list[float]) -> dict[str, float]:
    """{member: its mean offset} of the members a knob leaves off their published values:
    each member's own per-seed offsets t-tested against 0, Holm over the members, p < 0.05."""
    tests = [offset_test(v - p for v in per_seed.values()) for per_seed, p in zip(values, published)]
    adjusted = adjust_pvalues([t.p for t in tests])
    return {sid: t.mean for sid, t, q in zip(sids, tests, adjusted) if q == q and q < ALPHA_APART}


def _g(p: float) -> str:
    return "nan" if p != p else f"{p:.2g}"


def shared_cause_line(entry: dict[str, Any]) -> str:
    """'shared cause (libact: us-nc, quire; all above by +0.009..+0.016): <knobs> | <baseline>'."""
    lo, hi = min(entry["offsets"]), max(entry["offsets"])
    head = f"shared cause ({entry['group']}: {', '.join(entry['strategies'])}; all {entry['direction']} by {lo:+.3f}..{hi:+.3f})"
    knobs = entry["knobs"]
    family = f"{len(knobs)} knob{'s' * (len(knobs) != 1)} tried, Holm over them"
    explaining = [k for k in knobs if k["explains"]]
    if not knobs:
        why = f"; {'; '.join(entry['skipped_knobs'])}" if entry["skipped_knobs"] else ""
        knob_part = f"no knob tested (no diagnosis replays to pool{why})"
    elif explaining:
        knob_part = "; ".join(
            f"{k['label']} explains the group (pooled offset {_fmt(k)} over {k['n']} trial seeds, p={_g(k['p'])}, "
            f"Holm p={_g(k['p_holm'])})" for k in explaining) + f" ({family})"
    else:
        closest = max(knobs, key=lambda k: (k["p"] if k["p"] == k["p"] else -1.0))
        apart = "".join(f", {sid} {offset:+.3f}" for sid, offset in closest["apart"].items())
        apart = f"; it leaves apart{apart[1:]} (each member's own offset, Holm)" if apart else ""
        knob_part = (f"no knob explains it ({family}; closest: {closest['label']}, pooled offset {_fmt(closest)} "
                     f"over {closest['n']} trial seeds, p={_g(closest['p'])}, Holm p={_g(closest['p_holm'])}{apart})")
    own = entry["group_offset"]
    base = entry["baseline"]
    if base is None:
        base_part = (f"the group's mean offset {own['mean']:+.4f} (no consistent cells in this replay to estimate "
                     "the shared-split baseline)")
    else:
        excess = base["excess"]
        base_part = (f"the group's mean offset {own['mean']:+.4f} vs the consistent cells' {base['mean']:+.4f} "
                     f"({', '.join(base['strategies'])}; paired by trial seed, excess {_fmt(excess)}, "
                     f"p={_g(excess['p'])}, {excess['n']} seeds)")
    return f"{head}: {knob_part} | {base_part}"


def _fmt(row: dict[str, Any]) -> str:
    lo, hi = row["ci95"]
    return f"{row['mean']:+.4f} [{lo:+.4f}, {hi:+.4f}]"


def shared_causes(cells: list[dict[str, Any]], audited: dict[str, dict[int, float]],
                  library_of: dict[str, str]) -> list[dict[str, Any]]:
    """Every group's shared-cause entry (see the module docstring); ``audited`` holds each
    cell's AUBC by trial seed, ``library_of`` each strategy's adapter library."""
    baseline_cells = [c for c in cells if _consistent(c) and c["strategy"] in audited]
    return [shared_cause(name, side, members, audited, baseline_cells)
            for name, side, members in groups(cells, library_of)]
