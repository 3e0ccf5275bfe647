"""`audit run` and `audit status`: a whole benchmark on any executor (audit/engine/benchmark.py);
`audit summary`: its data set x strategy matrix of verdicts, from the store (audit/analysis/summary.py)."""
from __future__ import annotations

import argparse

from audit.cli.options import (
    COUNT,
    SECONDS,
    csv_list,
    force_option,
    integer,
    scheduler_address,
)


def _summary(args: argparse.Namespace) -> int:
    from audit.analysis.summary import ALL, SummaryRequest, run_summary
    from audit.report.summary import terminal_text

    datasets = args.datasets.strip() if args.datasets else None
    outcome = run_summary(SummaryRequest(
        protocol=args.protocol, datasets=ALL if datasets == ALL else csv_list(datasets) if datasets else None,
        strategies=csv_list(args.strategies) if args.strategies else None, trials=args.trials, store=args.store,
        out=args.out, data_dir=args.data_dir, force=args.force))
    print(terminal_text(outcome.summary))
    print()
    print(f"report: {outcome.out_dir}/ {', '.join(outcome.files)}")
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    def scale_out(handler: str):
        def call(args: argparse.Namespace) -> int:
            from audit.engine import benchmark as scale_run

            return getattr(scale_run, handler)(args)
        return call

    ru = sub.add_parser("run", help="a protocol's whole benchmark (every data set x strategy x trial the store "
                        "lacks) on a local pool or a Dask cluster; resumable")
    ru.add_argument("--protocol", required=True, help="protocol name or .toml file")
    ru.add_argument("--datasets", help="comma-separated data sets (default: every one the protocol covers)")
    ru.add_argument("--strategies", help="comma-separated strategy ids (default: all available)")
    ru.add_argument("--trials", type=COUNT, help="trials per cell (default: the protocol's, 100 or 10 by size)")
    ru.add_argument("--executor", choices=["local", "dask"], default="local",
                    help="local process pool (default) or dask.distributed")
    ru.add_argument("--scheduler", type=scheduler_address, help="Dask scheduler address (default with --executor dask: a LocalCluster)")
    ru.add_argument("--workers", type=COUNT, default=1, help="local processes or LocalCluster workers (default 1)")
    ru.add_argument("--retries", type=integer(0), default=2, help="extra attempts of a trial whose worker died or "
                    "that raised outside the strategy (default %(default)s)")
    ru.add_argument("--max-trial-seconds", type=SECONDS, help="seconds per trial before it is recorded as TLE")
    ru.add_argument("--data-dir", help="directory of the LIBSVM files")
    ru.add_argument("--store", default=".audit-store.sqlite", help="SQLite results store (default %(default)s)")
    ru.add_argument("--retry-errors", action="store_true", help="rerun trials stored as errors")
    ru.add_argument("--no-progress", action="store_true", help="no progress display")
    ru.set_defaults(func=scale_out("run_command"))
    ss = sub.add_parser("status", help="progress of the latest `audit run` on a store, from another process")
    ss.add_argument("--store", default=".audit-store.sqlite", help="SQLite results store (default %(default)s)")
    ss.set_defaults(func=scale_out("status_command"))

    sm = sub.add_parser("summary", help="a protocol's data set x strategy matrix of verdicts from the store (no "
                        "trial is run): CSV, heatmap, Markdown and HTML")
    sm.add_argument("--protocol", required=True, help="protocol name or .toml file")
    sm.add_argument("--datasets", help="comma-separated data sets, or 'all' for every one the protocol covers "
                    "(default: those with trials in the store)")
    sm.add_argument("--strategies", help="comma-separated strategy ids (default: every one of the protocol)")
    sm.add_argument("--trials", type=COUNT, help="use the first N valid trial seeds of each data set, as "
                    "`audit reproduce --trials N` would (default: the protocol's count)")
    sm.add_argument("--store", default=".audit-store.sqlite", help="SQLite results store (default %(default)s)")
    sm.add_argument("--out", help="report directory (default reports/<protocol>-summary)")
    sm.add_argument("--data-dir", help="directory of the LIBSVM files (the trial seeds depend on the labels)")
    force_option(sm)
    sm.set_defaults(func=_summary)
