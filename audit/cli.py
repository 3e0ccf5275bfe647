"""The `audit` command line. Errors the user can fix print one line and exit 2."""
from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

from audit.errors import AuditError

EXIT_ERROR = 2
EXIT_INTERRUPTED = 130


def _csv(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _reproduce(args: argparse.Namespace) -> int:
    from audit.report import format_table, provenance_lines
    from audit.reproduce import ReproduceRequest, reproduce

    outcome = reproduce(ReproduceRequest(
        protocol=args.protocol, dataset=args.dataset,
        strategies=_csv(args.strategies) if args.strategies else None,
        trials=args.trials, jobs=args.jobs, data_dir=args.data_dir, store=args.store, out=args.out,
        batch_size=args.batch_size, trial_timeout=args.trial_timeout,
        progress=not args.no_progress, retry_errors=args.retry_errors,
    ))
    for line in provenance_lines(outcome.report):
        print(line)
    print()
    print(format_table(outcome.report))
    print()
    print(f"report: {outcome.out_dir}/report.md ({outcome.ran} trials run, {outcome.reused} reused from {args.store})")
    return 0


def _datasets(args: argparse.Namespace) -> int:
    from audit.datasets import REGISTRY, dataset_status, fetch, format_registry_table, resolve_data_dir

    if args.fetch:
        for name in args.fetch:
            print(f"{name}: {fetch(name)}")
        return 0
    print(f"data directory: {resolve_data_dir(args.data_dir)}")
    print(format_registry_table([dataset_status(name, args.data_dir) for name in REGISTRY]))
    return 0


def _protocols(args: argparse.Namespace) -> int:
    from audit.protocols import available_protocols, load_protocol

    if args.name:
        protocol = load_protocol(args.name)
        if args.json:
            print(json.dumps(protocol.to_data(), indent=2, default=str))
        else:
            print(f"# {protocol.path}  (spec hash {protocol.spec_hash})")
            print(protocol.path.read_text(), end="")
        return 0
    for name in available_protocols():
        protocol = load_protocol(name)
        print(f"{name:10s} {protocol.title}")
        print(f"{'':10s} strategies: {', '.join(protocol.strategies)}; AUBC {protocol.aubc_variant}; "
              f"pool {protocol.split.pool_order}; scaling task={protocol.scaling['task']} "
              f"query={protocol.scaling['query']}")
    return 0


def _strategies(args: argparse.Namespace) -> int:
    from audit.capabilities import format_matrix, matrix

    print(format_matrix(matrix([args.protocol] if args.protocol else None)))
    return 0


def _crosscheck(args: argparse.Namespace) -> int:
    from audit.crosscheck import crosscheck, format_crosscheck

    report = crosscheck(args.dataset, trials=args.trials, jobs=args.jobs, data_dir=args.data_dir,
                        store_path=args.store, out=args.out, progress=not args.no_progress)
    print(format_crosscheck(report))
    print(f"\nreport: {report['out_dir']}/crosscheck.md")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="audit", description="Replay published active-learning protocols "
                                     "through the real libraries and audit the published numbers.")
    sub = parser.add_subparsers(dest="command", required=True)

    rep = sub.add_parser("reproduce", help="replay a protocol on one data set and compare with the paper")
    rep.add_argument("protocol", help="protocol name (see `audit protocols`) or a protocol .toml file")
    rep.add_argument("--dataset", required=True, help="data set name (see `audit datasets`)")
    rep.add_argument("--strategies", help="comma-separated strategy ids (default: all available in the protocol)")
    rep.add_argument("--trials", type=int, help="number of trials (default: the protocol's, 100 or 10 by size)")
    rep.add_argument("--jobs", type=int, default=1, help="parallel worker processes (default 1)")
    rep.add_argument("--batch-size", type=int, help="override the protocol's batch size (zhan2021 used 1, 2, 5, 10)")
    rep.add_argument("--trial-timeout", type=float, help="seconds per trial before it is recorded as TLE "
                     "(default: no limit)")
    rep.add_argument("--data-dir", help="directory of the LIBSVM files (default: $AL_AUDIT_DATA_DIR, "
                     "then ../shared/datasets, then the user cache)")
    rep.add_argument("--store", default=".audit-store.sqlite", help="SQLite results store (default %(default)s)")
    rep.add_argument("--out", help="report directory (default reports/<protocol>-<dataset>)")
    rep.add_argument("--retry-errors", action="store_true", help="rerun trials stored as errors")
    rep.add_argument("--no-progress", action="store_true", help="no progress bar")
    rep.set_defaults(func=_reproduce)

    ds = sub.add_parser("datasets", help="the data-set registry with presence and checksum status")
    ds.add_argument("--data-dir", help="directory of the LIBSVM files")
    ds.add_argument("--fetch", nargs="+", metavar="NAME", help="download data sets into the user cache")
    ds.set_defaults(func=_datasets)

    st = sub.add_parser("strategies", help="the capability matrix: every strategy, its binding and status")
    st.add_argument("--protocol", help="only this protocol (default: all)")
    st.set_defaults(func=_strategies)

    cc = sub.add_parser("crosscheck", help="the same strategy through every library that offers it")
    cc.add_argument("--dataset", required=True, help="data set name")
    cc.add_argument("--trials", type=int, default=5, help="trials per implementation (default %(default)s)")
    cc.add_argument("--jobs", type=int, default=1, help="parallel worker processes (default 1)")
    cc.add_argument("--data-dir", help="directory of the LIBSVM files")
    cc.add_argument("--store", default=".audit-store.sqlite", help="SQLite results store (default %(default)s)")
    cc.add_argument("--out", help="report directory (default reports/crosscheck-<dataset>)")
    cc.add_argument("--no-progress", action="store_true", help="no progress bar")
    cc.set_defaults(func=_crosscheck)

    pr = sub.add_parser("protocols", help="list protocols; `audit protocols show NAME` prints one")
    pr.add_argument("action", nargs="?", choices=["show"], help="show one protocol")
    pr.add_argument("name", nargs="?", help="protocol name")
    pr.add_argument("--json", action="store_true", help="print the parsed spec as JSON")
    pr.set_defaults(func=_protocols)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "action", None) == "show" and not args.name:
        parser.error("protocols show needs a protocol name")
    try:
        return args.func(args)
    except AuditError as exc:
        print(f"audit: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("audit: interrupted; finished trials are saved, rerun the same command to resume", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
