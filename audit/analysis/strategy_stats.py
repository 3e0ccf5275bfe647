"""The analysis commands (usefulness, rank, wtl, runs-needed): collect the per-trial table
from the store, running what it lacks, analyse it with `audit.analysis.stats`, print and write it."""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Sequence

import adapters
from audit.analysis.references import Reference, pick_reference, read_user_table
from audit.analysis.stats import (
    BASELINE,
    RUNS_K,
    Table,
    average_rank,
    format_number,
    format_table,
    runs_needed,
    seed_ranges,
    trial_ranks,
    usefulness,
    win_tie_loss,
)
from audit.engine.datasets import REGISTRY
from audit.engine.destinations import check_report_dir, csv_table, write_directory
from audit.engine.metrics import get_variant
from audit.engine.replay import ReproduceRequest, execute_replay, plan_replay
from audit.engine.store import ResultStore
from audit.errors import AuditError
from audit.protocols import Protocol, load_protocol


@dataclass
class Collected:
    """Per-trial AUBCs of the requested strategies and data sets, with their provenance."""

    table: Table
    strategies: list[str]
    provenance: list[str]
    sd_ddof: int
    protocol: str
    published: dict[str, dict[str, float | None]] | None = None  # with --references: data set -> strategy -> mean
    references: str | None = None  # the table's path, for the text


def collect(protocol: str | Protocol, datasets: Sequence[str], strategies: Sequence[str] | None = None,
            trials: int | None = None, jobs: int = 1, data_dir: str | None = None,
            store: str | Path = ".audit-store.sqlite", progress: bool = True, require: str | None = None,
            log=lambda line: print(line, file=sys.stderr)) -> Collected:
    """Run what the store lacks for every data set and read the ok trials back.

    `require` (e.g. "uniform") is added to explicitly requested strategies when missing.
    """
    if not datasets:
        raise AuditError("no data set given")
    wanted = list(strategies) if strategies else None
    if wanted and require and require not in wanted:
        wanted.insert(0, require)
    requests = [ReproduceRequest(protocol, d, wanted, trials=trials, jobs=jobs, data_dir=data_dir, store=store,
                                 progress=progress) for d in datasets]
    plans = [plan_replay(r, log) for r in requests]  # every input validated before any work
    left_out: list[str] = []
    if wanted is None:
        p = plans[0].protocol
        left_out = [sid for sid in plans[0].strategies if adapters.uses_test_labels(p.strategy(sid).implementation)]
        plans = [replace(pl, strategies=[s for s in pl.strategies if s not in left_out]) for pl in plans]
    if require and require not in plans[0].strategies:
        raise AuditError(f"this analysis needs strategy '{require}', which protocol '{plans[0].protocol.name}' "
                         "cannot run here")
    table: Table = {}
    result_store = ResultStore(store)
    try:
        for plan, request in zip(plans, requests):
            fingerprint, details, _, _ = execute_replay(plan, request, result_store, log)
            table[plan.dataset] = {
                sid: {r.trial_seed: r.aubc for r in result_store.trials(plan.protocol.name, plan.dataset, sid,
                                                                        fingerprint, plan.seeds)
                      if r.status == "ok"}
                for sid in plan.strategies}
    finally:
        result_store.close()
    p = plans[0].protocol
    libs = ", ".join(f"{k} {v}" for k, v in details["versions"].items() if v != "absent")
    provenance = [
        f"protocol {p.name} (spec {p.spec_hash}); AUBC {p.aubc_variant} on {p.aubc_metric} "
        f"({get_variant(p.aubc_variant).source}); SD ddof={p.sd_ddof}; store fingerprint {fingerprint}",
        f"libraries: {libs}",
        "trial seeds: " + "; ".join(f"{pl.dataset} {seed_ranges(pl.seeds)} ({len(pl.seeds)})" for pl in plans),
    ]
    if plans[0].unavailable:
        provenance.append(f"not run here: {', '.join(plans[0].unavailable)} (reasons: `audit strategies`)")
    if left_out:
        provenance.append(f"reference oracles left out: {', '.join(left_out)} (they choose by the test labels; "
                          "name them in --strategies to include them)")
    return Collected(table, plans[0].strategies, provenance, p.sd_ddof, p.name)


def write_outputs(out_dir: Path, name: str, text: str, header: Sequence[str], rows: Sequence[Sequence[Any]],
                  holds: dict[str, Any], create_parents: bool) -> Path:
    """Write `<name>.csv` (the rows) and `<name>.txt` (the printed text) into out_dir, all or nothing."""
    write_directory(out_dir, {f"{name}.csv": csv_table(header, rows), f"{name}.txt": text + "\n"}, holds,
                    create_parents=create_parents)
    return out_dir


def published_means(protocol: Protocol, table: Table, strategies: Sequence[str], references: Sequence[Reference]
                    ) -> dict[str, dict[str, float | None]]:
    """{data set: {strategy: published mean AUBC on the 0-1 scale, None where the table has none}},
    picked from a user's table as `audit reproduce` picks (:func:`audit.analysis.references.pick_reference`)."""
    out: dict[str, dict[str, float | None]] = {}
    for dataset in table:
        out[dataset] = {}
        for sid in strategies:
            ref = pick_reference(protocol, dataset, sid, list(references))
            out[dataset][sid] = None if ref is None else ref.mean_fraction
    return out


def _published_line(c: Collected, what: str) -> list[str]:
    return [f"published: {what}, from {c.references} ('-' where it has no mean)"] if c.references else []


def usefulness_text(c: Collected, result: dict[str, Any]) -> tuple[str, list[str], list[list[Any]]]:
    """(printed text, CSV header, CSV rows) of `audit usefulness`; with a reference table,
    the published gain mean(strategy) - mean(uniform) as a last column."""
    header = ["dataset", "strategy", "n", "mean_tau", "sd_tau", "t", "p_one_sided", "p_holm", "significant",
              "significant_holm"]
    rows = [[r["dataset"], r["strategy"], r["n"], format_number(r["mean_tau"], ".5f"), format_number(r["sd_tau"], ".5f"),
             format_number(r["t"], ".3f"), format_number(r["p"], ".3g"), format_number(r["p_holm"], ".3g"),
             "yes" if r["significant"] else "no", "yes" if r["significant_holm"] else "no"] for r in result["rows"]]
    if c.published is not None:
        header.append("published_gain")
        for row, r in zip(rows, result["rows"]):
            pub = c.published[r["dataset"]]
            gain = None if pub[r["strategy"]] is None or pub[BASELINE] is None else pub[r["strategy"]] - pub[BASELINE]
            row.append(format_number(gain, ".5f"))
    counts = result["counts"]
    count_rows = [[f"strategy {k}", v["significant"], v["significant_holm"], v["tests"]]
                  for k, v in counts["by_strategy"].items()]
    count_rows += [[f"data set {k}", v["significant"], v["significant_holm"], v["tests"]]
                   for k, v in counts["by_dataset"].items()]
    text = "\n".join(c.provenance + [
        f"tau = AUBC(strategy) - AUBC(uniform) on the same trial seed; paired t-test, one-sided "
        f"(improvement), alpha {result['alpha']}; Holm over all {len(rows)} tests",
        *_published_line(c, "published_gain = published mean AUBC(strategy) - published mean AUBC(uniform), 0-1 scale"), "",
        format_table(header, rows), "", "significant improvements over uniform (lu2023 Figure 5)",
        format_table(["group", "significant", "significant (Holm)", "tests"], count_rows)])
    return text, header, rows


def published_ranks(means: dict[str, float | None], strategies: Sequence[str]) -> dict[str, float | None]:
    """Rank of each strategy's published mean among those that have one (1 = best, ties averaged)."""
    known = [s for s in strategies if means.get(s) is not None]
    ranks = dict(zip(known, trial_ranks([[means[s] for s in known]])[0].tolist())) if known else {}
    return {s: ranks.get(s) for s in strategies}


def rank_text(c: Collected, result: dict[str, Any]) -> tuple[str, list[str], list[list[Any]]]:
    """(printed text, CSV header, CSV rows) of `audit rank`."""
    datasets = result["datasets"]
    header = ["strategy"] + [f"{d} mean" for d in datasets] + [f"{d} sd" for d in datasets]
    rows = [[s] + [format_number(datasets[d]["ranks"].get(s, {}).get("mean", math.nan), ".2f") for d in datasets]
            + [format_number(datasets[d]["ranks"].get(s, {}).get("sd", math.nan), ".2f") for d in datasets]
            for s in c.strategies]
    shown = [[s] + [f"{a} ({b})" for a, b in zip(r[1:1 + len(datasets)], r[1 + len(datasets):])]
             for s, r in zip(c.strategies, rows)]
    shown_header = ["strategy"] + list(datasets)
    if c.published is not None:
        for d in datasets:
            ranks = published_ranks(c.published[d], c.strategies)
            header.append(f"{d} published rank")
            shown_header.append(f"{d} published")
            for row, show, s in zip(rows, shown, c.strategies):
                row.append(format_number(ranks[s], "g"))
                show.append(format_number(ranks[s], "g"))
    tests = []
    for d, e in datasets.items():
        fr = e["friedman"]
        tests.append([d, e["n"], "-" if fr is None else f"{fr['statistic']:.2f}",
                      "-" if fr is None else f"{fr['p']:.3g}", format_number(e["cd"], ".3f"),
                      "; ".join(f"{a}/{b}" for a, b in e["different"]) or "none"])
    text = "\n".join(c.provenance + [
        "rank within each trial seed by AUBC (1 = best, ties averaged); mean (SD) over trials (lu2023 Table 3)",
        *_published_line(c, "rank of each strategy's published mean AUBC among those listed with one "
                            "(1 = best, ties averaged)"), "",
        format_table(shown_header, shown), "",
        f"Friedman test per data set; Nemenyi CD = q_alpha*sqrt(k(k+1)/(6N)), alpha {result['alpha']}, "
        f"N = trials, k = {len(c.strategies)}",
        format_table(["dataset", "N", "chi2", "p", "CD", "pairs with mean-rank difference > CD"], tests)])
    return text, header, rows


def wtl_text(c: Collected, result: dict[str, Any]) -> tuple[str, list[str], list[list[Any]]]:
    """(printed text, CSV header, CSV rows) of `audit wtl`."""
    header = ["strategy", "win", "tie", "loss", "score"]
    rows = [[r[h] for h in header] for r in result["totals"]]
    text = "\n".join(c.provenance + [
        f"pairwise on mean AUBC per data set over {len(c.table)} data sets; tie when |difference| <= "
        f"{result['band']} (zhan2021 Table 4); score = 2*win + tie", "", format_table(header, rows)])
    return text, header, rows


def runs_needed_text(c: Collected, dataset: str, result: dict[str, Any]) -> tuple[str, list[str], list[list[Any]]]:
    """(printed text, CSV header, CSV rows) of `audit runs-needed`."""
    others = [s for s in c.strategies if s != BASELINE]
    header = ["k", "ranking_differs"] + [f"sign_flip_{s}" for s in others]
    rows = [[r["k"], f"{r['ranking_differs']:.3f}"] + [f"{r['sign_flips'][s]:.3f}" for s in others]
            for r in result["rows"]]
    means = ", ".join(f"{s} {v:.4f}" for s, v in result["full_mean"].items())
    text = "\n".join(c.provenance + [
        f"{dataset}: {result['n']} paired trials; full ranking {' > '.join(result['full_ranking'])} (mean AUBC {means})",
        f"{result['samples']} subsets of k trials without replacement per k (generator seed 0); fraction whose "
        "ranking differs from the full one, and whose sign of mean(strategy - uniform) differs", "",
        format_table(header, rows) if rows else f"no k in {RUNS_K} below n = {result['n']}"])
    return text, header, rows


def run_command(command: str, protocol: str, datasets: Sequence[str], strategies: Sequence[str] | None = None,
                trials: int | None = None, jobs: int = 1, data_dir: str | None = None,
                store: str | Path = ".audit-store.sqlite", out: str | Path | None = None, progress: bool = True,
                samples: int = 1000, references: str | Path | None = None) -> tuple[str, Path]:
    """Collect, analyse and write one of usefulness, rank, wtl, runs-needed; returns (text, output dir).
    ``references`` (usefulness and rank): a user's published table, shown beside the figures."""
    if command == "runs-needed" and samples < 1:
        raise AuditError(f"--samples must be a positive number, not {samples}")
    if references is not None and command not in ("usefulness", "rank"):
        raise AuditError(f"{command} shows no published number; --references is for usefulness and rank")
    require = BASELINE if command in ("usefulness", "runs-needed") else None
    spec = load_protocol(protocol)
    ref_table = None if references is None else read_user_table(references, REGISTRY, spec.strategies)
    out_dir = Path(out) if out else Path("reports") / f"{command}-{spec.name}"
    check_report_dir(out_dir, create_parents=out is None)  # before any trial: al-audit replaces only its own
    c = collect(spec, datasets, strategies, trials, jobs, data_dir, store, progress, require)
    if ref_table is not None:
        c = replace(c, published=published_means(spec, c.table, c.strategies, ref_table), references=str(references))
    if command == "usefulness":
        text, header, rows = usefulness_text(c, usefulness(c.table, c.strategies, c.sd_ddof))
    elif command == "rank":
        text, header, rows = rank_text(c, average_rank(c.table, c.strategies, c.sd_ddof))
    elif command == "wtl":
        text, header, rows = wtl_text(c, win_tie_loss(c.table, c.strategies))
    else:
        dataset = next(iter(c.table))
        text, header, rows = runs_needed_text(c, dataset, runs_needed(c.table[dataset], c.strategies, samples))
    holds = {"command": command, "protocol": c.protocol, "datasets": list(c.table), "strategies": c.strategies}
    return text, write_outputs(out_dir, command, text, header, rows, holds, create_parents=out is None)
