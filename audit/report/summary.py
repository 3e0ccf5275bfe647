"""What `audit summary` prints and writes: provenance, the counts, the most discrepant
cells, the lint findings beside their cells, and the report directory (summary.csv,
summary.png: the data set x strategy heatmap, summary.md, summary.html)."""
from __future__ import annotations

import json
import textwrap
from html import escape
from pathlib import Path
from typing import Any

from audit.analysis.compare import (
    CONSISTENT,
    DISCREPANT_1,
    DISCREPANT_5,
    NO_REFERENCE,
    NOT_RUN,
    TOO_FEW,
)
from audit.analysis.stats import seed_ranges
from audit.engine.destinations import csv_table, write_directory
from audit.report.html import CSS, VERDICT_CLASSES, _figure
from audit.report.sections import VERDICT_RULE, _interval, _pct

SUMMARY_PNG = "summary.png"
CSV_COLUMNS = ("dataset", "strategy", "n", "n_failed", "mean", "sd", "ci95_low", "ci95_high", "ci99_low", "ci99_high",
               "published_mean", "published_sd", "difference", "t", "verdict", "low_power", "welch_p", "reference",
               "trial_seeds", "lint")
# Paul Tol's colour-blind-safe "light" scheme (https://personal.sron.nl/~pault/): black text reads on each.
COLOURS = {CONSISTENT: "#44BB99", DISCREPANT_5: "#EEDD88", DISCREPANT_1: "#EE8866", NO_REFERENCE: "#99DDFF",
           TOO_FEW: "#DDDDDD", NOT_RUN: "#FFFFFF"}
LOW_POWER_COLOUR = "#BBE6D8"  # consistent, but the interval could not detect a 0.02 AUBC difference
LINT_COLOUR = "#882255"  # Tol's wine: the lint marks in the cells' corners
LEGEND_TEXT = {CONSISTENT: "consistent (published inside the 95% CI)",
               "low power": "consistent, low power",
               DISCREPANT_5: "discrepant at 5% (outside 95%, inside 99% CI)",
               DISCREPANT_1: "discrepant at 1% (outside the 99% CI)",
               NO_REFERENCE: "no reference (n/r)", TOO_FEW: "too few trials (one)", NOT_RUN: "not run (–)"}


def difference_text(scale: str, value: float | None) -> str:
    """reproduced - published in the protocol's scale: "+1.23" (percent points) or "+0.012"."""
    if value is None:
        return "-"
    return f"{100 * value:+.2f}" if scale == "percent" else f"{value:+.3f}"


def _unit(scale: str) -> str:
    return "percent points" if scale == "percent" else "AUBC (fraction)"


def _mark(numbers: list[int]) -> str:
    return "".join(f"[{n}]" for n in numbers)


def provenance_lines(summary: dict[str, Any]) -> list[str]:
    p, env, seeds = summary["protocol"], summary["environment"], summary["seeds"]
    libs = ", ".join(f"{k} {v}" for k, v in env.items() if v != "absent")
    planned = sorted(set(seeds["planned"].values()))
    wanted = (f"the first {summary['trials']} valid seeds of each data set (--trials)" if summary["trials"]
              else "the protocol's trial count per data set (" + ", ".join(str(n) for n in planned) + ")")
    lines = [
        f"protocol {p['name']} (spec {p['spec_hash']}): {p['title']}",
        f"AUBC {p['aubc_variant']} on {p['aubc_metric']} ({p['aubc_definition']}); SD ddof={p['sd_ddof']}; "
        f"values in {p.get('unit', p['scale'])}; published numbers from {p['reference_paper']} (batch size {p['batch_size']})",
        f"{len(summary['datasets'])} data sets x {len(summary['strategies'])} strategies; trial seeds: {wanted}; "
        f"used {seed_ranges(seeds['used'])}",
        f"libraries: {libs}; code {summary['code']}; store {summary['store']}, fingerprint {summary['fingerprint']}",
    ]
    other = summary["other_fingerprints"]
    if other:
        lines.append(f"not used: {sum(other.values())} stored trials of {p['name']} from other code, spec or "
                     f"library versions (fingerprint {', '.join(sorted(other))}); `audit run` replays them "
                     "under this one")
    return lines


def data_line(summary: dict[str, Any]) -> str:
    """Each data set's size and checksum (the pages' provenance; the terminal leaves it out)."""
    return "data sets: " + ", ".join(f"{name} (n={f['n']}, d={f['d']}, sha256 {f['sha256'][:12]})"
                                     for name, f in summary["data"].items())


def count_lines(summary: dict[str, Any]) -> list[str]:
    """"12 of 18 referenced cells consistent at 5%; ..." and the cell total."""
    c = summary["counts"]
    referenced = c[CONSISTENT] + c[DISCREPANT_5] + c[DISCREPANT_1]
    low = f" ({c['low power']} of them low power)" if c["low power"] else ""
    parts = [f"{c[CONSISTENT]} of {referenced} referenced cells consistent at 5%{low}",
             f"{c[DISCREPANT_5]} discrepant at 5%, {c[DISCREPANT_1]} at 1%", f"{c[NO_REFERENCE]} no reference"]
    if c[TOO_FEW]:
        parts.append(f"{c[TOO_FEW]} too few trials (one)")
    parts.append(f"{c[NOT_RUN]} not run")
    short = short_cells(summary)
    if short:
        parts.append(f"{len(short)} with fewer trials than planned (n=k/N in the heatmap)")
    lines = ["; ".join(parts), f"{c['cells']} cells: {len(summary['datasets'])} data sets x "
                                f"{len(summary['strategies'])} strategies"]
    if summary["unavailable"]:
        lines.append(f"unavailable here (never run): {', '.join(summary['unavailable'])}")
    if summary["no_valid_seed"]:
        lines.append(f"no valid trial seed under {summary['protocol']['name']} (its cells are not run): " + "; ".join(f"{d} ({why})" for d, why in summary["no_valid_seed"].items()))
    return lines


DISCREPANT_HEADER = ("data set", "strategy", "n", "reproduced", "95% CI", "published", "difference", "t", "verdict")


def discrepant_rows(summary: dict[str, Any]) -> list[tuple[str, ...]]:
    scale = summary["protocol"]["scale"]
    return [(c["dataset"], c["strategy"], str(c["n"]), _pct(scale, c["mean"]), _interval(scale, c["ci95"]),
             _pct(scale, c["published_mean"]), difference_text(scale, c["difference"]),
             "-" if c["t"] is None else f"{c['t']:+.1f}", c["verdict"] + (" " + _mark(c["lint"]) if c["lint"] else ""))
            for c in summary["most_discrepant"]]


def _aligned(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = lambda r: "  ".join(str(v).ljust(w) for v, w in zip(r, widths)).rstrip()  # noqa: E731
    return [line(header), line(["-" * w for w in widths]), *map(line, rows)]


def finding_lines(summary: dict[str, Any]) -> list[str]:
    """The published tables' lint findings: numbered ones mark cells, the rest concern none shown."""
    lines = []
    for f in summary["findings"]:
        cells = f"; marks {len(f['cells'])} cell(s)" if f["cells"] else "; concerns no cell shown"
        lines.append(f"{_mark([f['number']]) if f['number'] else '  '} {f['name']}: {f['finding']}{cells}")
    return lines


def terminal_text(summary: dict[str, Any]) -> str:
    """What `audit summary` prints before the report line."""
    unit = _unit(summary["protocol"]["scale"])
    out = [*provenance_lines(summary), "", *count_lines(summary), ""]
    if summary["most_discrepant"]:
        out += [f"most discrepant cells (by |t| = |reproduced - published| / standard error; difference in {unit}):",
                *_aligned(DISCREPANT_HEADER, discrepant_rows(summary))]
    else:
        out.append("no discrepant cell")
    paper = summary["protocol"]["reference_paper"]
    marking = [line for f, line in zip(summary["findings"], finding_lines(summary)) if f["number"]]
    if marking:
        out += ["", f"lint findings beside the cells (`audit lint-references {paper}`):", *marking]
    others = len(summary["findings"]) - len(marking)
    if others:
        out += [""] * (not marking) + [f"{others} {'more ' * bool(marking)}lint finding{'s' * (others != 1)} on the {paper} tables "
                   "concern no cell shown (listed in summary.md)"]
    return "\n".join(out)


def csv_rows(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """summary.csv: one row per cell, values as fractions."""
    by_number = {f["number"]: f for f in summary["findings"] if f["number"]}
    rows = []
    for c in summary["cells"]:
        ref = c["reference"]
        rows.append({
            "dataset": c["dataset"], "strategy": c["strategy"], "n": c["n"], "n_failed": c["n_failed"],
            "mean": c["mean"], "sd": c["sd"], "ci95_low": c["ci95"][0], "ci95_high": c["ci95"][1],
            "ci99_low": c["ci99"][0], "ci99_high": c["ci99"][1], "published_mean": c["published_mean"],
            "published_sd": c["published_sd"], "difference": c["difference"], "t": c["t"], "verdict": c["verdict"],
            "low_power": c["low_power"], "welch_p": c["welch_p"],
            "reference": "" if ref is None else _reference_text(ref),
            "trial_seeds": seed_ranges(c["trial_seeds"]) if c["trial_seeds"] else "",
            "lint": " | ".join(f"[{n}] {by_number[n]['name']}: {by_number[n]['finding']}" for n in c["lint"]),
        })
    return rows


def _reference_text(ref: dict[str, Any]) -> str:
    row = f", row '{ref['row']}'" if ref["row"] else ""
    return f"{ref['paper']} {ref['table']}{row} ({ref['source']})"


def _write_csv(summary: dict[str, Any], path: Path) -> None:
    csv_table(CSV_COLUMNS, list(csv_rows(summary)))(path)


def _category(cell: dict[str, Any]) -> str:
    return "low power" if cell["verdict"] == CONSISTENT and cell["low_power"] else cell["verdict"]


def short_cells(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """Cells run with fewer successful trials than planned for their data set (a run still
    going, failed trials, or a store filled with a smaller --trials)."""
    planned = summary["seeds"]["planned"]
    return [c for c in summary["cells"] if 0 < c["n"] < planned.get(c["dataset"], 0)]


def cell_text(cell: dict[str, Any], scale: str, planned: int) -> str:
    """The text of a heatmap cell: the difference, n/r, n=1 or –, with "n=k/N" below when
    fewer trials than the ``planned`` N back it."""
    verdict = cell["verdict"]
    text = {NO_REFERENCE: "n/r", NOT_RUN: "–", TOO_FEW: "n=1"}.get(verdict)
    if text is None:
        text = difference_text(scale, cell["difference"])
    if 1 < cell["n"] < planned:
        text += f"\nn={cell['n']}/{planned}"
    return text


def plot_heatmap(summary: dict[str, Any], path: Path) -> None:
    """Rows data sets, columns strategies, each cell coloured by its verdict and labelled
    with reproduced - published (n/r: no reference, –: not run); lint marks [k] in the top right corner."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_rgb
    from matplotlib.patches import Patch

    datasets, strategies = summary["datasets"], summary["strategies"]
    scale = summary["protocol"]["scale"]
    colours = {**COLOURS, "low power": LOW_POWER_COLOUR}
    by_key = {(c["dataset"], c["strategy"]): c for c in summary["cells"]}
    image = [[to_rgb(colours[_category(by_key[d, s])]) for s in strategies] for d in datasets]
    width = 2.6 + 0.72 * len(strategies)
    height = 2.4 + 0.34 * len(datasets)
    width = max(width, 7.5)
    fig, ax = plt.subplots(figsize=(width, height), dpi=110, layout="constrained")
    ax.imshow(image, aspect="auto", interpolation="nearest")
    for i, d in enumerate(datasets):
        for j, s in enumerate(strategies):
            cell = by_key[d, s]
            ax.text(j, i, cell_text(cell, scale, summary["seeds"]["planned"].get(d, 0)), ha="center",
                    va="center", fontsize=8, color="#111111", linespacing=0.9)
            if cell["lint"]:  # the lint findings on its published number, in the top right corner
                ax.text(j + 0.46, i - 0.38, _mark(cell["lint"]), ha="right", va="top", fontsize=6.5,
                        color=LINT_COLOUR, fontweight="bold")
    ax.set_xticks(range(len(strategies)), strategies, rotation=40, ha="left", rotation_mode="anchor", fontsize=9)
    ax.set_yticks(range(len(datasets)), datasets, fontsize=9)
    ax.xaxis.tick_top()
    ax.set_xticks([x - 0.5 for x in range(1, len(strategies))], minor=True)
    ax.set_yticks([y - 0.5 for y in range(1, len(datasets))], minor=True)
    ax.grid(which="minor", color="#999999", linewidth=0.6)
    ax.tick_params(which="minor", length=0)
    for spine in ax.spines.values():
        spine.set_color("#999999")
    counts = summary["counts"]
    shown = dict(counts)
    shown[CONSISTENT] -= counts["low power"]
    order = [CONSISTENT, "low power", DISCREPANT_5, DISCREPANT_1, NO_REFERENCE, TOO_FEW, NOT_RUN]
    handles = [Patch(facecolor=colours[v], edgecolor="#777777", label=f"{LEGEND_TEXT[v]}: {shown[v]}")
               for v in order if shown[v] or v in (CONSISTENT, DISCREPANT_5, DISCREPANT_1)]
    p = summary["protocol"]
    referenced = counts[CONSISTENT] + counts[DISCREPANT_5] + counts[DISCREPANT_1]
    fig.suptitle(f"{p['name']} (spec {p['spec_hash'][:8]}, AUBC {p['aubc_variant']}): reproduced − published mean, "
                 f"in {_unit(scale)}\n{counts[CONSISTENT]} of {referenced} referenced cells consistent at 5%",
                 fontsize=11)
    notes = [_wrapped(f"[{f['number']}] {f['name']}: {f['finding']}", int(width * NOTE_CHARS_PER_INCH))
             for f in summary["findings"] if f["number"]]
    fig.legend(handles=handles, loc="outside lower center", ncols=min(4, len(handles)), fontsize=9, frameon=False,
               title="\n".join(["[k] in a corner: a lint finding on the published number (all in summary.md)", *notes])
               if notes else None, title_fontsize=8)
    fig.savefig(path)
    plt.close(fig)


NOTE_CHARS_PER_INCH = 12  # characters of the 8-point footnote a figure inch holds, with room to spare
NOTE_LINES = 3  # lines a lint footnote may take under the heatmap (the whole finding is in summary.md)


def _wrapped(text: str, width: int) -> str:
    """The footnote wrapped to the figure's width, at most NOTE_LINES lines, the last cut with "…"."""
    lines = textwrap.wrap(text, width)
    if len(lines) > NOTE_LINES:
        lines = lines[:NOTE_LINES]
        lines[-1] = lines[-1][:width - 1].rstrip() + "…"
    return "\n".join(lines)


def markdown(summary: dict[str, Any]) -> str:
    p = summary["protocol"]
    scale = p["scale"]
    out = [f"# {p['name']}: data set x strategy summary", ""]
    out += [f"- {line}" for line in [*provenance_lines(summary), data_line(summary)]]
    out += ["", "## Counts", "", *[f"- {line}" for line in count_lines(summary)], "", VERDICT_RULE, ""]
    out += ["## Heatmap", "", f"![verdict heatmap]({SUMMARY_PNG})", "",
            f"Cells coloured by verdict; the text is the reproduced minus the published mean in {_unit(scale)} "
            "(n/r: no published number; –: not run; n=k/N: k of the N planned trials).", ""]
    out += ["## Most discrepant cells", ""]
    out += (["```", *_aligned(DISCREPANT_HEADER, discrepant_rows(summary)), "```", ""]
            if summary["most_discrepant"] else ["No discrepant cell.", ""])
    if summary["findings"]:
        out += ["## Lint of the published tables", "",
                f"`audit lint-references {p['reference_paper']}`; a number [k] marks the cells whose published "
                "number the finding doubts.", ""]
        out += [f"- {line.strip()}" for line in finding_lines(summary)] + [""]
    out += ["## Every cell", "", "| " + " | ".join(TABLE_HEADER) + " |", "|" + "---|" * len(TABLE_HEADER)]
    out += ["| " + " | ".join(v.replace("|", "\\|") for v in row) + " |" for row in table_rows(summary)]
    return "\n".join(out) + "\n"


TABLE_HEADER = ("data set", "strategy", "n", "mean", "sd", "95% CI", "99% CI", "published", "difference",
                "verdict", "Welch p", "reference", "lint")


def table_rows(summary: dict[str, Any]) -> list[tuple[str, ...]]:
    scale = summary["protocol"]["scale"]
    rows = []
    for c in summary["cells"]:
        failed = f" ({c['n_failed']} failed)" if c["n_failed"] else ""
        rows.append((c["dataset"], c["strategy"], f"{c['n']}{failed}", _pct(scale, c["mean"]), _pct(scale, c["sd"]),
                     _interval(scale, c["ci95"]), _interval(scale, c["ci99"]), _pct(scale, c["published_mean"]),
                     difference_text(scale, c["difference"]),
                     c["verdict"] + (" (low power)" if c["low_power"] else ""),
                     "-" if c["welch_p"] is None else f"{c['welch_p']:.3g}",
                     "-" if c["reference"] is None else _reference_text(c["reference"]), _mark(c["lint"])))
    return rows


SUMMARY_CSS = CSS + """
.counts { font-weight: 600; }
tr.not-run td, tr.no-reference td { color: #777; }
"""


def render_html(summary: dict[str, Any], png: Path) -> str:
    p = summary["protocol"]
    title = f"{p['name']}: data set x strategy summary"
    provenance = "".join(f"<li>{escape(line)}</li>" for line in [*provenance_lines(summary), data_line(summary)])
    body = [f"<h1>{escape(title)}</h1>", f"<ul class='provenance'>{provenance}</ul>",
            "<ul class='counts'>" + "".join(f"<li>{escape(line)}</li>" for line in count_lines(summary)) + "</ul>",
            f"<p>{escape(VERDICT_RULE)}</p>", "<h2>Heatmap</h2>",
            _figure(png, "verdict heatmap", f"Cells coloured by verdict; the text is the reproduced minus the "
                    f"published mean in {_unit(p['scale'])} (n/r: no published number; –: not run; n=k/N: k of the N "
                    "planned trials); [k] in a cell's corner "
                    "is a lint finding below."),
            "<h2>Most discrepant cells</h2>"]
    body.append(_html_table(DISCREPANT_HEADER, discrepant_rows(summary), [c["verdict"] for c in summary["most_discrepant"]])
                if summary["most_discrepant"] else "<p>No discrepant cell.</p>")
    if summary["findings"]:
        body += ["<h2>Lint of the published tables</h2>",
                 f"<p><code>audit lint-references {escape(p['reference_paper'])}</code>; a number [k] marks the cells "
                 "whose published number the finding doubts.</p>",
                 "<ul>" + "".join(f"<li class='triggered'>{escape(line.strip())}</li>"
                                  for line in finding_lines(summary)) + "</ul>"]
    body += ["<h2>Every cell</h2>", _html_table(TABLE_HEADER, table_rows(summary),
                                                [c["verdict"] for c in summary["cells"]]),
             f"<p class='provenance'>generated {escape(summary['generated_at'])}</p>"]
    return ("<!DOCTYPE html>\n<html lang='en'>\n<head>\n<meta charset='utf-8'>\n"
            f"<title>{escape(title)}</title>\n<style>{SUMMARY_CSS}</style>\n</head>\n<body>\n"
            + "\n".join(body) + "\n</body>\n</html>\n")


NUMERIC = {"n", "mean", "sd", "95% CI", "99% CI", "published", "difference", "reproduced", "t", "Welch p"}


def _html_table(header: tuple[str, ...], rows: list[tuple[str, ...]], verdicts: list[str]) -> str:
    out = ["<table>", "<tr>" + "".join(f"<th>{escape(h)}</th>" for h in header) + "</tr>"]
    for row, verdict in zip(rows, verdicts):
        css = VERDICT_CLASSES.get(verdict, verdict.replace(" ", "-"))
        out.append(f"<tr class='{css}'>" + "".join(
            f"<td class='num'>{escape(v)}</td>" if h in NUMERIC else f"<td>{escape(v)}</td>"
            for h, v in zip(header, row)) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def write_summary(summary: dict[str, Any], out_dir: Path, holds: dict[str, Any],
                  create_parents: bool = False) -> list[str]:
    """summary.csv, summary.png, summary.md, summary.html and summary.json into ``out_dir``,
    atomically, with its manifest; returns the names written."""
    return write_directory(out_dir, {
        "summary.csv": lambda path: _write_csv(summary, path),
        SUMMARY_PNG: lambda path: plot_heatmap(summary, path),
        "summary.md": markdown(summary),
        "summary.html": lambda path: path.write_text(render_html(summary, path.parent / SUMMARY_PNG)),
        "summary.json": json.dumps(summary, indent=1, default=str) + "\n",
    }, holds, create_parents=create_parents)
