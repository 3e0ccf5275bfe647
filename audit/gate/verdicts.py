"""`audit baseline create` and `audit gate`: pin a small audit, then let CI say whether a
library upgrade changed the active-learning results, and by how much.

A *suite* (``audit/suites/*.toml``, or a user's TOML/YAML file) names a protocol, data
sets, strategies (extra strategy bindings allowed) and trials. A *baseline* is a JSON
file meant to be committed: the suite definition, the full protocol spec it ran under,
the environment fingerprint and, per (data set, strategy, trial seed), the status, the
AUBC and the hash of the query sequence. ``gate`` rebuilds the protocol from the
baseline alone, replays every cell in a fresh temporary store (so every number is
recomputed in the current environment) and compares trial by trial:

- same status, query sequence and AUBC in every trial: **identical**;
- otherwise, on the paired AUBC differences d (current - baseline): a TOST (two one-sided
  paired t-tests against -margin and +margin) and a two-sided paired t-test against 0.
  Both TOST tests reject at alpha: **equivalent**; the t-test rejects and |mean d| is
  beyond the margin: **drift**; neither: **inconclusive**, with the number of trials
  that would decide it;
- a trial whose status changed (ok -> error, say), a strategy that cannot run, or a data
  set that cannot be loaded: **error**.

Exit codes: 0 (every cell identical or equivalent; inconclusive too unless strict),
1 (drift), 2 (error, or inconclusive under --strict).
"""
from __future__ import annotations

import json
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

from audit.analysis.stats import paired_tests
from audit.engine.destinations import check_report_dir, write_directory
from audit.errors import AuditError
from audit.gate.baseline import (
    CellRun,
    Change,
    diff_data,
    environment,
    load_baseline,
    protocol_changes,
    protocol_from_data,
    relevant_changes,
    replay_cells,
    show_value,
)
from audit.gate.junit import format_summary, junit_xml
from audit.gate.suite import with_strategies
from audit.protocols import load_protocol

EXIT_OK, EXIT_DRIFT, EXIT_ERROR = 0, 1, 2

def compare_cell(base: list[dict[str, Any]], current: CellRun, margin: float, alpha: float) -> dict[str, Any]:
    """Verdict of one cell, trials paired by seed."""
    cell: dict[str, Any] = {"dataset": current.dataset, "strategy": current.strategy,
                            "implementation": current.implementation, "library": current.library,
                            "n_trials": len(base), "seconds": round(sum(t["seconds"] for t in current.trials), 2)}
    if current.error:
        return {**cell, "verdict": "error", "message": f"cannot run here: {current.error}"}
    now = {t["seed"]: t for t in current.trials}
    changed = []
    for b in base:
        c = now.get(b["seed"])
        if c is None or c["status"] != b["status"]:
            changed.append(f"seed {b['seed']}: {b['status']} -> {c['status'] if c else 'not run'}"
                           + (f" ({c['error']})" if c and c["error"] else ""))
    if changed:
        return {**cell, "verdict": "error", "message": "trial status changed: " + "; ".join(changed)}
    pairs = [(b, now[b["seed"]]) for b in base if b["status"] == "ok"]
    failing = len(base) - len(pairs)
    alike = f"; {failing} trial(s) failed here and in the baseline alike" if failing else ""
    if not pairs:
        first = next((t["error"] for t in current.trials if t["error"]), "")
        return {**cell, "verdict": "error", "message": f"no successful trial, here or in the baseline: {first}"}
    same_queries = sum(b["query_hash"] == c["query_hash"] for b, c in pairs)
    cell.update({"identical_queries": same_queries, "paired_trials": len(pairs), "failing_on_both": failing})
    if same_queries == len(pairs) and all(abs(b["aubc"] - c["aubc"]) <= 1e-12 for b, c in pairs):
        return {**cell, "verdict": "identical", "message": f"same queries and AUBC in all {len(pairs)} trials{alike}"}
    tests = paired_tests([c["aubc"] - b["aubc"] for b, c in pairs], margin, alpha)
    cell.update({"verdict": tests.verdict, "mean_difference": tests.mean, "sd_difference": tests.sd,
                 "dz": tests.dz, "ci": list(tests.ci), "p_difference": tests.p_difference,
                 "p_tost": tests.p_tost, "trials_needed": tests.trials_needed})
    effect = f"mean AUBC difference {tests.mean:+.4f}"
    if tests.n > 1:
        effect += (f" ({100 * (1 - 2 * alpha):g}% CI [{tests.ci[0]:+.4f}, {tests.ci[1]:+.4f}], SD {tests.sd:.4f}"
                   + (f", d_z {tests.dz:+.2f}" if tests.dz is not None else "") + ")")
    queries = f"queries identical in {same_queries}/{len(pairs)} trials{alike}"
    if tests.verdict == "equivalent":
        message = f"within ±{margin:g}: {effect}, TOST p={tests.p_tost:.3g}; {queries}"
    elif tests.verdict == "drift":
        message = f"{effect}, paired t p={tests.p_difference:.3g}, beyond ±{margin:g}; {queries}"
    elif tests.trials_needed:
        message = (f"{effect}, TOST p={tests.p_tost:.3g}, paired t p={tests.p_difference:.3g}; about "
                   f"{tests.trials_needed} trials would decide it ({tests.trials_needed - tests.n} more); {queries}")
    else:
        message = f"{effect}; more trials cannot decide it (too few trials or mean on the margin); {queries}"
    return {**cell, "message": message}


def exit_code(verdicts: Iterable[str], strict: bool) -> int:
    verdicts = set(verdicts)
    if "error" in verdicts:
        return EXIT_ERROR
    if "drift" in verdicts:
        return EXIT_DRIFT
    if strict and "inconclusive" in verdicts:
        return EXIT_ERROR
    return EXIT_OK


def overall(code: int, n_errors: int) -> str:
    """The gate's one-word result for its exit code."""
    if code == EXIT_DRIFT:
        return "DRIFT"
    if code == EXIT_ERROR:
        return "ERROR" if n_errors else "INCONCLUSIVE (strict)"
    return "PASS"


def gate(baseline_path: str | Path, *, margin: float = 0.005, alpha: float = 0.05, strict: bool = False,
         protocol: str | Path | None = None, jobs: int = 1, data_dir: str | None = None,
         out: str | Path | None = None, progress: bool = True,
         log=lambda line: print(line, file=sys.stderr)) -> dict[str, Any]:
    """Replay a baseline's cells here, compare, and write summary.md, junit.xml and gate.json to
    ``out`` (default reports/gate-<suite>)."""
    if not 0 < margin < 1:  # NaN fails too
        raise AuditError(f"--margin must be between 0 and 1 (an AUBC difference), not {margin}")
    if not 0 < alpha < 0.5:
        raise AuditError(f"--alpha must be in (0, 0.5), not {alpha}")
    baseline = load_baseline(baseline_path)
    suite = baseline["suite"]
    create_parents = out is None  # the default under reports/; a given --out needs its parent
    out = Path(out) if out else Path("reports") / f"gate-{suite['name']}"
    check_report_dir(out, create_parents=create_parents)  # before any trial: al-audit replaces only its own
    recorded = protocol_from_data(baseline["protocol"]["data"], baseline["protocol"]["spec_hash"])
    current = recorded if protocol is None else with_strategies(load_protocol(protocol), suite["strategies"],
                                                                suite["bindings"])
    # Equal spec hashes: no replay knob changed (to_data may carry non-knobs such as a file name).
    spec_changes = ([] if current.spec_hash == recorded.spec_hash
                    else protocol_changes(recorded.to_data(), current.to_data()))
    env_now = environment()
    env_changes = diff_data(baseline["environment"], env_now)
    log(f"gate: suite {suite['name']} from {baseline_path}; protocol {current.name} (spec {current.spec_hash}"
        + (f", baseline spec {recorded.spec_hash}" if spec_changes else "") + ")")
    start = time.perf_counter()
    seeds = {ds: info["trial_seeds"] for ds, info in baseline["datasets"].items()}
    runs, data_info = replay_cells(current, list(baseline["datasets"]), suite["strategies"], seeds, None,
                                   jobs=jobs, data_dir=data_dir, progress=progress, strict=False, log=log)
    spec_changes += [Change(f"datasets.{ds}.sha256", info["sha256"], data_info[ds]["sha256"])
                     for ds, info in baseline["datasets"].items()
                     if ds in data_info and data_info[ds]["sha256"] != info["sha256"]]
    by_cell = {(c["dataset"], c["strategy"]): c["trials"] for c in baseline["cells"]}
    cells = []
    for run in runs:
        cell = compare_cell(by_cell.get((run.dataset, run.strategy), []), run, margin, alpha)
        cell["changed_settings"] = [str(c) for c in relevant_changes(spec_changes, run.dataset, run.strategy)]
        cells.append(cell)
    counts = {v: sum(c["verdict"] == v for c in cells)
              for v in ("identical", "equivalent", "drift", "inconclusive", "error")}
    code = exit_code((c["verdict"] for c in cells), strict)
    report = {
        "baseline": str(baseline_path), "baseline_created_at": baseline.get("created_at"),
        "suite": suite["name"], "margin": margin, "alpha": alpha, "strict": strict,
        "protocol": {"name": current.name, "spec_hash": current.spec_hash, "baseline_spec_hash": recorded.spec_hash,
                     "aubc_variant": current.aubc_variant, "aubc_metric": current.aubc_metric,
                     "source": str(protocol) if protocol else "the baseline's recorded protocol"},
        "environment": {"baseline": baseline["environment"], "current": env_now,
                        "changes": [{"key": c.key, "from": show_value(c.before), "to": show_value(c.after)} for c in env_changes]},
        "protocol_changes": [{"key": c.key, "from": show_value(c.before), "to": show_value(c.after)} for c in spec_changes],
        "cells": cells, "counts": counts, "exit_code": code, "overall": overall(code, counts["error"]),
        "seconds": round(time.perf_counter() - start, 1),
        "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    write_directory(out, {"gate.json": json.dumps(report, indent=1, default=str) + "\n",
                          "summary.md": format_summary(report), "junit.xml": junit_xml(report)},
                    {"command": "gate", "suite": suite["name"], "baseline": str(baseline_path)},
                    create_parents=create_parents)
    report["out_dir"] = str(out)
    return report
