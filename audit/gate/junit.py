"""What `audit gate` writes: the terminal and Markdown summary and the JUnit XML that CI
systems display (one test case per cell)."""
from __future__ import annotations

import math
import socket
import xml.etree.ElementTree as ET
from typing import Any

from audit.analysis.stats import TRIALS_NEEDED_POWER, format_number


def format_summary(report: dict[str, Any]) -> str:
    """The Markdown summary: verdict, environment and protocol changes, one row per cell."""
    counts = ", ".join(f"{n} {v}" for v, n in report["counts"].items() if n)
    interval = f"{100 * (1 - 2 * report['alpha']):g}% CI"
    lines = [f"# al-audit gate: suite `{report['suite']}`", "",
             f"**{report['overall']}** (exit {report['exit_code']}): {counts}.", "",
             f"Baseline `{report['baseline']}` (created {report['baseline_created_at']}); protocol "
             f"`{report['protocol']['name']}` ({report['protocol']['source']}), AUBC {report['protocol']['aubc_variant']} "
             f"on {report['protocol']['aubc_metric']}; margin ±{report['margin']:g} AUBC, alpha {report['alpha']:g}"
             + (", strict" if report["strict"] else "") + f"; replayed in {report['seconds']:g} s.", "",
             "## Environment changes", ""]
    changes = report["environment"]["changes"]
    if changes:
        lines += ["| package | baseline | now |", "|---|---|---|"]
        lines += [f"| {c['key']} | {c['from']} | {c['to']} |" for c in changes]
    else:
        lines.append("None: the same versions as the baseline.")
    lines += ["", "## Protocol changes", ""]
    if report["protocol_changes"]:
        lines += ["| setting | baseline | now |", "|---|---|---|"]
        lines += [f"| `{c['key']}` | {c['from']} | {c['to']} |" for c in report["protocol_changes"]]
    else:
        lines.append("None: the baseline's protocol spec was replayed.")
    lines += ["", "## Cells", "",
              f"| data set | strategy | library | verdict | trials | same queries | mean diff | {interval} | d_z | p (diff) | p (TOST) |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in report["cells"]:
        ci = c.get("ci")
        ci_text = "-" if not ci or any(math.isnan(v) for v in ci) else f"[{ci[0]:+.4f}, {ci[1]:+.4f}]"
        same = f"{c['identical_queries']}/{c['paired_trials']}" if "paired_trials" in c else "-"
        lines.append(f"| {c['dataset']} | {c['strategy']} | {c['library']} | **{c['verdict']}** | {c['n_trials']} | "
                     f"{same} | {format_number(c.get('mean_difference'), '+.4f')} | {ci_text} | {format_number(c.get('dz'), '+.2f')} | "
                     f"{format_number(c.get('p_difference'), '.3g')} | {format_number(c.get('p_tost'), '.3g')} |")
    notable = [c for c in report["cells"] if c["verdict"] not in ("identical", "equivalent")]
    if notable:
        lines += ["", "## Findings", ""]
        for c in notable:
            settings = f" Changed settings: {'; '.join(c['changed_settings'])}." if c["changed_settings"] else ""
            lines.append(f"- **{c['verdict']}**: `{c['strategy']}` on `{c['dataset']}`: {c['message']}.{settings}")
    lines += ["", "Verdicts: *identical* = same queries and AUBC in every trial; *equivalent* = TOST within the "
              "margin; *drift* = paired t-test significant and the mean difference beyond the margin; "
              "*inconclusive* = neither (the estimate of trials needed assumes the observed mean and SD, "
              f"{int(TRIALS_NEEDED_POWER * 100)}% power); *error* = a trial's status changed or the cell could not run.", ""]
    return "\n".join(lines)


def junit_xml(report: dict[str, Any]) -> str:
    """JUnit XML: one testsuite per data set, one testcase per (data set, strategy);
    drift is a failure, error an error, inconclusive a skip (an error under --strict)."""
    root = ET.Element("testsuites", name=f"al-audit gate {report['suite']}")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    timestamp = report["generated_at"][:19]
    env_text = "; ".join(f"{c['key']} {c['from']} -> {c['to']}" for c in report["environment"]["changes"]) or "none"
    spec_text = "; ".join(f"{c['key']}: {c['from']} -> {c['to']}" for c in report["protocol_changes"]) or "none"
    for dataset in dict.fromkeys(c["dataset"] for c in report["cells"]):
        cells = [c for c in report["cells"] if c["dataset"] == dataset]
        suite = ET.SubElement(root, "testsuite", name=f"gate.{report['suite']}.{dataset}",
                              timestamp=timestamp, hostname=socket.gethostname())
        props = ET.SubElement(suite, "properties")
        for name, value in (("margin", report["margin"]), ("alpha", report["alpha"]),
                            ("protocol", report["protocol"]["name"]), ("environment changes", env_text),
                            ("protocol changes", spec_text)):
            ET.SubElement(props, "property", name=name, value=str(value))
        counts = {"tests": len(cells), "failures": 0, "errors": 0, "skipped": 0}
        for c in cells:
            case = ET.SubElement(suite, "testcase", name=c["strategy"],
                                 classname=f"al-audit.gate.{report['suite']}.{dataset}", time=f"{c['seconds']:.3f}")
            text = f"{c['verdict']}: {c['strategy']} on {dataset} ({c['library']}): {c['message']}"
            if c["changed_settings"]:
                text += "\nchanged settings: " + "; ".join(c["changed_settings"])
            if c["verdict"] == "drift":
                ET.SubElement(case, "failure", message=text.splitlines()[0][:500], type="drift").text = text
                counts["failures"] += 1
            elif c["verdict"] == "error" or (c["verdict"] == "inconclusive" and report["strict"]):
                ET.SubElement(case, "error", message=text.splitlines()[0][:500], type=c["verdict"]).text = text
                counts["errors"] += 1
            elif c["verdict"] == "inconclusive":
                ET.SubElement(case, "skipped", message=text.splitlines()[0][:500])
                counts["skipped"] += 1
            ET.SubElement(case, "system-out").text = text
        for key, value in counts.items():
            suite.set(key, str(value))
            totals[key] += value
        suite.set("time", f"{sum(c['seconds'] for c in cells):.3f}")
    for key, value in totals.items():
        if key != "skipped":  # the JUnit schema counts skips per testsuite only
            root.set(key, str(value))
    root.set("time", f"{report['seconds']:.3f}")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
