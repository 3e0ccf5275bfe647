"""The Python API: the same replays and comparisons as the CLI, with pandas tables.

Every function validates its arguments first and raises ``audit.AuditError`` with the
CLI's one-line messages. Tables carry their provenance in ``DataFrame.attrs`` (protocol,
spec hash, AUBC variant, library versions, trial seeds) as well as in their columns, so
a number taken out of a notebook still says what produced it. Stores are opened
read-only here: reading trials never changes a user's file.
"""
from __future__ import annotations

import json
import math
import sqlite3
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from audit.analysis.compare import summarise, verdict
from audit.analysis.references import COLUMNS as REFERENCE_COLUMNS
from audit.analysis.references import load_references
from audit.analysis.reproduce import reproduce as _reproduce
from audit.engine.replay import ReproduceRequest
from audit.engine.store import DEFAULT_STORE, open_read_only
from audit.engine.workers import pools_kept
from audit.errors import AuditError
from audit.protocols import Protocol, load_protocol

CELL_COLUMNS = ("protocol", "dataset", "strategy", "status", "n", "mean", "sd", "ci95_low", "ci95_high",
                "ci99_low", "ci99_high", "published_mean", "verdict", "reference", "welch_p", "library",
                "aubc_variant")
TRIAL_COLUMNS = ("protocol", "dataset", "strategy", "trial_seed", "status", "aubc", "query_hash", "seconds",
                 "error", "fingerprint", "code", "protocol_spec")
ROUND_COLUMNS = ("protocol", "dataset", "strategy", "trial_seed", "round", "n_labeled", "accuracy", "f1",
                 "roc_auc", "fit_seconds", "query_seconds")
SETTLED_COLUMNS = ("trials_run", "settled_at", "stop", "cs95_low", "cs95_high", "cs99_low", "cs99_high")
COMPARE_KEYS = ("dataset", "strategy")


@dataclass
class Replay:
    """What `audit.reproduce` returns: one row per strategy in ``cells``, one per trial in
    ``trials``, the full report dictionary and where the report files went."""

    cells: pd.DataFrame
    trials: pd.DataFrame
    report: dict[str, Any]
    out_dir: Path
    ran: int
    reused: int


def _provenance(report: dict[str, Any]) -> dict[str, Any]:
    protocol = report["protocol"]
    return {"protocol": protocol["name"], "spec_hash": protocol["spec_hash"],
            "aubc_variant": protocol["aubc_variant"], "environment": report["environment"],
            "code": report["code"], "trial_seeds": report["seeds"]["trial_seeds"]}


def _reference_label(reference: dict[str, Any] | None) -> str | None:
    return None if reference is None else f"{reference['paper']} {reference['table']} ({reference['source']})"


def _cell_row(report: dict[str, Any], cell: dict[str, Any]) -> dict[str, Any]:
    ci95, ci99 = cell.get("ci95") or (None, None), cell.get("ci99") or (None, None)
    return {"protocol": report["protocol"]["name"], "dataset": report["dataset"]["name"],
            "strategy": cell["strategy"], "status": cell["status"], "n": cell.get("n_trials", 0),
            "mean": cell.get("mean"), "sd": cell.get("sd"), "ci95_low": ci95[0], "ci95_high": ci95[1],
            "ci99_low": ci99[0], "ci99_high": ci99[1], "published_mean": cell.get("published_mean"),
            "verdict": cell["verdict"], "reference": _reference_label(cell.get("reference")),
            "welch_p": (cell.get("welch") or {}).get("p"), "library": cell.get("library"),
            "aubc_variant": report["protocol"]["aubc_variant"],
            **(_settled_row(cell) if report.get("settled") else {})}


def _settled_row(cell: dict[str, Any]) -> dict[str, Any]:
    s = cell.get("settle") or {}
    cs95, cs99 = s.get("cs95") or (None, None), s.get("cs99") or (None, None)
    return {"trials_run": s.get("trials_run", 0), "settled_at": s.get("settled_at"), "stop": s.get("stop"),
            "cs95_low": cs95[0], "cs95_high": cs95[1], "cs99_low": cs99[0], "cs99_high": cs99[1]}


def reproduce(protocol: str | Path | Protocol, dataset: str, strategies: Sequence[str] | None = None,
              trials: int | None = None, jobs: int = 1, store: str | Path | None = None,
              out: str | Path | None = None, diagnose: bool = True, data_dir: str | None = None,
              references: str | Path | None = None, force: bool = False, progress: bool = False,
              until_settled: bool = False) -> Replay:
    """Replay ``protocol`` on ``dataset`` (what `audit reproduce` does) and return its tables.

    Defaults as the CLI's: every available strategy, the protocol's trial count, the store
    ``.audit-store.sqlite`` in the working directory, the report in ``reports/``, the
    published numbers of reference_results/ (``references``: a CSV table of your own). An
    earlier report in ``out`` with more in it is replaced only with ``force``. Progress
    lines go to stderr only when ``progress`` is true.

    ``until_settled``: trials in rounds, each cell stopped once the 99% betting confidence
    sequence excludes its published value (`audit reproduce --until-settled`); ``trials`` is
    then the maximum, and ``cells`` gains the columns of SETTLED_COLUMNS.
    """
    if isinstance(strategies, str):
        raise AuditError("strategies must be a list of strategy ids, not one string")
    if not isinstance(jobs, int) or isinstance(jobs, bool) or jobs < 1:
        raise AuditError(f"jobs must be a positive integer, not {jobs!r}")
    if trials is not None and (not isinstance(trials, int) or isinstance(trials, bool) or trials < 1):
        raise AuditError(f"trials must be a positive integer, not {trials!r}")
    request = ReproduceRequest(protocol=protocol if isinstance(protocol, Protocol) else str(protocol),
                               dataset=dataset, strategies=list(strategies) if strategies else None,
                               trials=trials, jobs=jobs, data_dir=data_dir,
                               store=DEFAULT_STORE if store is None else store, out=out, progress=progress,
                               no_diagnose=not diagnose, references=references, force=force,
                               until_settled=bool(until_settled))
    log = (lambda line: print(line, file=sys.stderr)) if progress else (lambda line: None)
    with pools_kept():  # one pool for the replay's rounds and its diagnosis's replays
        outcome = _reproduce(request, log)
    attrs = _provenance(outcome.report)
    columns = list(CELL_COLUMNS) + (list(SETTLED_COLUMNS) if until_settled else [])
    cells = pd.DataFrame([_cell_row(outcome.report, c) for c in outcome.report["strategies"]], columns=columns)
    cells.attrs.update(attrs)
    stored = _stored_trials(request.store, protocol=attrs["protocol"], dataset=outcome.report["dataset"]["name"],
                          fingerprint=outcome.report["fingerprint"])
    stored = stored[stored.trial_seed.isin(attrs["trial_seeds"])
                    & stored.strategy.isin(cells.strategy)].reset_index(drop=True)
    if until_settled:  # each cell's own trials: the first trials_run seeds
        run = {c["strategy"]: set(attrs["trial_seeds"][:c["settle"]["trials_run"]])
               for c in outcome.report["strategies"] if c.get("settle")}
        keep = [seed in run.get(sid, ()) for sid, seed in zip(stored.strategy, stored.trial_seed)]
        stored = stored[keep].reset_index(drop=True)
    stored.attrs.update(attrs)
    return Replay(cells, stored, outcome.report, outcome.out_dir, outcome.ran, outcome.reused)


def _where(filters: dict[str, Any]) -> tuple[str, list[Any]]:
    given = {k: v for k, v in filters.items() if v is not None}
    clause = " AND ".join(f"t.{k} = ?" for k in given)
    return (f" WHERE {clause}" if clause else ""), list(given.values())


def _query(store: str | Path, sql: str, filters: dict[str, Any]) -> pd.DataFrame:
    where, params = _where(filters)
    db = open_read_only(store)
    try:
        return pd.read_sql_query(sql.format(where=where), db, params=params)
    except (sqlite3.Error, pd.errors.DatabaseError) as exc:
        raise AuditError(f"cannot read the result store {store}: {exc}") from None
    finally:
        db.close()


def trials(store: str | Path = DEFAULT_STORE, protocol: str | None = None, dataset: str | None = None,
                 strategy: str | None = None, fingerprint: str | None = None) -> pd.DataFrame:
    """Every stored trial, one row each (tidy), with the library versions that produced it.

    A store keeps the trials of every environment it has seen: ``fingerprint`` and the
    version columns tell them apart (the CLI uses only the current environment's).
    """
    frame = _query(store, "SELECT t.protocol, t.dataset, t.strategy, t.trial_seed, t.status, t.aubc,"
                          " t.query_hash, t.seconds, t.error, t.fingerprint, f.details"
                          " FROM trials t JOIN fingerprints f USING (fingerprint){where}"
                          " ORDER BY t.protocol, t.dataset, t.strategy, t.trial_seed, t.fingerprint",
                   {"protocol": protocol, "dataset": dataset, "strategy": strategy, "fingerprint": fingerprint})
    details = [json.loads(text) for text in frame.pop("details")]
    frame["code"] = [d.get("code") for d in details]
    frame["protocol_spec"] = [d.get("protocol_spec") for d in details]  # the settings' hash: matches trials across stores
    versions = pd.DataFrame([d.get("versions", {}) for d in details], index=frame.index)
    return pd.concat([frame[list(TRIAL_COLUMNS)], versions], axis=1)


_stored_trials = trials  # reproduce() has a parameter called trials (the count), as the CLI does


def rounds(store: str | Path = DEFAULT_STORE, protocol: str | None = None, dataset: str | None = None,
           strategy: str | None = None, fingerprint: str | None = None) -> pd.DataFrame:
    """One row per round of every stored trial: labeled-set size, the task model's test
    accuracy, F1 and ROC-AUC after the round, and the seconds spent fitting and querying."""
    return _query(store, "SELECT t.protocol, t.dataset, t.strategy, t.trial_seed, r.round, r.n_labeled,"
                         " r.accuracy, r.f1, r.roc_auc, r.fit_seconds, r.query_seconds, t.fingerprint"
                         " FROM rounds r JOIN trials t ON t.id = r.trial_id{where}"
                         " ORDER BY t.protocol, t.dataset, t.strategy, t.trial_seed, t.fingerprint, r.round",
                  {"protocol": protocol, "dataset": dataset, "strategy": strategy, "fingerprint": fingerprint})


def summary(protocol: str | Path | Protocol, store: str | Path = DEFAULT_STORE, datasets: Sequence[str] | str | None = None,
            strategies: Sequence[str] | None = None, trials: int | None = None,
            data_dir: str | None = None) -> pd.DataFrame:
    """The data set x strategy matrix of `audit summary`, one row per cell (the columns of
    summary.csv), read from ``store`` without running or writing anything.

    ``datasets``: None for those with trials in the store, "all" for every one the protocol
    covers (cells without trials are "not run"); ``trials``: the first N valid trial seeds
    of each data set, as `audit reproduce --trials N` would use (None: the protocol's count).
    ``attrs`` hold the provenance, the counts and the lint findings on the published tables.
    """
    from audit.analysis.summary import SummaryRequest, summary_table
    from audit.report.summary import CSV_COLUMNS, csv_rows

    table = summary_table(SummaryRequest(protocol=protocol if isinstance(protocol, Protocol) else str(protocol),
                                         datasets=datasets, strategies=list(strategies) if strategies else strategies,
                                         trials=trials, store=store, data_dir=data_dir))
    frame = pd.DataFrame(csv_rows(table), columns=list(CSV_COLUMNS))
    frame.insert(0, "protocol", table["protocol"]["name"])
    frame.attrs.update({"protocol": table["protocol"]["name"], "spec_hash": table["protocol"]["spec_hash"],
                        "aubc_variant": table["protocol"]["aubc_variant"], "environment": table["environment"],
                        "code": table["code"], "fingerprint": table["fingerprint"],
                        "trial_seeds": table["seeds"]["used"], "counts": table["counts"],
                        "findings": table["findings"]})
    return frame


def protocol(name_or_path: str | Path) -> Protocol:
    """A shipped protocol by name, or a protocol file by path (validated)."""
    return load_protocol(name_or_path)


def references(paper: str | None = None, dataset: str | None = None, strategy: str | None = None,
               metric: str | None = None) -> pd.DataFrame:
    """The published numbers in reference_results/, one row each, with the file and line
    they were transcribed to (``source``) and the mean on the 0-1 scale (``mean_fraction``)."""
    refs = load_references(paper=paper, dataset=dataset, strategy=strategy, metric=metric)
    frame = pd.DataFrame([{**{c: getattr(r, c) for c in REFERENCE_COLUMNS}, "source": r.source,
                           "mean_fraction": r.mean_fraction} for r in refs],
                         columns=[*REFERENCE_COLUMNS, "source", "mean_fraction"])
    return frame


def compare(trials_df: pd.DataFrame, references_df: pd.DataFrame, sd_ddof: int = 1) -> pd.DataFrame:
    """Each (data set, strategy) of ``trials_df`` against the one published mean of
    ``references_df`` for it: t-intervals and the verdict, as `audit reproduce` gives them.

    ``trials_df`` needs columns dataset, strategy, status, aubc (as `audit.trials` gives);
    ``references_df`` dataset, strategy and mean_fraction (or mean on the 0-1 scale), at
    most one row per (data set, strategy): filter it by paper, table and metric first.
    """
    for name, frame, needed in (("trials_df", trials_df, ("dataset", "strategy", "status", "aubc")),
                                ("references_df", references_df, COMPARE_KEYS)):
        missing = [c for c in needed if c not in frame.columns]
        if missing:
            raise AuditError(f"{name} lacks column(s) {', '.join(missing)}")
    published = references_df.assign(
        published_mean=references_df["mean_fraction"] if "mean_fraction" in references_df else references_df["mean"])
    published = published.dropna(subset=["published_mean"])
    twice = published[published.duplicated(list(COMPARE_KEYS), keep=False)]
    if len(twice):
        first = twice.iloc[0]
        raise AuditError(f"references_df has {int((twice.dataset == first.dataset).sum())} rows for "
                         f"{first.dataset}/{first.strategy}: keep one per data set and strategy")
    lookup = published.set_index(list(COMPARE_KEYS))["published_mean"]
    rows = []
    for (dataset, strategy), group in trials_df[trials_df.status == "ok"].groupby(list(COMPARE_KEYS), sort=True):
        summary = summarise(group.aubc.to_numpy(dtype=float), sd_ddof)
        ref = lookup.get((dataset, strategy))
        ref = None if ref is None or (isinstance(ref, float) and math.isnan(ref)) else float(ref)
        rows.append({"dataset": dataset, "strategy": strategy, "n": summary.n, "mean": summary.mean,
                     "sd": summary.sd, "ci95_low": summary.ci95[0], "ci95_high": summary.ci95[1],
                     "ci99_low": summary.ci99[0], "ci99_high": summary.ci99[1], "published_mean": ref,
                     "verdict": verdict(summary, ref)})
    frame = pd.DataFrame(rows, columns=["dataset", "strategy", "n", "mean", "sd", "ci95_low", "ci95_high",
                                        "ci99_low", "ci99_high", "published_mean", "verdict"])
    frame.attrs.update(trials_df.attrs)
    return frame
