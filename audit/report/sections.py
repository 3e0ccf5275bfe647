"""The content of a replay's report: provenance lines, the table, its sections, and the
Markdown rendering of them (audit/report/html.py renders the same sections as HTML;
audit/report/files.py writes the report directory).

Every number printed carries its provenance: the protocol and its spec hash, the AUBC
variant, the library versions and the trial seeds.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from audit.analysis.compare import LOW_POWER_TOLERANCE, POWER
from audit.analysis.diagnose.at_chance import common_seeds
from audit.analysis.diagnose.degenerate import PREFIX as DEGENERATE
from audit.analysis.stats import seed_ranges
from audit.engine.datasets import get_info, incomparable, property_differences

CURVES_PNG = "learning_curve.png"
FOREST_PNG = "forest_plot.png"


def _pct(protocol_scale: str, value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{100 * value:.2f}" if protocol_scale == "percent" else f"{value:.4f}"


def _interval(scale: str, ci: list[float] | None) -> str:
    if not ci or any(c is None or math.isnan(c) for c in ci):
        return "-"
    return f"[{_pct(scale, ci[0])}, {_pct(scale, ci[1])}]"


def provenance_lines(report: dict[str, Any]) -> list[str]:
    p, env = report["protocol"], report["environment"]
    seeds = report["seeds"]
    libs = ", ".join(f"{k} {v}" for k, v in env.items() if v != "absent")
    return [
        f"protocol {p['name']} (spec {p['spec_hash']}): {p['title']}",
        f"data set {report['dataset']['name']}: n={report['dataset']['n']}, d={report['dataset']['d']}, "
        f"sha256 {report['dataset']['sha256'][:12]}",
        *data_property_lines(report['dataset']['name']),
        f"AUBC {p['aubc_variant']} on {p['aubc_metric']} ({p['aubc_definition']}); "
        f"SD ddof={p['sd_ddof']}; values in {p.get('unit', p['scale'])}",
        f"trial seeds {seed_ranges(seeds['trial_seeds'])} ({len(seeds['trial_seeds'])} trials, "
        f"{len(seeds['skipped'])} seeds skipped); subsystem seeds {seeds['policy']}",
        f"libraries: {libs}; store fingerprint {report['fingerprint']}",
        *settled_lines(report),
    ]


def settled_lines(report: dict[str, Any]) -> list[str]:
    """The provenance of `--until-settled`: the boundary, its source, its levels and the rounds."""
    s = report.get("settled")
    if not s:
        return []
    return [f"until settled: {s['boundary']} ({s['source']}) at alpha {' and '.join(f'{a:g}' for a in s['alphas'])}; "
            f"rounds end at n = {', '.join(map(str, s['rounds']))} (at most {s['max_trials']} trials per cell)"]


def data_property_lines(name: str) -> list[str]:
    """Where the replayed file differs from the papers' description of it (`audit datasets`)."""
    info = get_info(name)
    differences = property_differences(info)
    if not differences:
        return []
    verdict = (": no paper describes this file, so its cells cannot be compared trial by trial with the papers' runs"
               if incomparable(info) else "")
    return [f"data set {name} differs from the papers: {'; '.join(differences)}{verdict}"]


ORACLE_MARK = " (oracle)"
ORACLE_NOTE = "(oracle): uses the test labels to choose its queries; a reference bound, not a query strategy"
TABLE_HEADER = ("strategy", "library", "n", "mean", "sd", "95% CI", "99% CI", "published", "verdict")
VERDICT_RULE = ("Verdict: the published mean inside the reproduced 95% t-interval (df = n-1) is consistent; "
                "outside it but inside the 99% one, discrepant at 5%; outside both, discrepant at 1%. "
                f"Consistent (low power): the cell could not detect a difference of {LOW_POWER_TOLERANCE:g} AUBC "
                f"({100 * LOW_POWER_TOLERANCE:g} on the percent scale) with {POWER:.0%} power (two-sided t-test at 5%).")
LOW_POWER_MARK = " (low power)"
SETTLED_HEADER = ("trials", "stop", "99% CS at stop")


def settled_rule(report: dict[str, Any]) -> str:
    """The rule of `--until-settled` under the table ("" without it)."""
    s = report.get("settled")
    if not s:
        return ""
    stop = 1 - s["stop_alpha"]
    return (f"Until settled: after each round a cell stops as soon as the {stop:.0%} {s['boundary']} (valid however "
            f"often it is looked at) excludes its published mean: discrepant at {s['stop_alpha']:.0%}. A cell with no "
            f"published value has nothing to settle and stops after the first round (n={s['rounds'][0]}). Every other "
            f"cell (the {1 - s['alphas'][0]:.0%} CS excluding it only, or consistent) runs to n={s['max_trials']} and gets "
            f"the fixed-n t-interval verdict above. The CS columns are the anytime-valid intervals over the trials run.")


def table_header(report: dict[str, Any]) -> tuple[str, ...]:
    """TABLE_HEADER, with the columns of `--until-settled` when the report has them."""
    return TABLE_HEADER + (SETTLED_HEADER if report.get("settled") else ())


def report_row(report: dict[str, Any], cell: dict[str, Any]) -> tuple[str, ...]:
    """One cell as the columns of :func:`table_header`."""
    row = table_row(cell, report["protocol"]["scale"])
    if not report.get("settled"):
        return row
    s = cell.get("settle")
    if not s:
        return row + ("-", "-", "-")
    return row + (f"{s['trials_run']} of {s['max_trials']}", s["stop"], _interval(report["protocol"]["scale"], s["cs99"]))


def table_row(cell: dict[str, Any], scale: str) -> tuple[str, ...]:
    """One cell as the columns of TABLE_HEADER (shared by the terminal, Markdown and HTML tables)."""
    name = cell["strategy"] + ORACLE_MARK * bool(cell.get("uses_test_labels"))
    if cell["status"] == "unavailable":
        return (name, cell["library"], "-", "-", "-", "-", "-", _pct(scale, cell["published_mean"]),
                "unavailable (reason below)")
    if cell["status"] in ("running", "pending"):  # a partial report's unfinished cell
        return (name, cell["library"], "-", "-", "-", "-", "-", _pct(scale, cell["published_mean"]),
                f"{cell['status']} ({cell['reason']})")
    failed = [f"{cell['n_errors']} errors"] * bool(cell["n_errors"]) + [f"{cell.get('n_tle', 0)} TLE"] * bool(cell.get("n_tle"))
    errors = f" ({', '.join(failed)})" if failed else ""
    return (name, cell["library"], f"{cell['n_trials']}{errors}", _pct(scale, cell["mean"]), _pct(scale, cell["sd"]),
            _interval(scale, cell["ci95"]), _interval(scale, cell["ci99"]), _pct(scale, cell["published_mean"]),
            cell["verdict"] + LOW_POWER_MARK * bool(cell.get("low_power")))


def table_notes(report: dict[str, Any]) -> list[str]:
    """Lines under the table: why each unavailable strategy cannot run, how a strategy ran when
    a reader must know it (its capability note), and the oracle mark."""
    notes = [f"{c['strategy']} unavailable: {c['reason']}" for c in report["strategies"] if c["status"] == "unavailable"]
    notes += [f"{c['strategy']}: {c['note']}" for c in report["strategies"] if c["status"] != "unavailable" and c.get("note")]
    return notes + ([ORACLE_NOTE] if any(c.get("uses_test_labels") for c in report["strategies"]) else [])


def format_table(report: dict[str, Any]) -> str:
    """The terminal / Markdown table of the cells; oracles are marked, with a note under the table."""
    header = table_header(report)
    rows = [report_row(report, c) for c in report["strategies"]]
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = lambda r: "  ".join(str(v).ljust(w) for v, w in zip(r, widths)).rstrip()  # noqa: E731
    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows), *table_notes(report)])


@dataclass(frozen=True)
class Item:
    """One line of a report section, its sub-lines, and a tag the HTML report styles (e.g. "triggered")."""

    text: str
    sub: tuple[str, ...] = ()
    tag: str = ""


@dataclass(frozen=True)
class Section:
    """A titled list of report lines: the Markdown and the HTML report render the same sections."""

    title: str
    items: tuple[Item, ...]
    intro: str = ""


def report_sections(report: dict[str, Any]) -> list[Section]:
    """The list sections of a report, in order; empty ones are left out."""
    sections = [_references(report), _diagnosis(report), _at_chance(report), _degenerate(report),
                _shared_causes(report), _findings(report),
                _trial_errors(report), _warnings(report), _fit_paths(report), _skipped(report)]
    return [s for s in sections if s.items]


def _references(report: dict[str, Any]) -> Section:
    items = []
    for c in report["strategies"]:
        if not c.get("reference"):
            continue
        r, welch = c["reference"], c.get("welch")
        extra = f"; Welch t={welch['t']:.2f}, df={welch['df']:.1f}, p={welch['p']:.3g}" if welch else ""
        replayed = report["protocol"]["aubc_variant"]
        mismatch = "" if r["aubc_variant"] == replayed else \
            f" (published with AUBC variant {r['aubc_variant']}, replayed with {replayed})"
        row = f", row '{r['row']}'" if r["row"] else ""  # a user's table may have no row labels
        items.append(Item(f"{c['strategy']}: {r['paper']} {r['table']}{row} ({r['source']}){mismatch}{extra}"))
    if not items and report["strategies"]:  # say why every verdict is "no reference"
        paper, tables = report["protocol"].get("reference_paper"), report["protocol"].get("reference_tables")
        items.append(Item(f"none: {paper} publishes no numeric table (its results are figures), so no cell has a "
                          "published number and every verdict is 'no reference'" if paper and tables == [] else
                          "none: no published number for any cell of this data set (every verdict is 'no reference')"))
    return Section("Published references", tuple(items))


def hypothesis_line(row: dict[str, Any]) -> str:
    lo, hi = row["ci95"]
    return (f"{row['label']} ({row['protocol']}): mean {row['mean']:.4f}, 95% CI [{lo:.4f}, {hi:.4f}], "
            f"n={row['n']}{', published inside' if row['inside'] else ''}"
            f"{' (stopped early: its interim t-interval excluded the published value)' if row.get('stopped_at') else ''}")


def _diagnosis(report: dict[str, Any]) -> Section:
    diagnosed = [c for c in report["strategies"] if c.get("diagnosis")]
    if not diagnosed:
        return Section("Diagnosis", ())
    items = tuple(Item(f"{c['strategy']}: {c['diagnosis']['summary']}",
                       tuple(hypothesis_line(h) for h in c["diagnosis"]["hypotheses"]),
                       c["diagnosis"]["status"].replace(" ", "-")) for c in diagnosed)
    replayed = any(c["diagnosis"]["hypotheses"] for c in diagnosed)
    intro = (f"Each discrepant cell replayed with one knob of {diagnosed[0]['diagnosis']['released']} (the released "
             "code) at a time, and with pairs of knobs when no single one brings the published value inside:"
             if replayed else "")
    return Section("Diagnosis", items, intro)


def _trials_apart(strategy: str, entry: dict[str, Any], scale: str, sub: tuple[str, ...] = ()) -> Item:
    """A cell's trials set apart (at chance, degenerate): how many, which seeds, the mean without them."""
    without = (f"; without them: mean {_pct(scale, entry['mean_without'])}, SD {_pct(scale, entry['sd_without'])}"
               if entry["mean_without"] is not None else "")
    return Item(f"{strategy}: {len(entry['seeds'])} of {entry['n_ok']} trials (seeds {seed_ranges(entry['seeds'])})"
                f"{without}", sub)


def _at_chance(report: dict[str, Any]) -> Section:
    marked = [c for c in report["strategies"] if c.get("at_chance")]
    if not marked:
        return Section("Trials at chance", ())
    scale = report["protocol"]["scale"]
    items = [_trials_apart(c["strategy"], c["at_chance"], scale) for c in marked]
    shared = common_seeds(report["strategies"])
    if shared:
        items.append(Item(f"at chance in every strategy: seeds {seed_ranges(shared)}, a property of the trial seed "
                          "(its data draw, split or initial weights), not of a strategy"))
    entry = marked[0]["at_chance"]
    intro = (f"Trials whose test accuracy, averaged over the rounds, is at most the majority class's share "
             f"{entry['majority_share']:.2f} + {entry['threshold'] - entry['majority_share']:.2f}: the task model did no "
             "better than predicting one class. They say nothing about the strategy; a published SD far below the "
             "replay's leaves no room for such runs among the published ones.")
    return Section("Trials at chance", tuple(items), intro)


def _degenerate(report: dict[str, Any]) -> Section:
    marked = [c for c in report["strategies"] if c.get("degenerate")]
    if not marked:
        return Section("Degenerate trials", ())
    scale = report["protocol"]["scale"]
    items = tuple(_trials_apart(c["strategy"], c["degenerate"], scale, tuple(c["degenerate"]["reasons"]))
                  for c in marked)
    intro = ("Trials in which the strategy's scores were undefined, so that it took the first unlabeled entry every "
             "round: they measure pool-order sampling (random sampling on a shuffled pool, file order on an unshuffled "
             "one), not the strategy. The library computed them so; the cell's mean mixes both kinds of trial.")
    return Section("Degenerate trials", items, intro)


SHARED_CAUSE_INTRO = (
    "Discrepant cells of this replay off in one direction (by library, and all together), tested jointly: "
    "per trial seed, the mean over the cells of (AUBC under a knob - published mean); a knob explains the group "
    "when 0 is inside the 95% t-interval of that mean. The knobs tried form one family (Holm); the consistent "
    "cells' offset, paired by trial seed, estimates the luck of the published splits.")


def _shared_causes(report: dict[str, Any]) -> Section:
    entries = report.get("shared_causes") or []
    items = tuple(Item(e["line"], tuple(
        f"{k['label']}: pooled offset {k['mean']:+.4f} [{k['ci95'][0]:+.4f}, {k['ci95'][1]:+.4f}], n={k['n']}, "
        f"p={k['p']:.3g}, Holm p={k['p_holm']:.3g}{', explains' if k['explains'] else ''}" for k in e["knobs"]),
        "explained" if e["explained_by"] else "unexplained") for e in entries)
    return Section("Shared causes", items, SHARED_CAUSE_INTRO if items else "")


def _findings(report: dict[str, Any]) -> Section:
    items = tuple(Item(f"{'!!' if f['triggered'] else 'ok'} {f['name']}: {f['finding']}",
                       tag="triggered" if f["triggered"] else "quiet") for f in report.get("findings", []))
    return Section("Detector findings", items, "Static checks of the protocol and data set (audit lint):")


def _trial_errors(report: dict[str, Any]) -> Section:
    return Section("Trial errors", tuple(
        Item(f"{c['strategy']}, trial seed {e['trial_seed']} ({e.get('status', 'error')}): {e['error']}")
        for c in report["strategies"] for e in c.get("errors") or []))


def _warnings(report: dict[str, Any]) -> Section:
    return Section("Library warnings (recorded during trials)", tuple(
        Item(f"{c['strategy']}: {w}") for c in report["strategies"] for w in c.get("warnings") or []
        if not w.startswith(DEGENERATE)))  # those have their own section, with counts


def _fit_paths(report: dict[str, Any]) -> Section:
    return Section("Fit paths", tuple(
        Item(f"{c['strategy']}: " + ", ".join(f"{path} ({n} trials)" for path, n in c["fast_paths"].items()))
        for c in report["strategies"] if c.get("fast_paths")),
        "Which code fitted each trial's models: a bit-identical fast path (lean-svc, lean-forest, lean-grid-lr, lean-lr) or "
        "scikit-learn's own (library); see docs/performance.md.")


def _skipped(report: dict[str, Any]) -> Section:
    return Section("Skipped seeds", tuple(Item(f"seed {s}: {why}") for s, why in report["seeds"]["skipped"]))


def markdown(report: dict[str, Any]) -> str:
    """report.md: provenance, the table, the sections and the two figures."""
    p = report["protocol"]
    out = [f"# {p['name']} on {report['dataset']['name']}", ""]
    if report.get("partial"):
        out += [f"**{report['partial']['line']}**: written while the run goes on; the final report replaces "
                "this one (no figures until then).", ""]
    out += [f"- {line}" for line in provenance_lines(report)]
    out += ["", "## AUBC per strategy", "", "```", format_table(report), "```", "", VERDICT_RULE, ""]
    if report.get("settled"):
        out += [settled_rule(report), ""]
    for section in report_sections(report):
        out += [f"## {section.title}", ""] + ([section.intro, ""] if section.intro else [])
        for item in section.items:
            out += [f"- {item.text}"] + [f"  - {sub}" for sub in item.sub]
        out.append("")
    if report.get("partial"):
        return "\n".join(out)
    out += ["## Published values against the reproduced intervals", "", f"![forest plot]({FOREST_PNG})", ""]
    out += ["## Learning curves", "", f"![learning curves]({CURVES_PNG})", ""]
    return "\n".join(out)
