"""Published claims as commands: each paper's claims are data (``<paper>.toml`` beside its module),
and the paper's module turns each into a row with a verdict and the figures behind it (from the
result store and transcribed tables, or from the pipelines it replays).

``REGISTRY`` maps the name `audit claims NAME` takes to the module that evaluates that paper's
claims; a module has ``evaluate(**options) -> list[ClaimRow]`` and ``OPTIONS``, the option names it
takes (``store`` always), so the CLI passes every option given and each paper rejects what it does
not take. Verdicts are "support", "contradiction", "inconclusive" (a test that rejects
neither the claim nor its opposite: no evidence either way is not a contradiction) or "not
testable here" (with the reason in the figures).
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from audit.errors import AuditError

VERDICTS = ("support", "contradiction", "inconclusive", "not testable here")
REGISTRY: dict[str, str] = {
    "alpbench": "audit.analysis.claims.alpbench",
    "cdalbench": "audit.analysis.claims.cdalbench",
}


@dataclass(frozen=True)
class ClaimRow:
    """One claim's outcome: its id, where the paper makes it, what it says, the verdict, and
    the figures (numbers, or why it is not testable here)."""

    claim: str
    source: str
    statement: str
    verdict: str
    figures: str

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, not {self.verdict!r}")


def evaluate(paper: str, **options: Any) -> list[ClaimRow]:
    """Every claim of ``paper`` with its verdict; an unknown paper, or an option its module does not
    take, is one AuditError line. Options left at None are the module's defaults."""
    if paper not in REGISTRY:
        raise AuditError(f"no claims are registered for '{paper}'; known: {', '.join(sorted(REGISTRY))}")
    module = importlib.import_module(REGISTRY[paper])
    given = {key: value for key, value in options.items() if value is not None}
    unknown = set(given) - set(module.OPTIONS)
    if unknown:
        raise AuditError(f"audit claims {paper} does not take {', '.join('--' + k for k in sorted(unknown))}")
    return module.evaluate(**given)


def format_claims(rows: list[ClaimRow]) -> str:
    """One block per claim: id, source and verdict, the statement, then the figures."""
    lines = []
    for row in rows:
        lines += [f"{row.claim} [{row.source}]: {row.verdict.upper()}", f"  claim: {row.statement}",
                  *(f"  {line}" for line in row.figures.splitlines()), ""]
    counts = {v: sum(r.verdict == v for r in rows) for v in VERDICTS}
    lines.append(", ".join(f"{n} {v}" for v, n in counts.items()))
    return "\n".join(lines)
