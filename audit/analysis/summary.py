"""`audit summary`: a protocol's data set x strategy matrix of verdicts, read from the store.

Nothing is replayed. Each cell takes the trials `audit reproduce` would reuse for it: those
stored under the current fingerprint (this code, protocol spec and environment) for the
trial seeds the replay planner picks (the first N valid seeds of the data set, N being
``--trials`` or the protocol's count), and is compared with the same published number by
the same rule (:func:`audit.analysis.reproduce.compare_cell`). A cell without a successful
trial is "not run". The findings of `audit lint-references` on the paper's tables are put
beside the cells whose published number they cast doubt on.
"""
from __future__ import annotations

import math
import sqlite3
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

import numpy as np

import adapters
from audit.analysis.compare import (
    DISCREPANT_1,
    DISCREPANT_5,
    NOT_RUN,
    VERDICTS,
)
from audit.analysis.reference_lint import lint_references
from audit.analysis.references import Reference, load_references
from audit.analysis.reproduce import compare_cell, nan_to_none
from audit.engine.capabilities import canonical_order
from audit.engine.datasets import get_info, load_dataset, names
from audit.engine.destinations import check_destination
from audit.engine.metrics import get_variant
from audit.engine.splits import plan_seeds
from audit.engine.store import (
    DEFAULT_STORE,
    fingerprint_details,
    fingerprint_of,
    open_read_only,
)
from audit.errors import AuditError
from audit.protocols import Protocol, load_protocol
from audit.report.summary import write_summary

DISCREPANT = (DISCREPANT_5, DISCREPANT_1)
ALL = "all"
TOP = 10  # the most discrepant cells the terminal and the pages list


@dataclass
class SummaryRequest:
    """What `audit summary` was asked for, with the documented defaults."""

    protocol: str | Protocol
    datasets: Sequence[str] | str | None = None  # None: those with trials in the store; "all": every one
    strategies: Sequence[str] | None = None  # None: every strategy of the protocol
    trials: int | None = None  # None: the protocol's count for each data set's size
    store: str | Path = DEFAULT_STORE
    out: str | Path | None = None  # None: reports/<protocol>-summary
    data_dir: str | None = None
    force: bool = False  # replace an earlier summary in ``out`` even when it held more strategies


@dataclass
class SummaryOutcome:
    summary: dict[str, Any]
    out_dir: Path | None = None
    files: list[str] = field(default_factory=list)


def _unique(names: list[str], what: str) -> list[str]:
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise AuditError(f"{what} named twice: {', '.join(twice)}")
    return names


def _stored_rows(store: str | Path, protocol: str) -> list[tuple]:
    """(dataset, strategy, trial_seed, status, aubc, fingerprint) of every stored trial of ``protocol``."""
    db = open_read_only(store)
    try:
        return db.execute("SELECT dataset, strategy, trial_seed, status, aubc, fingerprint FROM trials"
                          " WHERE protocol=? ORDER BY dataset, strategy, trial_seed", (protocol,)).fetchall()
    except sqlite3.Error as exc:
        raise AuditError(f"cannot read the result store {store}: {exc}") from None
    finally:
        db.close()


@dataclass
class SummaryPlan:
    """The validated request: protocol, cells, the current fingerprint and the stored rows."""

    protocol: Protocol
    datasets: list[str]
    strategies: list[str]
    fingerprint: str
    details: dict[str, Any]
    rows: list[tuple]  # every stored trial of the protocol, any fingerprint
    out_dir: Path | None
    holds: dict[str, Any]


def plan_summary(request: SummaryRequest, write: bool = True) -> SummaryPlan:
    """Every input checked, the store read (never written) and, when ``write``, the output
    directory checked, all before any data set is loaded; bad input is one AuditError line."""
    if request.trials is not None and (not isinstance(request.trials, int) or isinstance(request.trials, bool)
                                       or request.trials < 1):
        raise AuditError(f"--trials must be a positive integer, not {request.trials!r}")
    protocol = request.protocol if isinstance(request.protocol, Protocol) else load_protocol(request.protocol)
    if isinstance(request.strategies, str) or (isinstance(request.datasets, str) and request.datasets != ALL):
        raise AuditError("strategies and datasets must be lists of names (datasets may also be 'all')")
    strategies = (_unique([protocol.strategy(s).id for s in request.strategies], "a strategy is")
                  if request.strategies else canonical_order(protocol.strategies))
    covered = names(protocol.tasks)  # what `audit run` plans, in registry order
    if request.datasets and request.datasets != ALL:
        datasets = _unique([get_info(d).name for d in request.datasets], "a data set is")
        for name in datasets:
            if name not in covered:
                raise AuditError(f"protocol '{protocol.name}' covers {'/'.join(protocol.tasks)} data sets; "
                                 f"'{name}' is {get_info(name).task}")
    rows = _stored_rows(request.store, protocol.name)
    if not rows:
        raise AuditError(f"results store {request.store} holds no trial of protocol '{protocol.name}'; "
                         f"run `audit run --protocol {protocol.name}` (or `audit reproduce`) first")
    details = fingerprint_details(protocol)
    fingerprint = fingerprint_of(details)
    if request.datasets == ALL:
        datasets = covered
    elif not request.datasets:  # the data sets with trials, from this code if any, else from any
        current = {r[0] for r in rows if r[5] == fingerprint} or {r[0] for r in rows}
        datasets = [d for d in covered if d in current]
        if not datasets:
            raise AuditError(f"results store {request.store} holds trials of '{protocol.name}' only on data sets "
                             f"it does not cover ({', '.join(sorted(current))})")
    holds = {"command": "summary", "protocol": protocol.name, "spec_hash": protocol.spec_hash,
             "datasets": datasets, "strategies": strategies}
    if request.trials is not None:
        holds["trials"] = request.trials
    out_dir = None
    if write:
        out_dir = Path(request.out) if request.out else Path("reports") / f"{protocol.name}-summary"
        check_destination(out_dir, holds, force=request.force, create_parents=request.out is None)
    return SummaryPlan(protocol, datasets, strategies, fingerprint, details, rows, out_dir, holds)


def _lint_marks(protocol: Protocol, cells: set[tuple[str, str]]) -> tuple[list[dict[str, Any]], dict]:
    """The paper's lint findings ([{number, name, finding, cells}], numbered in order when
    they touch a cell shown) and {(data set, strategy): [numbers]}. A finding touches a cell
    when a row it doubts is that cell's published number, on the protocol's metric and batch size."""
    try:
        findings = [f for f in lint_references(protocol.reference_paper) if f.triggered]
        by_source = {r.source: r for r in load_references(paper=protocol.reference_paper, metric=None,
                                                          check_range=False)}
    except (ValueError, OSError) as exc:  # a damaged shipped table: say so, the summary still stands
        print(f"audit: warning: the published tables could not be linted: {exc}", file=sys.stderr)
        return [], {}
    listed, marks = [], defaultdict(list)
    for finding in findings:
        touched = []
        for source in finding.suspects:
            ref = by_source.get(source)
            if ref is None or ref.metric != protocol.aubc_metric or \
                    ref.batch_size not in (None, protocol.batch_size):
                continue
            if (ref.dataset, ref.strategy) in cells and (ref.dataset, ref.strategy) not in touched:
                touched.append((ref.dataset, ref.strategy))
        number = len([f for f in listed if f["number"]]) + 1 if touched else None
        for cell in touched:
            marks[cell].append(number)
        listed.append({"number": number, "name": finding.name, "finding": finding.finding,
                       "cells": [list(c) for c in touched]})
    listed.sort(key=lambda f: (f["number"] is None, f["number"] or 0))
    return listed, dict(marks)


def _cell(protocol: Protocol, dataset: str, strategy: str, trials: list[tuple], lint: list[int],
          published: list[Reference]) -> dict[str, Any]:
    """One cell from its selected stored trials (trial_seed, status, aubc), in seed order;
    ``published``: the paper's rows for this data set and strategy (read once, not per cell)."""
    ok = [aubc for _, status, aubc in trials if status == "ok"]
    compared = compare_cell(protocol, dataset, strategy, ok, published, no_trials=NOT_RUN)
    s, ref = compared.summary, compared.reference
    difference = None if compared.published is None or not ok else s.mean - compared.published
    t = None
    if difference is not None and s.n > 1:
        se = float(np.std(ok, ddof=1)) / math.sqrt(s.n)
        t = math.copysign(math.inf, difference) if se == 0 and difference else (difference / se if se else 0.0)
    return {
        "dataset": dataset, "strategy": strategy, "n": s.n, "n_failed": len(trials) - len(ok),
        "trial_seeds": [seed for seed, status, _ in trials if status == "ok"],
        "mean": nan_to_none(s.mean), "sd": nan_to_none(s.sd), "ci95": [nan_to_none(v) for v in s.ci95],
        "ci99": [nan_to_none(v) for v in s.ci99], "published_mean": compared.published,
        "published_sd": None if ref is None else ref.sd_fraction,
        "difference": difference, "t": t, "verdict": compared.verdict, "low_power": compared.low_power,
        "welch_p": (compared.welch or {}).get("p"),
        "reference": None if ref is None else {"paper": ref.paper, "table": ref.table, "row": ref.row,
                                               "source": ref.source},
        "lint": lint,
    }


def summarise_plan(plan: SummaryPlan, request: SummaryRequest) -> dict[str, Any]:
    """The summary of a checked plan: cells, counts, findings and provenance (values as fractions)."""
    protocol = plan.protocol
    current: dict[tuple[str, str], list[tuple]] = defaultdict(list)
    for dataset, strategy, seed, status, aubc, fingerprint in plan.rows:
        if fingerprint == plan.fingerprint:
            current[dataset, strategy].append((seed, status, aubc))
    published = defaultdict(list)  # what pick_reference would read from reference_results/, read once
    for ref in load_references(paper=protocol.reference_paper, metric=None):
        published[ref.dataset, ref.strategy].append(ref)
    findings, marks = _lint_marks(protocol, {(d, s) for d in plan.datasets for s in plan.strategies})
    cells, seeds_of, skipped, files = [], {}, {}, {}
    for dataset in plan.datasets:
        data = load_dataset(dataset, request.data_dir)
        files[dataset] = {"n": data.info.n, "d": data.info.d, "sha256": data.info.sha256}
        seeds, skipped_seeds = plan_seeds(protocol, data.y, request.trials, data)  # a set with its own split: its draws
        seeds_of[dataset] = seeds
        if not seeds:
            skipped[dataset] = skipped_seeds[0][1] if skipped_seeds else "no seed tried"
        wanted = set(seeds)
        for strategy in plan.strategies:
            chosen = [t for t in current.get((dataset, strategy), []) if t[0] in wanted]
            cells.append(_cell(protocol, dataset, strategy, chosen, marks.get((dataset, strategy), []),
                               published.get((dataset, strategy), [])))
    other = Counter(r[5] for r in plan.rows if r[5] != plan.fingerprint)
    unavailable = {}
    for sid in plan.strategies:
        reason = adapters.unavailable_reason(protocol.strategy(sid).implementation)
        if reason:
            unavailable[sid] = reason
    return {
        "protocol": {"name": protocol.name, "title": protocol.title, "spec_hash": protocol.spec_hash,
                     "aubc_variant": protocol.aubc_variant,
                     "aubc_definition": get_variant(protocol.aubc_variant).source,
                     "aubc_metric": protocol.aubc_metric, "sd_ddof": protocol.sd_ddof, "scale": protocol.scale, "unit": protocol.aubc_unit,
                     "batch_size": protocol.batch_size, "reference_paper": protocol.reference_paper},
        "datasets": plan.datasets, "data": files, "strategies": plan.strategies, "trials": request.trials,
        "store": str(request.store), "fingerprint": plan.fingerprint, "environment": plan.details["versions"],
        "code": plan.details["code"],
        "seeds": {"planned": {d: len(s) for d, s in seeds_of.items()},
                  "used": sorted({seed for c in cells for seed in c["trial_seeds"]})},
        "other_fingerprints": dict(other), "unavailable": unavailable, "no_valid_seed": skipped,
        "cells": cells, "counts": counts(cells), "most_discrepant": most_discrepant(cells),
        "findings": findings,
        "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def counts(cells: list[dict[str, Any]]) -> dict[str, int]:
    """Cells per verdict (every verdict present, in VERDICTS order), and the consistent ones of low power."""
    found = Counter(c["verdict"] for c in cells)
    return {**{v: found.get(v, 0) for v in VERDICTS}, "low power": sum(bool(c["low_power"]) for c in cells),
            "cells": len(cells)}


def most_discrepant(cells: list[dict[str, Any]], top: int = TOP) -> list[dict[str, Any]]:
    """The discrepant cells farthest from their published mean in standard errors (|t|), then by |difference|."""
    ranked = sorted((c for c in cells if c["verdict"] in DISCREPANT),
                    key=lambda c: (-abs(c["t"]) if c["t"] is not None else 0.0, -abs(c["difference"])))
    return ranked[:top]


def run_summary(request: SummaryRequest) -> SummaryOutcome:
    """`audit summary`: check, read the store, compare, write the report directory."""
    plan = plan_summary(request)
    summary = summarise_plan(plan, request)
    files = write_summary(summary, plan.out_dir, plan.holds, create_parents=request.out is None)
    return SummaryOutcome(summary, plan.out_dir, files)


def summary_table(request: SummaryRequest) -> dict[str, Any]:
    """The summary without writing anything (the Python API's `audit.summary`)."""
    plan = plan_summary(request, write=False)
    return summarise_plan(plan, request)
