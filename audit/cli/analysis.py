"""The analyses across strategies and models: crosscheck, usefulness, rank, wtl,
runs-needed, compat."""
from __future__ import annotations

import argparse

from audit.cli.options import COUNT, csv_list, references_option, replay_options
from audit.errors import AuditError


def _crosscheck(args: argparse.Namespace) -> int:
    from audit.analysis.crosscheck import crosscheck, format_crosscheck

    report = crosscheck(args.dataset, trials=args.trials, jobs=args.jobs, data_dir=args.data_dir,
                        store_path=args.store, out=args.out, progress=not args.no_progress)
    print(format_crosscheck(report))
    print(f"\nreport: {report['out_dir']}/crosscheck.md")
    return 0


def _stats(args: argparse.Namespace) -> int:
    from audit.analysis.strategy_stats import run_command

    datasets = csv_list(args.datasets) if hasattr(args, "datasets") else [args.dataset]
    text, out_dir = run_command(args.command, args.protocol, datasets,
                                csv_list(args.strategies) if args.strategies else None, args.trials, args.jobs,
                                args.data_dir, args.store, args.out, not args.no_progress,
                                getattr(args, "samples", 1000), getattr(args, "references", None))
    print(text)
    print(f"\ntables: {out_dir}/{args.command}.csv")
    return 0


def _compat(args: argparse.Namespace) -> int:
    from audit.analysis.compat import (
        CompatRequest,
        format_grid,
        format_summary,
        run_compat,
    )
    from audit.engine.models import split_specs

    if bool(args.dataset) == bool(args.datasets):
        raise AuditError("give either --dataset NAME or --datasets a,b,c")
    reports, summary = run_compat(CompatRequest(
        protocol=args.protocol, datasets=[args.dataset] if args.dataset else csv_list(args.datasets),
        models=split_specs(args.models), strategy=args.strategy, trials=args.trials, jobs=args.jobs,
        data_dir=args.data_dir, store=args.store, out=args.out, progress=not args.no_progress,
    ))
    for report in reports:
        print(format_grid(report))
        print(f"report: {report['out_dir']}/report.md, compat.csv, compat.png\n")
    if summary is not None:
        print(format_summary(summary))
        print(f"summary: {summary['out_dir']}/summary.md")
    return 0


def _claims(args: argparse.Namespace) -> int:
    from audit.analysis.claims import evaluate, format_claims

    given = {name: getattr(args, name) for name in ("store", "samples", "datasets", "learners", "strategies",
                                                    "trials", "jobs")}
    print(format_claims(evaluate(args.paper, **given)))
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    from audit.analysis.claims import REGISTRY

    cl = sub.add_parser("claims", help="a paper's claims, each with a verdict (support, contradiction, inconclusive, "
                                       "not testable here) and the figures behind it; each paper takes the options "
                                       "it names")
    cl.add_argument("paper", help=f"whose claims (known: {', '.join(sorted(REGISTRY))})")
    cl.add_argument("--store", default=".audit-store.sqlite", help="SQLite results store (default %(default)s)")
    cl.add_argument("--samples", type=COUNT, help="cdalbench: random draws per resampling figure (default 1000)")
    cl.add_argument("--datasets", type=csv_list, help="alpbench: comma-separated data sets (default: the shared "
                                                      "files that stand for an ALPBench data set)")
    cl.add_argument("--learners", type=csv_list, help="alpbench: comma-separated learners of the protocol "
                                                      "(default: the study's)")
    cl.add_argument("--strategies", type=csv_list, help="alpbench: comma-separated strategies (default: the "
                                                        "study's nine)")
    cl.add_argument("--trials", type=COUNT, help="alpbench: trials per pipeline (default: the protocol's)")
    cl.add_argument("--jobs", type=COUNT, help="alpbench: parallel worker processes (default 1)")
    cl.set_defaults(func=_claims)

    cc = sub.add_parser("crosscheck", help="the same strategy through every library that offers it")
    cc.add_argument("--dataset", required=True, help="data set name")
    cc.add_argument("--trials", type=COUNT, default=5, help="trials per implementation (default %(default)s)")
    cc.add_argument("--jobs", type=COUNT, default=1, help="parallel worker processes (default 1)")
    cc.add_argument("--data-dir", help="directory of the LIBSVM files")
    cc.add_argument("--store", default=".audit-store.sqlite", help="SQLite results store (default %(default)s)")
    cc.add_argument("--out", help="report directory (default reports/crosscheck-<dataset>)")
    cc.add_argument("--no-progress", action="store_true", help="no progress bar")
    cc.set_defaults(func=_crosscheck)

    for name, help_text in (("usefulness", "AUBC gain over Uniform per strategy and data set, paired t-test "
                                           "(lu2023 Section 5.3)"),
                            ("rank", "average rank by trial, Friedman test, Nemenyi CD (lu2023 Table 3)"),
                            ("wtl", "pairwise win/tie/loss over data sets, 0.5%% tie band (zhan2021 Table 4)"),
                            ("runs-needed", "how often k trials change the ranking or the sign against Uniform")):
        sp = sub.add_parser(name, help=help_text)
        sp.add_argument("--protocol", required=True, help="protocol name or .toml file")
        if name == "runs-needed":
            sp.add_argument("--dataset", required=True, help="data set name")
            sp.add_argument("--samples", type=COUNT, default=1000, help="subsets per k (default %(default)s)")
        else:
            sp.add_argument("--datasets", required=True, help="comma-separated data set names")
        sp.add_argument("--strategies", help="comma-separated strategy ids (default: every query strategy "
                        "that runs here, the reference oracles bso and greedy-oracle left out)")
        replay_options(sp, f"output directory (default reports/{name}-<protocol>)")
        if name in ("usefulness", "rank"):
            references_option(sp, "your own published table (the reference_results/ schema; see `audit references "
                              "check`): adds a published column, " + (
                                  "the published gain mean(strategy) - mean(uniform)" if name == "usefulness"
                                  else "the rank of each strategy's published mean"))
        sp.set_defaults(func=_stats)

    cp = sub.add_parser("compat", help="query-model x task-model grid for uncertainty sampling (lu2023 Section 5.1)")
    cp.add_argument("--protocol", required=True, help="protocol name or .toml file (its splits, budget, AUBC)")
    cp.add_argument("--dataset", help="one data set: its grid, heatmap and per-column verdicts")
    cp.add_argument("--datasets", help="several data sets: each grid, then the cross-data-set summary")
    cp.add_argument("--models", default="lr,svm-rbf,rf", help="comma-separated model specs, used both as query "
                    "and task models: a name (default %(default)s, lu2023's specs; knn, gbdt, lda, ...: "
                    "scikit-learn defaults), NAME(param=value, ...), or a scikit-learn class path such as "
                    "sklearn.naive_bayes.GaussianNB")
    cp.add_argument("--strategy", default="us-margin", help="query strategy run on each query model "
                    "(default %(default)s)")
    replay_options(cp, "output directory (default reports/compat-<protocol>-<dataset>)")
    cp.set_defaults(func=_compat)
