"""report.html: the same content as report.md in one self-contained page (inline CSS,
figures embedded as base64 PNG, no script and no network), so it opens offline."""
from __future__ import annotations

import base64
from html import escape
from pathlib import Path
from typing import Any

from audit.report.sections import (
    VERDICT_RULE,
    Section,
    provenance_lines,
    report_row,
    report_sections,
    settled_rule,
    table_header,
    table_notes,
)

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 78em;
       padding: 0 1em; color: #222; line-height: 1.4; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.6em; border-bottom: 1px solid #ddd; }
.provenance { font-family: ui-monospace, monospace; font-size: 0.85em; background: #f6f8fa; padding: 0.6em 1em; }
.provenance li { list-style: none; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f0f0f0; }
td.num { font-family: ui-monospace, monospace; text-align: right; white-space: nowrap; }
.consistent { background: #e3f4e6; } .discrepant-5 { background: #fff1d6; } .discrepant-1 { background: #fbe0dd; }
li.triggered { color: #a61b0f; font-weight: 600; } li.quiet { color: #555; }
li.explained > span { color: #1d7a3a; } li.unexplained > span { color: #a61b0f; }
li ul { font-weight: normal; color: #444; font-size: 0.92em; }
figure { margin: 1em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { font-size: 0.85em; color: #555; }
"""
NUMERIC_COLUMNS = {"n", "mean", "sd", "95% CI", "99% CI", "published", "trials", "99% CS at stop"}
VERDICT_CLASSES = {"consistent": "consistent", "discrepant at 5%": "discrepant-5", "discrepant at 1%": "discrepant-1"}


def _table(report: dict[str, Any]) -> str:
    header = (*table_header(report), "diagnosis")
    out = ["<table id='discrepancies'>", "<tr>" + "".join(f"<th>{escape(h)}</th>" for h in header) + "</tr>"]
    for cell in report["strategies"]:
        values = (*report_row(report, cell), (cell.get("diagnosis") or {}).get("summary", ""))
        tds = [f"<td class='num'>{escape(v)}</td>" if h in NUMERIC_COLUMNS else f"<td>{escape(v)}</td>"
               for h, v in zip(header, values)]
        css = VERDICT_CLASSES.get(cell.get("verdict", ""), "")
        out.append(f"<tr class='{css}'>" + "".join(tds) + "</tr>")
    out.append("</table>")
    out += [f"<p>{escape(note)}</p>" for note in table_notes(report)]
    return "\n".join(out)


def _section(section: Section) -> str:
    out = [f"<h2>{escape(section.title)}</h2>"]
    if section.intro:
        out.append(f"<p>{escape(section.intro)}</p>")
    out.append("<ul>")
    for item in section.items:
        sub = "<ul>" + "".join(f"<li>{escape(s)}</li>" for s in item.sub) + "</ul>" if item.sub else ""
        out.append(f"<li class='{item.tag}'><span>{escape(item.text)}</span>{sub}</li>")
    out.append("</ul>")
    return "\n".join(out)


def _figure(png: Path, alt: str, caption: str) -> str:
    data = base64.b64encode(png.read_bytes()).decode("ascii")
    return (f"<figure><img alt='{escape(alt)}' src='data:image/png;base64,{data}'>"
            f"<figcaption>{escape(caption)}</figcaption></figure>")


def render_html(report: dict[str, Any], forest_png: Path, curves_png: Path) -> str:
    p = report["protocol"]
    title = f"{p['name']} on {report['dataset']['name']}"
    provenance = "".join(f"<li>{escape(line)}</li>" for line in provenance_lines(report))
    body = [
        f"<h1>{escape(title)}</h1>",
        f"<ul class='provenance'>{provenance}</ul>",
        "<h2>AUBC per strategy: published vs reproduced</h2>", _table(report), f"<p>{escape(VERDICT_RULE)}</p>",
        *([f"<p>{escape(settled_rule(report))}</p>"] if report.get("settled") else []),
        "<h2>Published values against the reproduced intervals</h2>",
        _figure(forest_png, "forest plot", "Reproduced mean (circle) with its 95% (thick) and 99% (thin) t-interval; "
                "published mean (red diamond). Rows starting with ~ are the diagnosis replays of the cell above "
                "(95% interval; green when the published value is inside)."),
        "<h2>Learning curves</h2>",
        _figure(curves_png, "learning curves", "Mean test accuracy against labeled-set size, 95% t-band per round."),
        *(_section(s) for s in report_sections(report)),
        f"<p class='provenance'>generated {escape(report.get('generated_at', ''))}</p>",
    ]
    return ("<!DOCTYPE html>\n<html lang='en'>\n<head>\n<meta charset='utf-8'>\n"
            f"<title>{escape(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
            + "\n".join(body) + "\n</body>\n</html>\n")
