"""Reports of one replay: report.json, report.md, per_trial.csv and a learning-curve PNG.

Every number printed carries its provenance: the protocol and its spec hash, the AUBC
variant, the library versions and the trial seeds. A report directory is written to a
temporary sibling and renamed into place, so a failed run never leaves half a report.
"""
from __future__ import annotations

import csv
import json
import math
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from audit.compare import t_interval

FIELDS = ("strategy", "n_trials", "mean", "sd", "ci95", "ci99", "published_mean", "verdict")


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
        f"AUBC {p['aubc_variant']} on {p['aubc_metric']} ({p['aubc_definition']}); "
        f"SD ddof={p['sd_ddof']}; values in {p['scale']}",
        f"trial seeds {_seed_ranges(seeds['trial_seeds'])} ({len(seeds['trial_seeds'])} trials, "
        f"{len(seeds['skipped'])} seeds skipped); subsystem seeds {seeds['policy']}",
        f"libraries: {libs}; store fingerprint {report['fingerprint']}",
    ]


def _seed_ranges(seeds: list[int]) -> str:
    if not seeds:
        return "none"
    parts, start = [], seeds[0]
    for prev, cur in zip(seeds, seeds[1:] + [None]):
        if cur != prev + 1 if cur is not None else True:
            parts.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = cur
    return ",".join(parts)


ORACLE_MARK = " (oracle)"
ORACLE_NOTE = "(oracle): uses the test labels to choose its queries; a reference bound, not a query strategy"


def format_table(report: dict[str, Any]) -> str:
    """The terminal / Markdown table of the cells; oracles are marked, with a note under the table."""
    scale = report["protocol"]["scale"]
    header = ("strategy", "library", "n", "mean", "sd", "95% CI", "99% CI", "published", "verdict")
    rows = []
    for c in report["strategies"]:
        name = c["strategy"] + ORACLE_MARK * bool(c.get("uses_test_labels"))
        if c["status"] == "unavailable":
            rows.append((name, c["library"], "-", "-", "-", "-", "-", _pct(scale, c["published_mean"]),
                         f"unavailable: {c['reason']}"))
            continue
        failed = [f"{c['n_errors']} errors"] * bool(c["n_errors"]) + [f"{c.get('n_tle', 0)} TLE"] * bool(c.get("n_tle"))
        errors = f" ({', '.join(failed)})" if failed else ""
        rows.append((name, c["library"], f"{c['n_trials']}{errors}", _pct(scale, c["mean"]),
                     _pct(scale, c["sd"]), _interval(scale, c["ci95"]), _interval(scale, c["ci99"]),
                     _pct(scale, c["published_mean"]), c["verdict"]))
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = lambda r: "  ".join(str(v).ljust(w) for v, w in zip(r, widths)).rstrip()  # noqa: E731
    notes = [ORACLE_NOTE] if any(c.get("uses_test_labels") for c in report["strategies"]) else []
    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows), *notes])


def _markdown(report: dict[str, Any]) -> str:
    p = report["protocol"]
    out = [f"# {p['name']} on {report['dataset']['name']}", ""]
    out += [f"- {line}" for line in provenance_lines(report)]
    out += ["", "## AUBC per strategy", "", "```", format_table(report), "```", ""]
    out += ["Verdict: the published mean inside the reproduced 95% t-interval (df = n-1) is *consistent*; "
            "outside it but inside the 99% one, *discrepant at 5%*; outside both, *discrepant at 1%*.", ""]
    refs = [c for c in report["strategies"] if c.get("reference")]
    if refs:
        out += ["## Published references", ""]
        for c in refs:
            r = c["reference"]
            welch = c.get("welch")
            extra = f"; Welch t={welch['t']:.2f}, df={welch['df']:.1f}, p={welch['p']:.3g}" if welch else ""
            mismatch = "" if r["aubc_variant"] == p["aubc_variant"] else \
                f" (published with AUBC variant {r['aubc_variant']}, replayed with {p['aubc_variant']})"
            out.append(f"- {c['strategy']}: {r['paper']} {r['table']}, row '{r['row']}' ({r['source']}){mismatch}{extra}")
        out.append("")
    diagnosed = [c for c in report["strategies"] if c.get("diagnosis")]
    if diagnosed:
        out += ["## Diagnosis", "", f"Each discrepant cell replayed with one knob of "
                f"`{diagnosed[0]['diagnosis']['released']}` (the released code) at a time:", ""]
        for c in diagnosed:
            out.append(f"- {c['strategy']}: {c['diagnosis']['summary']}")
            out += [f"  - {h['label']} (`{h['protocol']}`): mean {h['mean']:.4f}, 95% CI "
                    f"[{h['ci95'][0]:.4f}, {h['ci95'][1]:.4f}], n={h['n']}"
                    f"{', published inside' if h['inside'] else ''}" for h in c["diagnosis"]["hypotheses"]]
        out.append("")
    problems = [c for c in report["strategies"] if c.get("errors")]
    if problems:
        out += ["## Trial errors", ""]
        for c in problems:
            for e in c["errors"]:
                out.append(f"- {c['strategy']}, trial seed {e['trial_seed']} ({e.get('status', 'error')}): {e['error']}")
        out.append("")
    warned = [c for c in report["strategies"] if c.get("warnings")]
    if warned:
        out += ["## Library warnings (recorded during trials)", ""]
        for c in warned:
            out += [f"- {c['strategy']}: {w}" for w in c["warnings"]]
        out.append("")
    if report["seeds"]["skipped"]:
        out += ["## Skipped seeds", ""]
        out += [f"- seed {s}: {why}" for s, why in report["seeds"]["skipped"]]
        out.append("")
    out += ["## Learning curves", "", "![learning curves](learning_curve.png)", ""]
    return "\n".join(out)


def _plot(report: dict[str, Any], curves: dict[str, tuple[np.ndarray, np.ndarray]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5), dpi=110)
    for strategy, (n_labeled, acc) in curves.items():
        mean = acc.mean(axis=0)
        ax.plot(n_labeled, mean, label=f"{strategy} (n={acc.shape[0]})", linewidth=1.4)
        if acc.shape[0] > 1:
            lo, hi = np.array([t_interval(acc[:, j], 0.95) for j in range(acc.shape[1])]).T
            ax.fill_between(n_labeled, lo, hi, alpha=0.2)
    p = report["protocol"]
    ax.set_xlabel("labeled-set size")
    ax.set_ylabel("test accuracy (mean, 95% band)")
    ax.set_title(f"{p['name']} on {report['dataset']['name']} (AUBC {p['aubc_variant']})")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def write_report(report: dict[str, Any], per_trial: list[dict[str, Any]],
                 curves: dict[str, tuple[np.ndarray, np.ndarray]], out_dir: Path) -> Path:
    """Write the four files into ``out_dir`` atomically (all or nothing)."""
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        (tmp / "report.json").write_text(json.dumps(report, indent=2, default=_json_default) + "\n")
        (tmp / "report.md").write_text(_markdown(report))
        with open(tmp / "per_trial.csv", "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=["strategy", "trial_seed", "aubc", "status", "query_hash"])
            writer.writeheader()
            writer.writerows(per_trial)
        _plot(report, curves, tmp / "learning_curve.png")
        old = None
        if out_dir.exists():
            old = out_dir.with_name(f".{out_dir.name}.old-{os.getpid()}")
            out_dir.rename(old)
        tmp.rename(out_dir)
        if old is not None:
            shutil.rmtree(old)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out_dir


def _json_default(value: Any) -> Any:
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot serialise {type(value).__name__}")
