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

import dataclasses
import json
import math
import os
import secrets
import socket
import sys
import tempfile
import time
import tomllib
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable


import adapters
from audit.version import __version__
from audit.datasets import ALIASES, REGISTRY
from audit.destinations import check_name, check_output_file, check_report_dir, write_directory
from audit.environment import environment_versions
from audit.errors import AuditError
from audit.models import ModelSpec
from audit.protocols import Protocol, SplitSpec, StrategySpec, TrialSpec, load_protocol
from audit.replay import ReproduceRequest, choose_strategies, execute_replay, plan_replay
from audit.splits import make_split
from audit.stats import TRIALS_NEEDED_POWER, format_number, paired_tests
from audit.store import ResultStore, code_hash

SUITE_DIR = Path(__file__).resolve().parent / "suites"
BASELINE_FORMAT = "al-audit-baseline/1"
DEFAULT_BASELINE_DIR = "al-audit-baselines"  # `baseline create` without --out: below the current directory
SUITE_KEYS = ("name", "description", "protocol", "datasets", "strategies", "trials", "seeds", "bindings")
BINDING_KEYS = ("implementation", "params", "query_model")
EXIT_OK, EXIT_DRIFT, EXIT_ERROR = 0, 1, 2


# --- suites ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Suite:
    """A validated suite. ``protocol`` is the effective one: only the suite's strategies,
    bindings included, so its spec hash and diffs concern exactly what the suite runs."""

    name: str
    description: str
    protocol: Protocol
    protocol_source: str
    datasets: tuple[str, ...]
    strategies: tuple[str, ...]
    trials: int | None
    seeds: tuple[int, ...] | None
    bindings: dict[str, dict[str, Any]]

    def to_data(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "protocol": self.protocol_source,
                "datasets": list(self.datasets), "strategies": list(self.strategies), "trials": self.trials,
                "seeds": None if self.seeds is None else list(self.seeds), "bindings": self.bindings}


def available_suites() -> list[str]:
    return sorted(p.stem for p in SUITE_DIR.glob("*.toml"))


def _read_suite_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
    except OSError as exc:
        raise AuditError(f"cannot read suite {path}: {exc.strerror}") from None
    if path.suffix == ".toml":
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise AuditError(f"suite {path.name}: not valid TOML: {exc}") from None
    try:
        import yaml
    except ImportError:
        raise AuditError(f"suite {path.name}: reading YAML needs PyYAML (`uv pip install pyyaml`); "
                         "TOML suites need nothing") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise AuditError(f"suite {path.name}: not valid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise AuditError(f"suite {path.name}: the top level must be a mapping of keys")
    return data


def load_suite(name_or_path: str | Path) -> Suite:
    """A shipped suite by name, or any .toml/.yaml/.yml suite file by path."""
    path = Path(name_or_path)
    if path.suffix not in (".toml", ".yaml", ".yml"):
        path = SUITE_DIR / f"{name_or_path}.toml"
        if not path.exists():
            raise AuditError(f"unknown suite '{name_or_path}'; shipped: {', '.join(available_suites())} "
                             "(or give a .toml/.yaml suite file)")
    return parse_suite(_read_suite_file(path), path)


def _string_list(data: dict[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = data.get(key)
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise AuditError(f"{where}: '{key}' must be a non-empty list of names, not {value!r}")
    duplicates = sorted({v for v in value if value.count(v) > 1})
    if duplicates:
        raise AuditError(f"{where}: '{key}' lists {', '.join(duplicates)} more than once")
    return tuple(value)


def binding_spec(sid: str, binding: dict[str, Any]) -> StrategySpec:
    """A suite's strategy binding as a protocol would bind it."""
    query_model = binding.get("query_model")
    if query_model not in (None, "task"):
        query_model = ModelSpec.from_data(query_model)
    return StrategySpec(sid, binding["implementation"], dict(binding.get("params", {})), query_model)


def _check_binding(sid: str, binding: Any, where: str) -> StrategySpec:
    if not isinstance(binding, dict):
        raise AuditError(f"{where}: binding '{sid}' must be a table with 'implementation'")
    unknown = sorted(set(binding) - set(BINDING_KEYS))
    if unknown:
        raise AuditError(f"{where}: binding '{sid}' has unknown key(s) {', '.join(unknown)}; "
                         f"allowed: {', '.join(BINDING_KEYS)}")
    if not isinstance(binding.get("implementation"), str):
        raise AuditError(f"{where}: binding '{sid}' needs 'implementation' (library.name, "
                         "see `audit strategies`)")
    if not isinstance(binding.get("params", {}), dict):
        raise AuditError(f"{where}: binding '{sid}': 'params' must be a table")
    try:
        spec = binding_spec(sid, binding)
        if isinstance(spec.query_model, ModelSpec):
            spec.query_model.validate()  # built and checked as a --models spec is, before any trial
    except (AuditError, TypeError, KeyError) as exc:
        raise AuditError(f"{where}: binding '{sid}': query_model: {exc}") from None
    cls = adapters.strategy_class(spec.implementation)  # unknown implementation: the registry's message
    unused = sorted(set(spec.params) - set(cls.param_defaults))
    if unused:
        raise AuditError(f"{where}: binding '{sid}': {spec.implementation} does not use parameter(s) "
                         f"{', '.join(unused)}; it takes: {', '.join(cls.param_defaults) or 'none'}")
    return spec


def with_strategies(protocol: Protocol, strategies: Iterable[str],
                    bindings: dict[str, dict[str, Any]]) -> Protocol:
    """The protocol reduced to ``strategies``, the suite's bindings added."""
    bound = {sid: binding_spec(sid, b) for sid, b in bindings.items()}
    available = {**protocol.strategies, **bound}
    return dataclasses.replace(protocol, strategies={s: available[s] for s in strategies if s in available})


def parse_suite(data: dict[str, Any], path: Path) -> Suite:
    where = f"suite {path.name}"
    unknown = sorted(set(data) - set(SUITE_KEYS))
    if unknown:
        raise AuditError(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(SUITE_KEYS)}")
    name = check_name(data.get("name", path.stem), where)  # it names the baseline file and gate report
    description = data.get("description", "")
    if not isinstance(description, str):
        raise AuditError(f"{where}: 'description' must be text")
    source = data.get("protocol")
    if not isinstance(source, str) or not source:
        raise AuditError(f"{where}: 'protocol' must name a protocol (e.g. \"lu2023\") or a protocol .toml file")
    if source.endswith(".toml") and not Path(source).is_absolute():
        source = str((path.parent / source).resolve())
    base = load_protocol(source)
    datasets = _string_list(data, "datasets", where)
    for ds in datasets:
        info = REGISTRY.get(ALIASES.get(ds, ds))
        if info is None:
            raise AuditError(f"{where}: unknown data set '{ds}'; known: {', '.join(sorted(REGISTRY))}")
        if info.task not in base.tasks:
            raise AuditError(f"{where}: protocol '{base.name}' covers {'/'.join(base.tasks)} data sets; "
                             f"'{ds}' is {info.task}")
    strategies = _string_list(data, "strategies", where)
    bindings = data.get("bindings", {})
    if not isinstance(bindings, dict):
        raise AuditError(f"{where}: 'bindings' must be a table of strategy bindings")
    for sid, binding in bindings.items():
        if sid in base.strategies:
            raise AuditError(f"{where}: binding '{sid}' would replace protocol {base.name}'s strategy of that "
                             "name; give it another id")
        _check_binding(sid, binding, where)
    missing = [s for s in strategies if s not in base.strategies and s not in bindings]
    if missing:
        raise AuditError(f"{where}: strategy '{missing[0]}' is neither in protocol {base.name} "
                         f"({', '.join(base.strategies)}) nor bound in 'bindings'")
    unused = sorted(set(bindings) - set(strategies))
    if unused:
        raise AuditError(f"{where}: binding(s) {', '.join(unused)} not listed in 'strategies'")
    trials, seeds = data.get("trials"), data.get("seeds")
    if (trials is None) == (seeds is None):
        raise AuditError(f"{where}: give exactly one of 'trials' (the protocol's first N valid seeds) "
                         "or 'seeds' (a list of trial seeds)")
    if trials is not None and (isinstance(trials, bool) or not isinstance(trials, int) or trials < 1):
        raise AuditError(f"{where}: 'trials' must be a positive integer, not {trials!r}")
    if seeds is not None:
        if (not isinstance(seeds, list) or not seeds
                or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds)
                or len(set(seeds)) != len(seeds)):
            raise AuditError(f"{where}: 'seeds' must be a non-empty list of distinct non-negative integers")
        seeds = tuple(seeds)
    protocol = with_strategies(base, strategies, bindings)
    return Suite(name, description, protocol, data["protocol"], datasets, strategies, trials, seeds,
                 {sid: bindings[sid] for sid in strategies if sid in bindings})


# --- environment and spec differences ---------------------------------------------------

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
        return f"{self.key}: {_show(self.before)} -> {_show(self.after)}"


def _show(value: Any) -> str:
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
                invalid = [(s, why) for s in wanted if isinstance(why := make_split(protocol, plan.data.y, s), str)]
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


# --- comparing cells --------------------------------------------------------------------

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
    report = {
        "baseline": str(baseline_path), "baseline_created_at": baseline.get("created_at"),
        "suite": suite["name"], "margin": margin, "alpha": alpha, "strict": strict,
        "protocol": {"name": current.name, "spec_hash": current.spec_hash, "baseline_spec_hash": recorded.spec_hash,
                     "aubc_variant": current.aubc_variant, "aubc_metric": current.aubc_metric,
                     "source": str(protocol) if protocol else "the baseline's recorded protocol"},
        "environment": {"baseline": baseline["environment"], "current": env_now,
                        "changes": [{"key": c.key, "from": _show(c.before), "to": _show(c.after)} for c in env_changes]},
        "protocol_changes": [{"key": c.key, "from": _show(c.before), "to": _show(c.after)} for c in spec_changes],
        "cells": cells, "counts": counts, "exit_code": exit_code((c["verdict"] for c in cells), strict),
        "seconds": round(time.perf_counter() - start, 1),
        "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    write_directory(out, {"gate.json": json.dumps(report, indent=1, default=str) + "\n",
                          "summary.md": format_summary(report), "junit.xml": junit_xml(report)},
                    {"command": "gate", "suite": suite["name"], "baseline": str(baseline_path)},
                    create_parents=create_parents)
    report["out_dir"] = str(out)
    return report


# --- outputs ----------------------------------------------------------------------------

def _overall(report: dict[str, Any]) -> str:
    code = report["exit_code"]
    if code == EXIT_DRIFT:
        return "DRIFT"
    if code == EXIT_ERROR:
        return "ERROR" if report["counts"]["error"] else "INCONCLUSIVE (strict)"
    return "PASS"


def format_summary(report: dict[str, Any]) -> str:
    """The Markdown summary: verdict, environment and protocol changes, one row per cell."""
    counts = ", ".join(f"{n} {v}" for v, n in report["counts"].items() if n)
    interval = f"{100 * (1 - 2 * report['alpha']):g}% CI"
    lines = [f"# al-audit gate: suite `{report['suite']}`", "",
             f"**{_overall(report)}** (exit {report['exit_code']}): {counts}.", "",
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
