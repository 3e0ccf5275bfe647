"""Published protocols as data.

Each ``*.toml`` file beside this module is one protocol: every knob that decides what a
replay does (split, seeds, scaling, models, budget, AUBC variant, strategies) is written
there, and nothing about a protocol is decided in code. ``load_protocol`` validates a
file into a frozen :class:`Protocol`.
"""
from __future__ import annotations

import hashlib
import json
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from audit.engine.destinations import check_name
from audit.engine.metrics import get_variant
from audit.engine.models import QUERY_MODEL_DEFAULTS, ModelSpec
from audit.engine.preprocess import PREPROCESSING
from audit.errors import AuditError
from audit.extras import EXTRAS

PROTOCOL_DIR = Path(__file__).resolve().parent

# given: the data set's own test rows (a generated draw's); alpbench: ALPBench 0.1.2's stratified split
SPLIT_METHODS = ("lu2023", "zhan2021-released", "given", "alpbench")
# per-class: initial_labels of each class; top-up: ALPBench's missing-class top-up of the initial set
INITIAL_RULES = ("skip-seed", "redraw", "per-class", "top-up")
POOL_ORDERS = ("shuffled", "file")
SCALING_SCOPES = ("none", "train", "labeled")
SCALERS = ("standard", "minmax")
SCALER_TEST_FITS = ("train", "test")  # test: the test rows get a scaler of their own (CDALBench's released code)
SEED_SOURCES = ("trial", "spawn")
SUBSYSTEMS = ("split", "initial", "strategy", "model", "data")  # data: a generated set's draw (s_D)
OPTIONAL_SEEDS = {"data": "trial"}  # subsystems a protocol may leave out, and their source then
LABEL_REVEALS = ("row", "first-equal-row")
LIBACT_BINARY = ("pm1", "file")
BUDGET_CAPS = ("none", "pool")

# Knobs added after protocols were first hashed: at their default they are left out of the
# spec hash, so a protocol that does not set them keeps its hash (and its stored trials).
LATER_KNOBS = {"query_model_defaults": "current", "label_reveal": "row", "label_reveal_applies_to": [],
               "libact_binary": "pm1", "validation_ratio": 0.0, "scaler": "standard", "scaler_test_fit": "train",
               "budget_by_dataset": {}, "paper_vs_code": {}, "task_model_by_dataset": {},
               "requires": [], "preprocess": "none", "learners": {},
               "initial_per_class": 0, "batch_per_class": 0, "budget_rounds": 0, "budget_cap": "none"}


@dataclass(frozen=True)
class SplitSpec:
    method: str
    test_ratio: float
    initial_labels: int
    initial_rule: str
    min_per_class: int
    pool_order: str


@dataclass(frozen=True)
class TrialSpec:
    small: int
    large: int
    large_from: int
    seeds_small: int
    seeds_large: int

    def for_size(self, n: int) -> tuple[int, int]:
        """(trials wanted, candidate seeds) for a data set of n rows."""
        return (self.small, self.seeds_small) if n < self.large_from else (self.large, self.seeds_large)


@dataclass(frozen=True)
class StrategySpec:
    """One strategy as a protocol binds it: implementation, parameters, query model.

    ``query_model`` is None for model-free strategies, the string "task" when the
    strategy queries with the task model itself, or a :class:`ModelSpec`.
    """

    id: str
    implementation: str
    params: dict[str, Any] = field(default_factory=dict)
    query_model: ModelSpec | str | None = None


@dataclass(frozen=True)
class Protocol:
    name: str
    title: str
    paper: str
    tasks: tuple[str, ...]
    split: SplitSpec
    trials: TrialSpec
    seeds: dict[str, int | str]
    scaling: dict[str, str]
    task_model: ModelSpec
    budget_size: int | str
    batch_size: int
    aubc_variant: str
    aubc_metric: str
    sd_ddof: int
    scale: str
    reference_paper: str
    reference_tables: tuple[str, ...]
    strategies: dict[str, StrategySpec]
    path: Path
    released: str | None = None  # [diagnosis] released: the protocol of the released code, for counterfactuals
    # [query_models] defaults: what a query or committee model's unset parameters mean, "current"
    # (the installed scikit-learn) or "sklearn-0.19" (LR solver liblinear, SVC gamma 'auto',
    # KMeans n_init=10); task models are unaffected (audit/engine/models.py ERA_DEFAULTS)
    query_model_defaults: str = "current"
    # [labels] reveal: a queried row's label is its own ("row") or that of the first train row
    # with equal features ("first-equal-row", libact 0.1.6's IdealLabeler), for the strategies
    # of the libraries in applies_to (empty: every strategy)
    label_reveal: str = "row"
    label_reveal_applies_to: tuple[str, ...] = ()
    # [labels] libact_binary: binary labels go to libact as -1/+1 ("pm1") or as the file spells them ("file")
    libact_binary: str = "pm1"
    # [split] validation_ratio: this share of the train rows (after the test rows are set aside)
    # becomes a validation set, drawn by the split seed, for a task model that stops early on it
    validation_ratio: float = 0.0
    # [scaling] scaler: StandardScaler ("standard") or MinMaxScaler ("minmax"); test_fit: the test
    # rows are scaled with the train rows' scaler ("train") or with one fitted on themselves ("test")
    scaler: str = "standard"
    scaler_test_fit: str = "train"
    # [budget] by_dataset: a budget per data set overriding [budget] size
    budget_by_dataset: dict[str, int] = field(default_factory=dict)
    # [task_model_by_dataset.NAME]: a task model per data set overriding [task_model]
    task_model_by_dataset: dict[str, ModelSpec] = field(default_factory=dict)
    # [paper_vs_code]: what the paper states where the protocol follows the released code
    # instead, {knob: {paper = value, code = value, source = "..."}}; the diagnosis flags each
    paper_vs_code: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def aubc_unit(self) -> str:
        """What one AUBC value measures, for reports ("fraction", or a raw area's units)."""
        return get_variant(self.aubc_variant).unit(self.scale)

    def for_dataset(self, dataset: str) -> "Protocol":
        """This protocol as it runs on ``dataset``: that data set's own budget and task model
        where [budget] by_dataset and [task_model_by_dataset] give them (else unchanged)."""
        from dataclasses import replace

        return replace(self, budget_size=self.budget_by_dataset.get(dataset, self.budget_size),
                       task_model=self.task_model_by_dataset.get(dataset, self.task_model))

    # requires: the pyproject optional extras the protocol needs (audit/extras.py), checked before any work
    requires: tuple[str, ...] = ()
    # [data] preprocess: what is done to the rows before the split (audit/engine/preprocess.py)
    preprocess: str = "none"
    # [learners]: named task models the protocol's study pairs with its strategies (a pipeline =
    # a learner x a strategy; ALPBench); the task model is the default learner
    learners: dict[str, ModelSpec] = field(default_factory=dict)
    # task-dependent sizes (ALPBench's dynamic settings): initial labels and batch = factor x classes
    initial_per_class: int = 0  # [split] initial_per_class; 0: split.initial_labels
    batch_per_class: int = 0  # [budget] batch_per_class; 0: budget.batch_size
    budget_rounds: int = 0  # [budget] rounds, for size = "rounds": the budget is rounds x batch
    budget_cap: str = "none"  # [budget] cap = "pool": a budget beyond the pool queries the whole pool

    def initial_for(self, n_classes: int) -> int:
        """Initial labeled rows on a data set with ``n_classes`` classes."""
        return self.initial_per_class * n_classes if self.initial_per_class else self.split.initial_labels

    def batch_for(self, n_classes: int) -> int:
        """Rows queried per round on a data set with ``n_classes`` classes."""
        return self.batch_per_class * n_classes if self.batch_per_class else self.batch_size

    def reveals_equal_row(self, library: str) -> bool:
        """Does a strategy of ``library`` learn the first equal train row's label?"""
        return self.label_reveal == "first-equal-row" and (
            not self.label_reveal_applies_to or library in self.label_reveal_applies_to)

    def strategy(self, strategy_id: str) -> StrategySpec:
        try:
            return self.strategies[strategy_id]
        except KeyError:
            raise AuditError(
                f"protocol '{self.name}' has no strategy '{strategy_id}'; "
                f"it has: {', '.join(self.strategies)}"
            ) from None

    def query_model_for(self, spec: StrategySpec) -> ModelSpec | None:
        """The query model a strategy really uses, with "task" resolved."""
        return self.task_model if spec.query_model == "task" else spec.query_model  # type: ignore[return-value]

    def to_data(self) -> dict[str, Any]:
        data = asdict(self)
        data["path"] = str(self.path.name)
        return data

    @property
    def spec_hash(self) -> str:
        """Hash of every knob: results stored under one hash came from one protocol."""
        data = self.to_data()
        data.pop("title")
        data.pop("path")
        data.pop("released")  # a pointer for the diagnosis, not a replay knob
        for key, default in LATER_KNOBS.items():
            if data[key] == default or (isinstance(default, (list, dict)) and type(default)(data[key]) == default):
                data.pop(key)
        return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]

    def display(self, value: float) -> str:
        """An AUBC (fraction) printed on the paper's scale."""
        return f"{100 * value:.2f}" if self.scale == "percent" else f"{value:.4f}"


def _choice(value: Any, allowed: tuple[str, ...], what: str) -> str:
    if value not in allowed:
        raise AuditError(f"{what} must be one of {', '.join(allowed)}, not {value!r}")
    return value


def _positive_int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise AuditError(f"{what} must be a positive integer, not {value!r}")
    return value


def _parse(data: dict[str, Any], path: Path) -> Protocol:
    try:
        split_data = dict(data["split"])
        validation_ratio = split_data.pop("validation_ratio", 0.0)
        if isinstance(validation_ratio, bool) or not isinstance(validation_ratio, (int, float)) \
                or not 0 <= validation_ratio < 1:
            raise AuditError(f"split.validation_ratio must be in [0, 1), not {validation_ratio!r}")
        initial_per_class = split_data.pop("initial_per_class", 0)
        split = SplitSpec(**split_data)
        _choice(split.method, SPLIT_METHODS, "split.method")
        _choice(split.initial_rule, INITIAL_RULES, "split.initial_rule")
        _choice(split.pool_order, POOL_ORDERS, "split.pool_order")
        if not 0 < split.test_ratio < 1 or split.initial_labels < 1:
            raise AuditError("split.test_ratio must be in (0, 1) and initial_labels >= 1")
        seeds = dict(data["seeds"])
        for key in SUBSYSTEMS:
            value = seeds[key] if key not in OPTIONAL_SEEDS else seeds.get(key, OPTIONAL_SEEDS[key])
            if not isinstance(value, int):
                _choice(value, SEED_SOURCES, f"seeds.{key}")
        scaling = dict(data["scaling"])
        scaler = _choice(scaling.pop("scaler", "standard"), SCALERS, "scaling.scaler")
        scaler_test_fit = _choice(scaling.pop("test_fit", "train"), SCALER_TEST_FITS, "scaling.test_fit")
        for key in ("task", "query"):
            _choice(scaling[key], SCALING_SCOPES, f"scaling.{key}")
        budget = dict(data["budget"])
        by_dataset = dict(budget.pop("by_dataset", {}))
        for name, size in by_dataset.items():
            _positive_int(size, f"budget.by_dataset.{name}")
        paper_vs_code = dict(data.get("paper_vs_code", {}))
        for knob, stated in paper_vs_code.items():
            if not isinstance(stated, dict) or not {"paper", "code", "source"} <= set(stated):
                raise AuditError(f"paper_vs_code.{knob} must give paper, code and source")
        if budget["size"] not in ("pool", "rounds") and not (isinstance(budget["size"], int) and budget["size"] > 0):
            raise AuditError("budget.size must be 'pool', 'rounds' or a positive integer")
        unknown_budget = set(budget) - {"size", "batch_size", "batch_per_class", "rounds", "cap"}
        if unknown_budget:
            raise AuditError(f"unknown keys {sorted(unknown_budget)} in [budget]")
        if budget["size"] == "rounds":
            _positive_int(budget.get("rounds"), "budget.rounds (for size = 'rounds')")
        for key, value in (("split.initial_per_class", initial_per_class),
                           ("budget.batch_per_class", budget.get("batch_per_class", 0))):
            if value != 0:
                _positive_int(value, key)
        requires = data.get("requires", [])
        if not isinstance(requires, list) or not all(isinstance(v, str) for v in requires):
            raise AuditError("requires must be a list of optional-extra names")
        for extra in requires:
            _choice(extra, tuple(EXTRAS), "requires")
        data_knobs = dict(data.get("data", {}))
        if set(data_knobs) - {"preprocess"}:
            raise AuditError(f"unknown keys {sorted(set(data_knobs) - {'preprocess'})} in [data]")
        learners = {name: ModelSpec.from_data(spec) for name, spec in data.get("learners", {}).items()}
        aubc = data["aubc"]
        get_variant(aubc["variant"])
        _positive_int(budget["batch_size"], "budget.batch_size")
        if aubc["sd_ddof"] not in (0, 1):
            raise AuditError("aubc.sd_ddof must be 0 (population SD) or 1 (sample SD)")
        for key, value in data["trials"].items():
            _positive_int(value, f"trials.{key}")
        strategies = {
            sid: StrategySpec(
                sid,
                s["implementation"],
                dict(s.get("params", {})),
                s.get("query_model") if s.get("query_model") in (None, "task") else ModelSpec.from_data(s["query_model"]),
            )
            for sid, s in data["strategies"].items()
        }
        labels = dict(data.get("labels", {}))
        unknown = set(labels) - {"reveal", "applies_to", "libact_binary"}
        query_models = dict(data.get("query_models", {}))
        if unknown or set(query_models) - {"defaults"}:
            raise AuditError(f"unknown keys {sorted(unknown | (set(query_models) - {'defaults'}))} in "
                             "[labels] / [query_models]")
        applies_to = labels.get("applies_to", [])
        if not isinstance(applies_to, list) or not all(isinstance(v, str) for v in applies_to):
            raise AuditError("labels.applies_to must be a list of library names")
        return Protocol(
            name=check_name(data["name"], f"{path.name}: protocol"),  # it names report directories
            title=data["title"],
            paper=data["paper"],
            tasks=tuple(data["tasks"]),
            split=split,
            trials=TrialSpec(**data["trials"]),
            seeds=seeds,
            scaling=scaling,
            task_model=ModelSpec.from_data(data["task_model"]),
            budget_size=budget["size"],
            batch_size=int(budget["batch_size"]),
            aubc_variant=aubc["variant"],
            aubc_metric=_choice(aubc["metric"], ("accuracy", "f1", "roc_auc"), "aubc.metric"),
            sd_ddof=int(aubc["sd_ddof"]),
            scale=_choice(aubc["scale"], ("percent", "fraction"), "aubc.scale"),
            reference_paper=data["reference"]["paper"],
            reference_tables=tuple(data["reference"]["tables"]),
            strategies=strategies,
            path=path,
            released=data.get("diagnosis", {}).get("released"),
            query_model_defaults=_choice(query_models.get("defaults", "current"), QUERY_MODEL_DEFAULTS,
                                         "query_models.defaults"),
            label_reveal=_choice(labels.get("reveal", "row"), LABEL_REVEALS, "labels.reveal"),
            label_reveal_applies_to=tuple(applies_to),
            libact_binary=_choice(labels.get("libact_binary", "pm1"), LIBACT_BINARY, "labels.libact_binary"),
            validation_ratio=float(validation_ratio),
            scaler=scaler,
            scaler_test_fit=scaler_test_fit,
            budget_by_dataset=by_dataset,
            task_model_by_dataset={name: ModelSpec.from_data(spec)
                                   for name, spec in data.get("task_model_by_dataset", {}).items()},
            paper_vs_code=paper_vs_code,
            requires=tuple(requires),
            preprocess=_choice(data_knobs.get("preprocess", "none"), PREPROCESSING, "data.preprocess"),
            learners=learners,
            initial_per_class=initial_per_class,
            batch_per_class=budget.get("batch_per_class", 0),
            budget_rounds=budget.get("rounds", 0),
            budget_cap=_choice(budget.get("cap", "none"), BUDGET_CAPS, "budget.cap"),
        )
    except KeyError as exc:
        raise AuditError(f"{path.name}: missing key {exc.args[0]!r}") from None
    except (TypeError, ValueError, AttributeError) as exc:
        raise AuditError(f"{path.name}: {exc}") from None


def available_protocols() -> list[str]:
    return sorted(p.stem for p in PROTOCOL_DIR.glob("*.toml"))


MAX_EXTENDS = 4  # protocol files extending others, at most this deep


def _protocol_path(name_or_path: str | Path, relative_to: Path | None = None) -> Path:
    """A shipped protocol's file by name, or a protocol file by path (relative to the
    extending file when one extends another)."""
    path = Path(name_or_path)
    if path.suffix != ".toml":
        path = PROTOCOL_DIR / f"{name_or_path}.toml"
        if not path.exists():
            raise AuditError(
                f"unknown protocol '{name_or_path}'; known: {', '.join(available_protocols())}"
            )
    elif relative_to is not None and not path.is_absolute():
        path = relative_to.parent / path
    return path


def _read(path: Path, chain: tuple[Path, ...] = ()) -> dict[str, Any]:
    """A protocol file's data; ``extends = "NAME"`` starts from that protocol's data, this
    file's tables merged over it (a strategy it names replaces the base's whole entry;
    ``base_strategies = [...]`` keeps only those of the base's strategies)."""
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise AuditError(f"cannot read protocol {path}: {exc}") from None
    base_name = data.pop("extends", None)
    if base_name is None:
        return data
    if not isinstance(base_name, str):
        raise AuditError(f"{path.name}: extends must be a protocol name or file, not {base_name!r}")
    base_path = _protocol_path(base_name, path)
    if base_path.resolve() in chain or len(chain) >= MAX_EXTENDS:
        raise AuditError(f"{path.name}: extends {base_name!r} in a loop or more than {MAX_EXTENDS} deep")
    base = _read(base_path, chain + (path.resolve(),))
    kept = data.pop("base_strategies", None)  # which of the base's strategies to keep (default: all)
    if kept is not None:
        if not isinstance(kept, list) or not all(isinstance(sid, str) for sid in kept):
            raise AuditError(f"{path.name}: base_strategies must be a list of strategy ids")
        unknown = [sid for sid in kept if sid not in base.get("strategies", {})]
        if unknown:
            raise AuditError(f"{path.name}: base_strategies names {', '.join(unknown)}, not in {base_name!r}")
        base = {**base, "strategies": {sid: base["strategies"][sid] for sid in kept}}
    return _merge(base, data)


def _merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if key == "strategies" and isinstance(value, dict):
            merged[key] = {**base.get(key, {}), **value}
        elif isinstance(value, dict) and isinstance(base.get(key), dict):
            merged[key] = _merge(base[key], value)
        else:
            merged[key] = value
    return merged


def load_protocol(name_or_path: str | Path) -> Protocol:
    """Load a shipped protocol by name, or any protocol file by path (which may extend one)."""
    path = _protocol_path(name_or_path)
    return _parse(_read(path), path)
