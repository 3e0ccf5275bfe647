"""`audit lint-references`: detectors that read a published table, not a replay.

A reference table can be wrong in ways no replay reveals: a column copied from another (a
strategy that silently fell back to a baseline), a BEST/WORST label that is not the table's
own extreme, a mean off the AUBC range. Equivalences known by construction are data
(reference_lint.toml), so they are explained instead of flagged.
"""
from __future__ import annotations

import tomllib
from collections import defaultdict
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

from audit.analysis.references import REFERENCE_DIR, Reference, load_references

FACTS_FILE = Path(__file__).with_name("reference_lint.toml")
NEAR = 0.0002          # means this close on the 0-1 scale count as nearly identical
COPY_SHARE = 0.5       # a pair equal or nearly so on more than this share of its shared data sets...
MIN_IDENTICAL = 3      # ...and identical (mean and SD as printed) on at least this many is flagged
NOT_QUERY_STRATEGIES = {"uniform", "bso", "avg-17", "best"}  # reference points, not BEST/WORST candidates
EPS = 1e-12


@dataclass(frozen=True)
class ReferenceFinding:
    name: str
    triggered: bool  # False: nothing found, or explained by a known equivalence
    finding: str
    datasets: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    suspects: tuple[str, ...] = ()  # the sources of the rows it casts doubt on (`audit summary` marks their cells)

    def line(self) -> str:
        where = f" [{compact_sources(self.sources)}]" if self.sources else ""
        return f"{'!!' if self.triggered else 'ok'} {self.name}: {self.finding}{where}"


def compact_sources(sources: tuple[str, ...]) -> str:
    """`file:2`, `file:9` -> `file:2,9`, keeping the order files first appear in."""
    lines: dict[str, list[str]] = defaultdict(list)
    for source in sources:
        path, _, line = source.rpartition(":")
        lines[path].append(line)
    return "; ".join(f"{path}:{','.join(sorted(set(nums), key=int))}" for path, nums in lines.items())


def load_facts(path: Path = FACTS_FILE) -> dict:
    with open(path, "rb") as f:
        return tomllib.load(f)


def _labelled(ref: Reference) -> str | None:
    """BEST or WORST for a row that labels a table's extreme (lu2023 notes, zhan2021's `best` row)."""
    if ref.note.startswith(("BEST", "WORST")):
        return ref.note[:5].rstrip(";").strip()
    return "BEST" if ref.strategy == "best" else None


def _columns(refs: list[Reference]) -> dict[tuple, dict[tuple, dict[str, Reference]]]:
    """{(paper, table, metric): {(strategy, batch size): {data set: row}}}, printed numbers only."""
    tables: dict[tuple, dict[tuple, dict[str, Reference]]] = defaultdict(lambda: defaultdict(dict))
    for ref in refs:
        if ref.mean is not None and ref.strategy != "best" and not _labelled(ref):
            tables[ref.paper, ref.table, ref.metric][ref.strategy, ref.batch_size][ref.dataset] = ref
    return tables


def _name(column: tuple[str, int]) -> str:
    return column[0] if column[1] == 1 else f"{column[0]}-{column[1]}"


def identical_columns(refs: list[Reference], facts: dict) -> list[ReferenceFinding]:
    """Pairs of columns of one table equal on most data sets: one most likely copies the other."""
    explained = {(frozenset(e["strategies"]), e["batch_size"]): e["why"] for e in facts.get("equivalent", [])}
    collapsed = {(e["paper"], e["strategy"], e["onto"]): e["why"] for e in facts.get("collapsed", [])}
    found = []
    for (paper, table, metric), columns in _columns(refs).items():
        for a, b in combinations(sorted(columns, key=lambda c: (c[0] == "uniform", c)), 2):
            shared = [d for d in columns[a] if d in columns[b]]
            same = [d for d in shared if (columns[a][d].mean, columns[a][d].sd) == (columns[b][d].mean, columns[b][d].sd)]
            near = [d for d in shared if d not in same
                    and abs(columns[a][d].mean_fraction - columns[b][d].mean_fraction) <= NEAR + EPS]
            if len(same) < MIN_IDENTICAL or len(same) + len(near) <= COPY_SHARE * len(shared):
                continue
            what = "mean and SD" if any(columns[a][d].sd is not None for d in same) else "mean"
            text = (f"{paper} {table} ({metric}): {_name(a)} equals {_name(b)} ({what} as printed) on "
                    f"{len(same)} of the {len(shared)} data sets where both have a number ({', '.join(same)})")
            if near:
                text += f", and its mean is within {NEAR:g} of {_name(b)}'s on {len(near)} more ({', '.join(near)})"
            why = explained.get((frozenset((a[0], b[0])), a[1])) if a[1] == b[1] else None
            if why:
                text += f": explained, {why}"
            elif (cause := collapsed.get((paper, a[0], b[0]))) is not None:
                text += f": {_name(a)} fell back to {_name(b)}: {cause}"
            elif b[0] == "uniform":
                text += f": {_name(a)} most likely fell back to uniform"
            else:
                text += ": one column most likely copies the other"
            held = same + near
            doubted = (a,) if b[0] == "uniform" else (a, b)  # a column equal to uniform's fell back to it
            found.append(ReferenceFinding("identical-columns", why is None, text, tuple(held),
                                          tuple(columns[c][d].source for d in held for c in (a, b)),
                                          tuple(columns[c][d].source for d in held for c in doubted)
                                          if why is None else ()))
    return found or [ReferenceFinding("identical-columns", False, "no column copies another")]


def extreme_labels(refs: list[Reference], facts: dict) -> list[ReferenceFinding]:
    """BEST/WORST rows whose strategy or value is not the maximum/minimum of the query strategies
    in their table (or in the paper's full table, where the labelled table prints no columns)."""
    tables = _columns(refs)
    full = facts.get("full_table", {})
    found, checked, unchecked = [], 0, 0
    for ref in refs:
        kind = _labelled(ref)
        if kind is None or ref.mean is None:
            continue
        table = ref.table if _candidates(tables, ref, ref.table) else full.get(ref.paper)
        candidates = _candidates(tables, ref, table) if table else []
        if not candidates:
            unchecked += 1
            continue
        checked += 1
        sign = 1 if kind == "BEST" else -1
        if ref.strategy == "best":  # a bound with no strategy named: only a strategy beyond it is wrong
            holders = sorted((c for c in candidates if sign * (c.mean_fraction - ref.mean_fraction) > EPS),
                             key=lambda c: -sign * c.mean_fraction)[:1]
            beyond = sum(sign * (c.mean_fraction - ref.mean_fraction) > EPS for c in candidates)
            text = f"{kind} row is {ref.mean:g}, yet {beyond} strategy cell(s) are {'above' if sign > 0 else 'below'} it"
        else:
            extreme = sign * max(sign * c.mean_fraction for c in candidates)
            holders = [c for c in candidates if abs(c.mean_fraction - extreme) <= EPS]
            if ref.strategy in {c.strategy for c in holders} and abs(ref.mean_fraction - extreme) <= EPS:
                holders = []
            text = f"{kind} is {ref.strategy} {ref.mean:g}, not the {'maximum' if sign > 0 else 'minimum'}"
        if not holders:
            continue
        found.append(ReferenceFinding(
            "extreme-labels", True, f"{ref.paper} {ref.table} {ref.dataset} ({ref.metric}): {text}; {table}'s extreme: "
            f"{', '.join(f'{_name((c.strategy, c.batch_size))} {c.mean:g}' for c in holders)}", (ref.dataset,),
            (ref.source, *(c.source for c in holders)), (ref.source,)))
    skipped = f" ({unchecked} more have no per-strategy table to check against)" if unchecked else ""
    return found or [ReferenceFinding("extreme-labels", False,
                                      f"all {checked} BEST/WORST labels are their table's extremes{skipped}")]


def _candidates(tables: dict, ref: Reference, table: str) -> list[Reference]:
    columns = tables.get((ref.paper, table, ref.metric), {})
    return [rows[ref.dataset] for (strategy, _), rows in columns.items()
            if strategy not in NOT_QUERY_STRATEGIES and ref.dataset in rows]


def mean_range(refs: list[Reference], facts: dict) -> list[ReferenceFinding]:
    """Means outside [0, 1] once the table's scale is applied (a percent read as a fraction...)."""
    bad = [r for r in refs if r.mean is not None and not -EPS <= r.mean_fraction <= 1 + EPS]
    if not bad:
        return [ReferenceFinding("mean-range", False, "every mean lies in [0, 1] after its table's scale")]
    return [ReferenceFinding("mean-range", True, f"{r.paper} {r.table} {r.dataset} {r.strategy}: mean {r.mean:g} "
                             f"({r.scale}) is {r.mean_fraction:g} on the 0-1 scale", (r.dataset,), (r.source,), (r.source,))
            for r in bad]


DETECTORS = (identical_columns, extreme_labels, mean_range)


def lint_references(paper: str, directory: Path = REFERENCE_DIR, facts: dict | None = None) -> list[ReferenceFinding]:
    """Every detector's findings on one paper's tables (all metrics and tables at once)."""
    refs = load_references(paper=paper, metric=None, directory=directory, check_range=False)
    facts = load_facts() if facts is None else facts
    return [finding for detector in DETECTORS for finding in detector(refs, facts)]


def resolve_paper(name: str) -> str:
    """A paper's short name, given it or a protocol (name or .toml file) that compares with it."""
    from audit.errors import AuditError
    from audit.protocols import load_protocol

    papers = sorted({ref.paper for ref in load_references(metric=None, check_range=False)})
    if name in papers:
        return name
    try:
        return load_protocol(name).reference_paper
    except AuditError:
        raise AuditError(f"{name!r} is neither a paper with reference tables ({', '.join(papers)}) "
                         "nor a protocol (see `audit protocols`)") from None
