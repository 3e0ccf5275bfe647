"""`audit baseline create` and `audit gate`: record a suite, then gate an upgrade against it."""
from __future__ import annotations

import argparse

from audit.cli.options import COUNT, number


def _baseline(args: argparse.Namespace) -> int:
    from audit.gate.baseline import DEFAULT_BASELINE_DIR, create_baseline
    from audit.gate.suite import load_suite

    suite = load_suite(args.suite)
    out = args.out or f"{DEFAULT_BASELINE_DIR}/{suite.name}.json"  # in the current directory, not the project
    baseline = create_baseline(suite, out, force=args.force, create_parents=args.out is None, jobs=args.jobs,
                               data_dir=args.data_dir, progress=not args.no_progress)
    print(f"baseline {out}: suite {suite.name}, protocol {suite.protocol.name} (spec {suite.protocol.spec_hash}), "
          f"{len(suite.datasets)} data sets x {len(suite.strategies)} strategies x "
          f"{suite.trials or len(suite.seeds)} trials, {baseline['seconds']:g} s")
    print("environment: " + ", ".join(f"{k} {v}" for k, v in baseline["environment"].items()))
    return 0


def _gate(args: argparse.Namespace) -> int:
    from audit.gate.junit import format_summary
    from audit.gate.verdicts import gate

    report = gate(args.baseline, margin=args.margin, alpha=args.alpha, strict=args.strict, protocol=args.protocol,
                  jobs=args.jobs, data_dir=args.data_dir, out=args.out, progress=not args.no_progress)
    print(format_summary(report))
    print(f"reports: {report['out_dir']}/summary.md, junit.xml, gate.json; exit {report['exit_code']}")
    return report["exit_code"]


def add_commands(sub: argparse._SubParsersAction) -> None:
    bl = sub.add_parser("baseline", help="replay a suite here and record it for `audit gate` (CI gating)")
    bl.add_argument("action", choices=["create"], help="create: replay the suite and write the baseline file")
    bl.add_argument("--suite", required=True, help="a shipped suite (smoke, standard) or a suite .toml/.yaml file")
    bl.add_argument("--out", help="baseline file (default al-audit-baselines/<suite>.json in the current directory)")
    bl.add_argument("--force", action="store_true", help="overwrite a baseline file git tracks (one al-audit wrote)")
    bl.add_argument("--jobs", type=COUNT, default=1, help="parallel worker processes (default 1)")
    bl.add_argument("--data-dir", help="directory of the LIBSVM files")
    bl.add_argument("--no-progress", action="store_true", help="no progress bar")
    bl.set_defaults(func=_baseline)

    gt = sub.add_parser("gate", help="replay a baseline here: identical, equivalent, drift or inconclusive per cell")
    gt.add_argument("--baseline", required=True, help="baseline file written by `audit baseline create`")
    gt.add_argument("--margin", type=number(0.0, 1.0, "a number between 0 and 1 (an AUBC difference)"), default=0.005, help="equivalence margin on AUBC (default %(default)s)")
    gt.add_argument("--alpha", type=number(0.0, 0.5, "a level between 0 and 0.5"), default=0.05, help="level of the equivalence and difference tests "
                    "(default %(default)s)")
    gt.add_argument("--strict", action="store_true", help="exit 2 when a cell is inconclusive")
    gt.add_argument("--protocol", help="replay under this protocol (name or .toml file) instead of the baseline's "
                    "recorded spec, e.g. one with a changed default; the suite's strategies and bindings are kept")
    gt.add_argument("--jobs", type=COUNT, default=1, help="parallel worker processes (default 1)")
    gt.add_argument("--data-dir", help="directory of the LIBSVM files")
    gt.add_argument("--out", help="report directory for summary.md, junit.xml, gate.json (default reports/gate-<suite>)")
    gt.add_argument("--no-progress", action="store_true", help="no progress bar")
    gt.set_defaults(func=_gate)
