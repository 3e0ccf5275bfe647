"""The capability matrix: every canonical strategy, how each protocol binds it, whether
it chooses by the test labels (a reference oracle), and whether it can run here (and if
not, why). Unavailable cells are listed, never dropped."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import adapters
from audit.errors import AuditError
from audit.protocols import Protocol, available_protocols, load_protocol

CANONICAL_STRATEGIES = (
    "uniform", "us-c", "us-nc", "qbc", "hintsvm", "quire", "albl", "dwus", "vr",
    "coreset", "graph", "hier", "infodiv", "mcm", "eer", "bmdr", "spal", "lal",
    "bso", "greedy-oracle",  # reference oracles (adapters/oracles.py): they use the test labels
)


def canonical_order(strategies: Sequence[str]) -> list[str]:
    """Strategies in the order of lu2023 Table 1 (CANONICAL_STRATEGIES), others after, as given."""
    rank = {s: i for i, s in enumerate(CANONICAL_STRATEGIES)}
    return sorted(strategies, key=lambda s: rank.get(s, len(rank)))


@dataclass(frozen=True)
class Capability:
    protocol: str
    strategy: str
    implementation: str
    library: str
    params: dict[str, Any]
    query_model: str
    batch: str
    uses_test_labels: bool  # a reference oracle: it chooses by the test labels
    status: str  # "available" or "unavailable: <reason>" or "not in protocol"
    note: str | None = None  # how it runs here, when a reader must know (QueryStrategy.capability_note)


def capability(protocol: Protocol, strategy: str) -> Capability:
    if strategy not in protocol.strategies:
        return Capability(protocol.name, strategy, "-", "-", {}, "-", "-", False, "not in protocol")
    spec = protocol.strategies[strategy]
    query_model = protocol.query_model_for(spec)
    reason = adapters.unavailable_reason(spec.implementation)
    try:
        cls = adapters.strategy_class(spec.implementation)
        library, batch, oracle = cls.library_version(), "yes" if cls.batch else "no", cls.uses_test_labels
        params = {**cls.param_defaults, **spec.params}
        note = cls.capability_note() if reason is None else None
    except AuditError:
        library, batch, oracle, params = spec.implementation.split(".")[0], "-", False, dict(spec.params)
        note = None
    model = "none" if query_model is None else str(query_model)
    if oracle:
        model = "task model scored on the test labels"
    elif spec.query_model == "task":
        model += " (task model)"
    return Capability(protocol.name, strategy, spec.implementation, library, params, model, batch, oracle,
                      "available" if reason is None else f"unavailable: {reason}", note)


def matrix(protocol_names: list[str] | None = None) -> list[Capability]:
    rows = []
    for name in protocol_names or available_protocols():
        protocol = load_protocol(name)
        extra = [s for s in protocol.strategies if s not in CANONICAL_STRATEGIES]
        rows += [capability(protocol, s) for s in (*CANONICAL_STRATEGIES, *extra)]
    return rows


@dataclass(frozen=True)
class LearnerCapability:
    protocol: str
    learner: str
    model: str
    status: str  # "available" or "unavailable: <reason>"


def learner_matrix(protocol_names: list[str] | None = None) -> list[LearnerCapability]:
    """The learners a protocol pairs with its strategies (``[learners]``), each built once here to
    tell whether it runs (a learner whose package or weights are missing is listed with why)."""
    rows = []
    for name in protocol_names or available_protocols():
        protocol = load_protocol(name)
        for learner, spec in protocol.learners.items():
            try:
                spec.validate()
                status = "available"
            except AuditError as exc:
                status = f"unavailable: {exc}"
            rows.append(LearnerCapability(protocol.name, learner, str(spec), status))
    return rows


def format_learners(rows: list[LearnerCapability]) -> str:
    """Fixed-width table of the learners, or nothing when no protocol names any."""
    if not rows:
        return ""
    table = [("protocol", "learner", "model", "status")] + [
        (r.protocol, r.learner, r.model if len(r.model) <= 90 else r.model[:87] + "...", r.status) for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(3)]
    lines = ["  ".join([*(v.ljust(w) for v, w in zip(row[:3], widths)), row[3]]).rstrip() for row in table]
    lines.insert(1, "-" * max(len(line) for line in lines[:1]))
    available = sum(r.status == "available" for r in rows)
    return "\n".join(lines + [f"\n{available} of {len(rows)} learners available here"])


def format_plugins() -> str:
    """The plug-ins installed packages register (entry-point group al_audit.strategies),
    each with where it comes from and whether it loads here."""
    found = adapters.plugins()
    if not found:
        return f"no plug-ins registered (entry-point group {adapters.ENTRY_POINT_GROUP})"
    lines = [f"plug-ins registered under the entry-point group {adapters.ENTRY_POINT_GROUP}:"]
    for name, target, source in found:
        reason = adapters.unavailable_reason(name)
        lines.append(f"  {name} = {target} ({source}): " + ("available" if reason is None else f"unavailable: {reason}"))
    return "\n".join(lines)


def format_matrix(rows: list[Capability]) -> str:
    """Fixed-width table; unavailable cells point to a numbered reason under the table."""

    def params(p: dict[str, Any]) -> str:
        text = ", ".join(f"{k}={v}" for k, v in p.items())
        return text if len(text) <= 70 else text[:67] + "..."

    reasons: list[str] = []
    notes: list[str] = []

    def status(r: Capability) -> str:
        if r.note:
            if r.note not in notes:
                notes.append(r.note)
            return f"{r.status} (note {'abcdefghijklmnopqrstuvwxyz'[notes.index(r.note) % 26]})"
        if not r.status.startswith("unavailable: "):
            return r.status
        reason = r.status.removeprefix("unavailable: ")
        if reason not in reasons:
            reasons.append(reason)
        return f"unavailable [{reasons.index(reason) + 1}]"

    def test_labels(r: Capability) -> str:
        return "-" if r.status == "not in protocol" else "yes (oracle)" if r.uses_test_labels else "no"

    header = ("protocol", "strategy", "implementation", "library", "query model", "batch", "test labels", "status",
              "parameters")
    table = [header] + [(r.protocol, r.strategy, r.implementation, r.library, r.query_model, r.batch, test_labels(r),
                         status(r), params(r.params)) for r in rows]
    widths = [max(len(str(row[i])) for row in table) for i in range(len(header))]
    lines = ["  ".join(str(v).ljust(w) for v, w in zip(row, widths)).rstrip() for row in table]
    lines.insert(1, "-" * max(len(line) for line in lines))
    counted = [r for r in rows if r.status != "not in protocol"]
    available = sum(r.status == "available" for r in counted)
    lines.append(f"\n{available} of {len(counted)} bound strategies available here")
    lines += [f"[{i}] {reason}" for i, reason in enumerate(reasons, 1)]
    lines += [f"(note {'abcdefghijklmnopqrstuvwxyz'[i % 26]}) {note}" for i, note in enumerate(notes)]
    return "\n".join(lines)
