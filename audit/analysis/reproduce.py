"""`audit reproduce`: replay (audit/engine/replay.py), compare each cell with the paper, diagnose
the discrepant ones, write the report."""
from __future__ import annotations

import collections
import dataclasses
import math
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

import adapters
from audit.analysis.compare import (
    CellSummary,
    detectable_difference,
    low_power,
    summarise,
    verdict,
)
from audit.analysis.diagnose.at_chance import at_chance_entry, majority_share
from audit.analysis.diagnose.counterfactual import (
    MIN_DIAGNOSIS_TRIALS,
    diagnose_cell,
    is_discrepant,
    most_replays,
    not_diagnosed,
    stopping_rule,
)
from audit.analysis.diagnose.degenerate import degenerate_entry
from audit.analysis.diagnose.detectors import lint
from audit.analysis.diagnose.shared import shared_causes
from audit.analysis.references import (
    Reference,
    pick_reference,
    read_user_table,
)
from audit.analysis.settled import Rounds, report_entry, run_rounds, settle_cell
from audit.analysis.stats import welch
from audit.engine.datasets import REGISTRY, label_runs
from audit.engine.destinations import check_destination, read_manifest
from audit.engine.metrics import get_variant
from audit.engine.replay import (
    ReplayPlan,
    ReproduceRequest,
    execute_replay,
    format_duration,
    plan_replay,
)
from audit.engine.runner import TrialResult
from audit.engine.scratch import run_scratch
from audit.engine.store import ResultStore, fingerprint_details, fingerprint_of
from audit.errors import AuditError
from audit.protocols import Protocol
from audit.report.files import write_partial_report, write_report


@dataclass
class ReproduceOutcome:
    report: dict[str, Any]
    out_dir: Path
    files: list[str] = field(default_factory=list)  # written into out_dir
    ran: int = 0
    reused: int = 0
    unavailable: dict[str, str] = field(default_factory=dict)


def nan_to_none(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) else float(value)


@dataclass(frozen=True)
class Comparison:
    """One cell's stored AUBCs against its published reference: what `audit reproduce` and
    `audit summary` both report, computed in one place."""

    summary: CellSummary
    reference: Reference | None
    published: float | None  # the reference's mean on the 0-1 scale
    verdict: str
    low_power: bool
    welch: dict[str, float] | None


def compare_cell(protocol: Protocol, dataset: str, strategy: str, aubcs: list[float],
                 table: list[Reference] | None = None, no_trials: str = "no successful trials") -> Comparison:
    """The successful trials' AUBCs of one cell against the published number (the t-interval
    verdict of audit.analysis.compare, and a Welch test where the reference has SD and n);
    ``no_trials`` is the verdict of a cell without any."""
    summary = summarise(aubcs, protocol.sd_ddof)
    ref = pick_reference(protocol, dataset, strategy, table)
    published = ref.mean_fraction if ref else None
    verdict_text = verdict(summary, published) if aubcs else no_trials
    welch_test = None
    if ref and ref.sd is not None and ref.n and ref.n > 1 and summary.n > 1:
        w = welch(summary.mean, float(np.std(aubcs, ddof=1)), summary.n,
                  published, ref.sd_fraction, ref.n)
        welch_test = None if w is None else {"t": w.t, "df": w.df, "p": w.p}
    return Comparison(summary, ref, published, verdict_text, low_power(summary, verdict_text), welch_test)


def _cell(protocol: Protocol, dataset: str, strategy: str, results: list[TrialResult],
          table: list[Reference] | None = None) -> dict[str, Any]:
    spec = protocol.strategy(strategy)
    cls = adapters.strategy_class(spec.implementation)
    compared = compare_cell(protocol, dataset, strategy, [r.aubc for r in results if r.status == "ok"], table)
    summary, ref = compared.summary, compared.reference
    query_model = protocol.query_model_for(spec)
    cell: dict[str, Any] = {
        "strategy": strategy, "status": "ok", "implementation": spec.implementation,
        "library": cls.library_version(), "params": spec.params,
        "query_model": None if query_model is None else str(query_model),
        "query_model_is_task_model": spec.query_model == "task"
        or (query_model is not None and query_model.key == protocol.task_model.key),
        "uses_test_labels": cls.uses_test_labels,  # an oracle: a reference bound, not a query strategy
        "note": cls.capability_note(),  # how it ran here, when a reader must know (e.g. LAL's training data)
        "n_trials": summary.n, "n_errors": sum(r.status == "error" for r in results),
        "n_tle": sum(r.status == "tle" for r in results),
        "errors": [{"trial_seed": r.trial_seed, "status": r.status, "error": r.error}
                   for r in results if r.status != "ok"],
        "mean": nan_to_none(summary.mean), "sd": nan_to_none(summary.sd),
        "ci95": [nan_to_none(v) for v in summary.ci95], "ci99": [nan_to_none(v) for v in summary.ci99],
        "published_mean": compared.published,
        "verdict": compared.verdict, "low_power": compared.low_power,
        "detectable_difference": nan_to_none(detectable_difference(summary)),
        "reference": None, "welch": compared.welch,
        "warnings": sorted({w for r in results for w in r.warnings}),
        # {fit path: trials}: the bit-identical fast paths or scikit-learn's own code (audit.fast.policy)
        "fast_paths": dict(sorted(collections.Counter(r.fast_path or "not recorded" for r in results).items())),
    }
    if ref:
        cell["reference"] = {"paper": ref.paper, "table": ref.table, "row": ref.row, "source": ref.source,
                             "aubc_variant": ref.aubc_variant, "sd": ref.sd, "n": ref.n, "note": ref.note}
    return cell


def _curves(results: list[TrialResult]) -> tuple[np.ndarray, np.ndarray] | None:
    ok = [r for r in results if r.status == "ok" and r.rounds]
    if not ok:
        return None
    length = min(len(r.rounds) for r in ok)
    n_labeled = np.array([r.n_labeled for r in ok[0].rounds[:length]])
    return n_labeled, np.array([[r.accuracy for r in t.rounds[:length]] for t in ok])




def report_destination(request: ReproduceRequest, plan: ReplayPlan) -> tuple[Path, dict[str, Any]]:
    """The report directory (``--out`` or reports/<protocol>-<dataset>) and what its manifest
    will say it holds, checked before any trial: al-audit replaces only a report it wrote,
    and not silently with one of fewer strategies or trials."""
    suffix = f"-b{request.batch_size}" if request.batch_size else ""
    out_dir = Path(request.out) if request.out else Path("reports") / f"{plan.protocol.name}-{plan.dataset}{suffix}"
    holds = {"command": "reproduce", "protocol": plan.protocol.name, "spec_hash": plan.protocol.spec_hash,
             "dataset": plan.dataset, "strategies": plan.strategies, "trials": len(plan.seeds)}
    check_destination(out_dir, holds, force=request.force, create_parents=request.out is None)
    return out_dir, holds


def _read_cells(plan: ReplayPlan, sids: list[str], store: ResultStore, fingerprint: str,
                seeds: dict[str, list[int]], table: list[Reference] | None, rounds: Rounds | None = None):
    """The cells of ``sids`` from the store: (cells, per-trial rows, curves, {sid: {seed: AUBC}})."""
    protocol, name = plan.protocol, plan.dataset
    share = majority_share(plan.data.y)
    cells, per_trial, curves, audited = [], [], {}, {}
    for sid in sids:
        results = store.trials(protocol.name, name, sid, fingerprint, seeds[sid])
        audited[sid] = {r.trial_seed: float(r.aubc) for r in results if r.status == "ok"}
        cells.append(_cell(protocol, name, sid, results, table))
        cells[-1]["at_chance"] = at_chance_entry(results, share, protocol.sd_ddof)
        cells[-1]["degenerate"] = degenerate_entry(results, protocol.sd_ddof)
        if rounds:
            settle_cell(cells[-1], [r.aubc for r in results if r.status == "ok"], rounds, len(plan.seeds))
        per_trial += [{"strategy": sid, "trial_seed": r.trial_seed, "aubc": r.aubc, "status": r.status,
                       "query_hash": r.query_hash} for r in results]
        curve = _curves(results)
        if curve is not None:
            curves[sid] = curve
    return cells, per_trial, curves, audited


def _unavailable_cells(plan: ReplayPlan, table: list[Reference] | None) -> list[dict[str, Any]]:
    cells = []
    for sid, reason in plan.unavailable.items():
        ref = pick_reference(plan.protocol, plan.dataset, sid, table)
        implementation = plan.protocol.strategy(sid).implementation
        cells.append({"strategy": sid, "status": "unavailable", "reason": reason,
                      "implementation": implementation, "library": "-",
                      "uses_test_labels": adapters.uses_test_labels(implementation),
                      "published_mean": ref.mean_fraction if ref else None, "verdict": "unavailable"})
    return cells


def _assemble(plan: ReplayPlan, cells: list[dict[str, Any]], shared: list[dict[str, Any]], details: dict[str, Any],
              fingerprint: str) -> dict[str, Any]:
    """report.json's content around the cells."""
    protocol, name, data, seeds = plan.protocol, plan.dataset, plan.data, plan.seeds
    return {
        "protocol": {"name": protocol.name, "title": protocol.title, "spec_hash": protocol.spec_hash,
                     "aubc_variant": protocol.aubc_variant,
                     "aubc_definition": get_variant(protocol.aubc_variant).source,
                     "aubc_metric": protocol.aubc_metric, "sd_ddof": protocol.sd_ddof, "scale": protocol.scale, "unit": protocol.aubc_unit,
                     "task_model": str(protocol.task_model), "batch_size": protocol.batch_size,
                     "scaling": protocol.scaling, "pool_order": protocol.split.pool_order,
                     "reference_paper": protocol.reference_paper, "reference_tables": list(protocol.reference_tables)},
        "dataset": {"name": name, "n": data.info.n, "d": data.info.d, "sha256": data.info.sha256,
                    "label_runs": label_runs(data.y), "path": str(data.path)},
        "environment": details["versions"], "code": details["code"], "fingerprint": fingerprint,
        "seeds": {"trial_seeds": seeds, "skipped": [list(s) for s in plan.skipped], "policy": protocol.seeds},
        "strategies": cells,
        "shared_causes": shared,
        "findings": [dataclasses.asdict(f) for f in lint(protocol, data)],
        "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


PARTIAL_INTERVAL = 30.0  # seconds: at most one partial report that often (the last strategy's always)


class PartialReports:
    """The report directory rewritten while `audit reproduce` runs, after a strategy's last
    trial is stored (``--until-settled``: after each round, a cell being finished once it
    settled or reached its maximum): the finished cells, the others "running" (some trials
    stored) or "pending", marked partial in report.md and report.json ("partial: k of m
    strategies finished"). Only report.json, report.md and per_trial.csv (no figures: they
    cost seconds), at most once every PARTIAL_INTERVAL seconds, always after the last
    strategy (the diagnosis may take long); the final report replaces it through the same writer.

    Written only where the run's final report may go and nothing finished would be lost:
    a new or empty directory, or one holding a partial report (an earlier interrupted
    run's, or this run's own). A finished report there is replaced at the end only, as
    before. A write that fails (the directory changed under the run) stops the partial
    reports with one line; the final write then refuses or succeeds as it always did."""

    def __init__(self, plan: ReplayPlan, request: ReproduceRequest, store: ResultStore, out_dir: Path,
                 holds: dict[str, Any], table: list[Reference] | None, log, clock=time.monotonic):
        self.plan, self.request, self.store, self.out_dir, self.holds, self.table = \
            plan, request, store, out_dir, holds, table
        self.log, self.clock = log, clock
        self.finished: list[str] = []
        self.last: float | None = None
        self.written = 0
        manifest = read_manifest(out_dir) if out_dir.is_dir() else None
        self.enabled = manifest is None or bool(manifest.get("partial"))
        self.details = fingerprint_details(plan.protocol)
        self.fingerprint = fingerprint_of(self.details)

    def done(self, sid: str) -> None:
        """``sid``'s last trial of this run is stored."""
        if sid in self.finished or sid not in self.plan.strategies:
            return
        self.finished.append(sid)
        self._maybe_write()

    def round_done(self, rounds: Rounds) -> None:
        """An ``--until-settled`` round ended: the cells no longer running are finished, with
        the trials they reached and their settle entries."""
        self.finished += [sid for sid in self.plan.strategies if sid not in rounds.active and sid not in self.finished]
        self._maybe_write(rounds)

    def _maybe_write(self, rounds: Rounds | None = None) -> None:
        if not self.enabled:
            return
        last = len(self.finished) == len(self.plan.strategies)
        if not last and self.last is not None and self.clock() - self.last < PARTIAL_INTERVAL:
            return
        try:
            self.write(rounds)
        except AuditError as exc:
            self.enabled = False
            self.log(f"partial report not written, none will be until the end: {exc}")

    def write(self, rounds: Rounds | None = None) -> list[str]:
        plan, finished = self.plan, [s for s in self.plan.strategies if s in self.finished]
        seeds = rounds.seeds if rounds else {sid: plan.seeds for sid in plan.strategies}
        cells, per_trial, _, _ = _read_cells(plan, finished, self.store, self.fingerprint, seeds, self.table, rounds)
        for sid in plan.strategies:
            if sid in finished:
                continue
            stored = len(self.store.finished_seeds(plan.protocol.name, plan.dataset, sid, self.fingerprint)
                         & set(plan.seeds))
            ref = pick_reference(plan.protocol, plan.dataset, sid, self.table)
            implementation = plan.protocol.strategy(sid).implementation
            status = "running" if stored else "pending"
            cells.append({"strategy": sid, "status": status, "reason": f"{stored} of {len(plan.seeds)} trials stored",
                          "implementation": implementation, "library": "-",
                          "uses_test_labels": adapters.uses_test_labels(implementation),
                          "published_mean": ref.mean_fraction if ref else None, "verdict": status})
        order = {sid: i for i, sid in enumerate(plan.strategies)}
        cells.sort(key=lambda c: order[c["strategy"]])
        report = _assemble(plan, cells + _unavailable_cells(plan, self.table), [], self.details, self.fingerprint)
        k, m = len(finished), len(plan.strategies)
        report["partial"] = {"finished": k, "strategies": m, "line": f"partial: {k} of {m} strategies finished"
                             + ("; diagnosis running" if k == m else "")}
        holds = {**self.holds, "strategies": finished, "partial": report["partial"]["line"]}
        files = write_partial_report(report, per_trial, self.out_dir, holds,
                                     create_parents=self.request.out is None)
        self.last = self.clock()
        self.written += 1
        return files


def _diagnosis_bound(plan: ReplayPlan, request: ReproduceRequest, store: ResultStore, fingerprint: str,
                     discrepant: list[str]) -> str:
    """The diagnosis's worst case before it starts: every replay a cell can need, each to the
    trial count, at the seconds per trial this run's own trials of that strategy took."""
    replays, seconds = {}, 0.0
    for sid in discrepant:
        replays[sid] = most_replays(plan.protocol, plan.dataset, sid, request)
        took = [r.seconds for r in store.trials(plan.protocol.name, plan.dataset, sid, fingerprint, plan.seeds)]
        seconds += replays[sid] * len(plan.seeds) * (sum(took) / len(took) if took else 0.0)
    return (f"diagnosis: at most {sum(replays.values())} replays "
            f"({', '.join(f'{sid} {n}' for sid, n in replays.items())}) of up to {len(plan.seeds)} trials each: "
            f"up to about {format_duration(seconds / request.jobs)} on --jobs {request.jobs} at this run's seconds "
            "per trial (fewer when a single flip explains a cell or a replay stops early; --no-diagnose skips it)")


def reproduce(request: ReproduceRequest, log=lambda line: print(line, file=sys.stderr)) -> ReproduceOutcome:
    plan = plan_replay(request, log)
    table = None if request.references is None else read_user_table(  # checked whole before any trial
        request.references, REGISTRY, plan.protocol.strategies)
    out_dir, holds = report_destination(request, plan)
    store = ResultStore(request.store)
    try:
        with run_scratch():  # shared by the trials and the diagnosis's replays, removed at the end
            return _reproduce(plan, request, store, table, out_dir, holds, log)
    finally:
        store.close()


def _reproduce(plan: ReplayPlan, request: ReproduceRequest, store: ResultStore, table: list[Reference] | None,
               out_dir: Path, holds: dict[str, Any], log) -> ReproduceOutcome:
    """The trials, the diagnosis and the report of :func:`reproduce` (its checks done)."""
    protocol, name, seeds = plan.protocol, plan.dataset, plan.seeds
    rounds = None
    partial = PartialReports(plan, request, store, out_dir, holds, table, log)
    if request.until_settled:
        published = {}
        for sid in plan.strategies:
            ref = pick_reference(protocol, name, sid, table)
            published[sid] = ref.mean_fraction if ref else None
        rounds = run_rounds(plan, request, store, published, log, on_round=partial.round_done)
        fingerprint, details, ran, reused = rounds.fingerprint, rounds.details, rounds.ran, rounds.reused
    else:
        fingerprint, details, ran, reused = execute_replay(plan, request, store, log, on_done=partial.done)
    cells, per_trial, curves, audited = _read_cells(
        plan, plan.strategies, store, fingerprint,
        rounds.seeds if rounds else {sid: seeds for sid in plan.strategies}, table, rounds)
    discrepant = [c["strategy"] for c in cells if is_discrepant(c) and c["n_trials"] >= MIN_DIAGNOSIS_TRIALS]
    if discrepant and protocol.released and not request.no_diagnose:
        log(f"diagnosis: {len(discrepant)} discrepant cell{'s' * (len(discrepant) > 1)} ({', '.join(discrepant)}), "
            "one after another: each "
            f"replayed under every single flip toward {protocol.released} that changes it; if none explains it, "
            f"under their pairs; if none of those does, under {protocol.released} itself. {stopping_rule(len(seeds))}")
        log(_diagnosis_bound(plan, request, store, fingerprint, discrepant))
    for cell in filter(is_discrepant, cells):  # counterfactual replays, or why there are none
        if request.no_diagnose:
            cell["diagnosis"] = not_diagnosed(protocol, "diagnosis not run (--no-diagnose)", "not run")
        elif protocol.released:
            cell["diagnosis"] = diagnose_cell(protocol, name, cell, request, store, log)
    # discrepant cells off in one direction, tested together (paired by trial seed)
    shared = shared_causes(cells, audited, {c["strategy"]: adapters.strategy_class(c["implementation"]).library
                                            for c in cells})
    for entry in shared:
        log(entry["line"])
    for cell in cells:  # the per-seed values served the pooled test; the report keeps the summaries
        for row in (cell.get("diagnosis") or {}).get("hypotheses", []):
            row.pop("per_seed", None)
    report = _assemble(plan, cells + _unavailable_cells(plan, table), shared, details, fingerprint)
    if rounds:
        report["settled"] = report_entry(rounds, len(seeds))
    files = write_report(report, per_trial, curves, out_dir, holds, create_parents=request.out is None)
    return ReproduceOutcome(report, out_dir, files, ran, reused, plan.unavailable)
