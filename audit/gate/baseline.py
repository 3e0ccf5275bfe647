"""Baselines: replay a suite's cells in a fresh temporary store, record every trial (status,
AUBC, query hash) with the protocol spec and the environment, and read a baseline back,
rebuilding its protocol and listing what changed since."""
from __future__ import annotations

import dataclasses
import json
import os
import secrets
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

import adapters
from audit.engine.destinations import check_name, check_output_file
from audit.engine.environment import environment_versions
from audit.engine.models import ModelSpec
from audit.engine.replay import (
    ReproduceRequest,
    choose_strategies,
    execute_replay,
    plan_replay,
)
from audit.engine.splits import seed_split
from audit.engine.store import ResultStore, code_hash
from audit.errors import AuditError
from audit.gate.suite import Suite, with_strategies
from audit.protocols import Protocol, SplitSpec, StrategySpec, TrialSpec
from audit.version import __version__

BASELINE_FORMAT = "al-audit-baseline/1"
DEFAULT_BASELINE_DIR = "al-audit-baselines"  # `baseline create` without --out: below the current directory

def environment() -> dict[str, str]:
    """What a baseline records: the store's environment fingerprint and this tool's version and code."""
    env = environment_versions()
    env["al-audit"] = f"{__version__} (code {code_hash()})"
    return env


_ABSENT = object()  # a key one side of a diff does not have


@dataclass(frozen=True)
class Change:
    key: str
    before: Any
    after: Any

    def __str__(self) -> str:
        return f"{self.key}: {show_value(self.before)} -> {show_value(self.after)}"


def show_value(value: Any) -> str:
    if value is _ABSENT:
        return "(absent)"
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def _flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted leaf keys; an empty table has no leaves, so {} -> {k = 2} shows as "k: (absent) -> 2"."""
    if isinstance(data, dict):
        flat: dict[str, Any] = {}
        for key, value in data.items():
            flat.update(_flatten(value, f"{prefix}{key}."))
        return flat
    return {prefix[:-1]: data}


def diff_data(before: dict[str, Any], after: dict[str, Any], ignore: Iterable[str] = ()) -> list[Change]:
    """Changed leaves of two nested dicts, as dotted keys (lists compare whole)."""
    a, b = _flatten(before), _flatten(after)
    skip = tuple(ignore)
    changes = []
    for key in sorted(set(a) | set(b)):
        if key.split(".")[0] in skip:
            continue
        old, new = a.get(key, _ABSENT), b.get(key, _ABSENT)
        if json.dumps(old, sort_keys=True, default=str) != json.dumps(new, sort_keys=True, default=str):
            changes.append(Change(key, old, new))
    return changes


def protocol_changes(before: dict[str, Any], after: dict[str, Any]) -> list[Change]:
    """What changed in the protocol spec; title and file name are not part of it."""
    return diff_data(before, after, ignore=("title", "path"))


def relevant_changes(changes: list[Change], dataset: str, strategy: str) -> list[Change]:
    """Settings that can move one cell: global ones, its strategy's binding, its data file."""
    own = (f"strategies.{strategy}.", f"datasets.{dataset}.")
    return [c for c in changes if not c.key.startswith(("strategies.", "datasets.")) or c.key.startswith(own)]


def protocol_from_data(data: dict[str, Any], spec_hash: str) -> Protocol:
    """Rebuild the protocol a baseline recorded (``Protocol.to_data()``); the spec hash
    must come out equal, which proves the round trip (and an unedited baseline)."""

    def model(value: Any) -> Any:
        return value if value in (None, "task") else ModelSpec(value["name"], dict(value["params"]))

    try:
        protocol = Protocol(**{
            **data,
            "tasks": tuple(data["tasks"]),
            "split": SplitSpec(**data["split"]),
            "trials": TrialSpec(**data["trials"]),
            "task_model": model(data["task_model"]),
            "reference_tables": tuple(data["reference_tables"]),
            "label_reveal_applies_to": tuple(data.get("label_reveal_applies_to", ())),
            "strategies": {sid: StrategySpec(s["id"], s["implementation"], dict(s["params"]), model(s["query_model"]))
                           for sid, s in data["strategies"].items()},
            "path": Path(data["path"]),
        })
    except (KeyError, TypeError, AuditError) as exc:
        raise AuditError(f"the baseline's protocol cannot be rebuilt by this al-audit ({type(exc).__name__}: "
                         f"{exc}); recreate the baseline with `audit baseline create`") from None
    if protocol.spec_hash != spec_hash:
        raise AuditError(f"the baseline's protocol does not hash to its recorded spec {spec_hash} "
                         f"(got {protocol.spec_hash}): the file was edited or written by another al-audit; "
                         "recreate it with `audit baseline create`")
    return protocol


# --- replaying cells --------------------------------------------------------------------

def _trial_record(result) -> dict[str, Any]:
    return {"seed": result.trial_seed, "status": result.status, "aubc": result.aubc,
            "query_hash": result.query_hash, "error": result.error, "seconds": round(result.seconds, 3)}


@dataclass
class CellRun:
    """One (data set, strategy) replayed here: its trials, or why it could not run."""

    dataset: str
    strategy: str
    implementation: str
    library: str
    trials: list[dict[str, Any]]
    error: str | None = None


def _library(spec: StrategySpec) -> str:
    try:
        return adapters.strategy_class(spec.implementation).library_version()
    except AuditError:
        return spec.implementation.split(".")[0]


def replay_cells(protocol: Protocol, datasets: Iterable[str], strategies: Iterable[str],
                 seeds: dict[str, list[int]] | None, trials: int | None, *, jobs: int = 1,
                 data_dir: str | None = None, progress: bool = True, strict: bool = True,
                 log=lambda line: print(line, file=sys.stderr)) -> tuple[list[CellRun], dict[str, dict[str, Any]]]:
    """Replay every cell in a fresh temporary store; returns (cells, {data set: sha256, n, trial seeds}).

    ``seeds`` fixes the trial seeds per data set (the gate); otherwise the protocol's first
    ``trials`` valid seeds are used. ``strict`` (baseline creation): any problem raises.
    Otherwise (the gate) a strategy that cannot run or a data set that cannot be planned
    becomes an error cell, and the rest still runs.
    """
    if jobs < 1:
        raise AuditError(f"--jobs must be a positive number, not {jobs}")
    strategies = list(strategies)
    runnable, unavailable = choose_strategies(with_strategies(protocol, strategies, {}), None)
    missing = {s: f"protocol {protocol.name} has no strategy '{s}'" for s in strategies if s not in protocol.strategies}
    unavailable.update(missing)
    if strict and unavailable:
        sid, reason = next(iter(unavailable.items()))
        raise AuditError(f"strategy '{sid}' cannot run here: {reason}")
    runnable = [s for s in strategies if s in runnable]

    def spec_of(sid):
        return protocol.strategies.get(sid, StrategySpec(sid, "-"))

    cells: list[CellRun] = []
    data_info: dict[str, dict[str, Any]] = {}
    plans = []
    for ds in datasets:
        wanted = None if seeds is None else seeds[ds]
        request = ReproduceRequest(protocol, ds, runnable, trials=len(wanted) if wanted else trials,
                                   jobs=jobs, data_dir=data_dir, progress=progress)
        try:
            if not runnable:
                raise AuditError("no strategy of the suite can run here")
            plan = plan_replay(request, log)
            if wanted is not None:
                invalid = [(s, why) for s in wanted if isinstance(why := seed_split(protocol, plan.data, s)[2], str)]
                if strict and invalid:
                    raise AuditError(f"trial seed {invalid[0][0]} is not valid for '{ds}': {invalid[0][1]}")
                plan = dataclasses.replace(plan, seeds=list(wanted))  # invalid ones become error trials
        except AuditError as exc:
            if strict:
                raise
            cells += [CellRun(ds, sid, spec_of(sid).implementation, _library(spec_of(sid)), [], str(exc))
                      for sid in strategies]
            continue
        plans.append((plan, request))
        data_info[plan.dataset] = {"n": plan.data.info.n, "sha256": plan.data.info.sha256,
                                   "trial_seeds": list(plan.seeds)}
    with tempfile.TemporaryDirectory(prefix="al-audit-gate-") as tmp:
        store = ResultStore(Path(tmp) / "store.sqlite")
        try:
            for plan, request in plans:
                fingerprint, _, _, _ = execute_replay(plan, request, store, log)
                for sid in strategies:
                    spec = spec_of(sid)
                    if sid in unavailable:
                        cells.append(CellRun(plan.dataset, sid, spec.implementation, _library(spec), [],
                                             unavailable[sid]))
                        continue
                    results = store.trials(protocol.name, plan.dataset, sid, fingerprint, plan.seeds)
                    cells.append(CellRun(plan.dataset, sid, spec.implementation, _library(spec),
                                         [_trial_record(r) for r in results]))
        finally:
            store.close()
    return cells, data_info


# --- baselines --------------------------------------------------------------------------

def create_baseline(suite: Suite, out: str | Path, *, force: bool = False, create_parents: bool = False,
                    jobs: int = 1, data_dir: str | None = None, progress: bool = True,
                    log=lambda line: print(line, file=sys.stderr)) -> dict[str, Any]:
    """Replay the suite here and write the baseline file (atomically). ``out`` is checked
    first: al-audit overwrites only a baseline it wrote, and one git tracks only with ``force``."""
    check_output_file(out, is_baseline, force=force, create_parents=create_parents)
    start = time.perf_counter()
    seeds = None if suite.seeds is None else {ds: list(suite.seeds) for ds in suite.datasets}
    cells, data_info = replay_cells(suite.protocol, suite.datasets, suite.strategies, seeds, suite.trials,
                                    jobs=jobs, data_dir=data_dir, progress=progress, strict=True, log=log)
    baseline = {
        "format": BASELINE_FORMAT,
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "suite": suite.to_data(),
        "protocol": {"name": suite.protocol.name, "spec_hash": suite.protocol.spec_hash,
                     "aubc_variant": suite.protocol.aubc_variant, "aubc_metric": suite.protocol.aubc_metric,
                     "data": suite.protocol.to_data()},
        "environment": environment(),
        "datasets": data_info,
        "cells": [{"dataset": c.dataset, "strategy": c.strategy, "implementation": c.implementation,
                   "library": c.library, "trials": c.trials} for c in cells],
        "seconds": round(time.perf_counter() - start, 1),
    }
    check_output_file(out, is_baseline, force=force, create_parents=create_parents)  # it may have changed since
    _write_atomic(Path(out), json.dumps(baseline, indent=1, default=str) + "\n")
    return baseline


def is_baseline(path: Path) -> bool:
    """Whether ``path`` holds a baseline al-audit wrote (its format tag)."""
    try:
        return json.loads(path.read_text()).get("format") == BASELINE_FORMAT
    except (OSError, ValueError, AttributeError):
        return False


def load_baseline(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    try:
        baseline = json.loads(path.read_text())
    except OSError as exc:
        raise AuditError(f"cannot read baseline {path}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise AuditError(f"baseline {path} is not JSON: {exc}") from None
    if not isinstance(baseline, dict) or baseline.get("format") != BASELINE_FORMAT:
        raise AuditError(f"{path} is not an al-audit baseline (format {BASELINE_FORMAT}); "
                         "create one with `audit baseline create --suite NAME`")
    for key in ("suite", "protocol", "environment", "datasets", "cells"):
        if key not in baseline:
            raise AuditError(f"baseline {path} lacks '{key}'; recreate it with `audit baseline create`")
    check_name(baseline["suite"].get("name") if isinstance(baseline["suite"], dict) else None,
               f"baseline {path}: suite")  # it names the report directory reports/gate-<suite>
    return baseline


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
    try:
        tmp.write_text(text)
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
