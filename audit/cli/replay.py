"""`audit reproduce`, `audit diagnose`, `audit lint`: replay a protocol on one data set,
compare with the paper, diagnose, and the static detectors."""
from __future__ import annotations

import argparse

from audit.cli.options import COUNT, SECONDS, csv_list, force_option, references_option, replay_options


def _reproduce(args: argparse.Namespace) -> int:
    from audit.analysis.diagnose.at_chance import summary_line as at_chance_line
    from audit.analysis.diagnose.degenerate import summary_line as degenerate_line
    from audit.analysis.reproduce import ReproduceRequest, reproduce
    from audit.report.sections import format_table, provenance_lines

    outcome = reproduce(ReproduceRequest(
        protocol=args.protocol, dataset=args.dataset,
        strategies=csv_list(args.strategies) if args.strategies else None,
        trials=args.trials, jobs=args.jobs, data_dir=args.data_dir, store=args.store, out=args.out,
        batch_size=args.batch_size, trial_timeout=args.trial_timeout,
        progress=not args.no_progress, retry_errors=args.retry_errors, no_diagnose=args.no_diagnose,
        force=args.force,
        references=args.references, until_settled=args.until_settled,
    ))
    for line in provenance_lines(outcome.report):
        print(line)
    print()
    print(format_table(outcome.report))
    print()
    for cell in outcome.report["strategies"]:
        if cell.get("diagnosis"):
            print(f"diagnosis {cell['strategy']}: {cell['diagnosis']['summary']}")
    for line in (at_chance_line(outcome.report["strategies"]), degenerate_line(outcome.report["strategies"])):
        if line:
            print(line)
    for entry in outcome.report.get("shared_causes", []):
        print(entry["line"])
    print(f"report: {outcome.out_dir}/ {', '.join(outcome.files)} "
          f"({outcome.ran} trials run, {outcome.reused} reused from {args.store})")
    return 0


def _lint(args: argparse.Namespace) -> int:
    from audit.analysis.diagnose.detectors import lint
    from audit.engine.datasets import load_dataset
    from audit.protocols import load_protocol

    data = load_dataset(args.dataset, args.data_dir) if args.dataset else None
    for finding in lint(load_protocol(args.protocol), data):
        print(finding.line())
    return 0


def _diagnose(args: argparse.Namespace) -> int:
    from audit.analysis.reproduce import ReproduceRequest, reproduce
    from audit.protocols import load_protocol

    _lint(args)
    protocol = load_protocol(args.protocol)
    if not protocol.released:
        print(f"{protocol.name} names no released-code protocol ([diagnosis] released): detectors only")
        return 0
    outcome = reproduce(ReproduceRequest(
        protocol=protocol, dataset=args.dataset, strategies=csv_list(args.strategies) if args.strategies else None,
        trials=args.trials, jobs=args.jobs, data_dir=args.data_dir, store=args.store, out=args.out,
        progress=not args.no_progress, force=args.force,
    ))
    for cell in outcome.report["strategies"]:
        if cell.get("status") == "ok":
            print(f"{cell['strategy']}: {cell['verdict']}"
                  + (f"; {cell['diagnosis']['summary']}" if cell.get("diagnosis") else ""))
    for entry in outcome.report.get("shared_causes", []):
        print(entry["line"])
    print(f"report: {outcome.out_dir}/ {', '.join(outcome.files)}")
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    rep = sub.add_parser("reproduce", help="replay a protocol on one data set and compare with the paper")
    rep.add_argument("protocol", help="protocol name (see `audit protocols`) or a protocol .toml file")
    rep.add_argument("--dataset", required=True, help="data set name (see `audit datasets`)")
    rep.add_argument("--strategies", help="comma-separated strategy ids (default: all available in the protocol)")
    rep.add_argument("--trials", type=COUNT, help="number of trials (default: the protocol's, 100 or 10 by size)")
    rep.add_argument("--jobs", type=COUNT, default=1, help="parallel worker processes (default 1)")
    rep.add_argument("--batch-size", type=COUNT, help="override the protocol's batch size (zhan2021 used 1, 2, 5, 10)")
    rep.add_argument("--trial-timeout", type=SECONDS, help="seconds per trial before it is recorded as TLE "
                     "(default: no limit)")
    rep.add_argument("--data-dir", help="directory of the LIBSVM files (default: $AL_AUDIT_DATA_DIR, "
                     "then ../shared/datasets, then the user cache)")
    rep.add_argument("--store", default=".audit-store.sqlite", help="SQLite results store (default %(default)s)")
    rep.add_argument("--out", help="report directory (default reports/<protocol>-<dataset>)")
    rep.add_argument("--retry-errors", action="store_true", help="rerun trials stored as errors")
    force_option(rep)
    references_option(rep, "compare with your own published table (the reference_results/ schema; see "
                      "`audit references check`) instead of the shipped ones")
    rep.add_argument("--until-settled", action="store_true",
                     help="run trials in rounds (n = 10, 20, 40, 70, ...) and stop a cell as soon as a 99%% betting "
                     "confidence sequence, valid however often it is looked at, excludes its published value "
                     "(discrepant at 1%%); a cell without one stops after the first round; other cells run to the "
                     "maximum, --trials or the protocol's count")
    rep.add_argument("--no-progress", action="store_true", help="no progress bar")
    rep.set_defaults(func=_reproduce)

    rep.add_argument("--no-diagnose", action="store_true",
                     help="no counterfactual replays of discrepant cells (see `audit diagnose`)")

    li = sub.add_parser("lint", help="static detectors of settings known to move published AUBCs")
    li.add_argument("protocol", help="protocol name or .toml file")
    li.add_argument("--dataset", help="data set for the data-dependent detectors (pool order, duplicates...)")
    li.add_argument("--data-dir", help="directory of the LIBSVM files")
    li.set_defaults(func=_lint)

    dg = sub.add_parser("diagnose", help="detectors, then replay discrepant cells one released-code knob at a time")
    dg.add_argument("protocol", help="protocol name or .toml file")
    dg.add_argument("--dataset", required=True, help="data set name")
    dg.add_argument("--strategies", help="comma-separated strategy ids (default: all available)")
    replay_options(dg, "report directory (default reports/<protocol>-<dataset>)")
    force_option(dg)
    dg.set_defaults(func=_diagnose)
