"""Gate suites: which protocol, data sets, strategies (with extra bindings) and trials a
baseline records; shipped ones in audit/gate/suites/, or a user's TOML/YAML file, all
validated on load like the CLI's own options."""
from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import adapters
from audit.engine.datasets import ALIASES, REGISTRY
from audit.engine.destinations import check_name
from audit.engine.models import ModelSpec
from audit.errors import AuditError
from audit.protocols import Protocol, StrategySpec, load_protocol

SUITE_DIR = Path(__file__).resolve().parent / "suites"
SUITE_KEYS = ("name", "description", "protocol", "datasets", "strategies", "trials", "seeds", "bindings")
BINDING_KEYS = ("implementation", "params", "query_model")

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
