"""The `audit` command line. Errors the user can fix print one line and exit 2."""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import select
import signal
import sys
import time
from importlib import metadata
from typing import Callable, Sequence

from audit.version import __version__
from audit.errors import AuditError

EXIT_ERROR = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a process Ctrl-C ended
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, as a shell reports a process its closed pipe ended


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors in the one-line form of every other bad input."""

    def error(self, message: str):
        self.exit(EXIT_ERROR, f"audit: error: {message} (see `{self.prog} --help`)\n")


def _integer(minimum: int) -> Callable[[str], int]:
    """An option type: an integer of at least ``minimum``, checked when the command line is read."""
    wanted = "a positive integer" if minimum == 1 else f"an integer of at least {minimum}"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {wanted}, not {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be {wanted}, not {text!r}")
        return value

    return parse


def _number(low: float, high: float, what: str) -> Callable[[str], float]:
    """An option type: a finite number in the open interval (low, high); NaN and infinities
    never pass, so no such value reaches a trial or the store."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {what}, not {text!r}") from None
        if not (math.isfinite(value) and low < value < high):
            raise argparse.ArgumentTypeError(f"must be {what}, not {text!r}")
        return value

    return parse


_COUNT = _integer(1)  # trials, jobs, workers, batch size, samples
_SECONDS = _number(0.0, math.inf, "a positive finite number of seconds")
DASK_SCHEMES = ("tcp", "tls", "ws", "wss", "ucx")
_ADDRESS = re.compile(r"(?:(?P<scheme>[a-z]+)://)?(?P<host>[A-Za-z0-9_.\-]+|\[[0-9A-Fa-f:.]+\]):(?P<port>\d{1,5})")


def _scheduler_address(text: str) -> str:
    """An option type: a Dask scheduler address, [SCHEME://]HOST:PORT, checked before any connection."""
    match = _ADDRESS.fullmatch(text)
    if not match or match["scheme"] not in (None, *DASK_SCHEMES) or not 0 < int(match["port"]) < 65536:
        raise argparse.ArgumentTypeError(f"must be a Dask scheduler address [SCHEME://]HOST:PORT such as "
                                         f"tcp://127.0.0.1:8786 (SCHEME one of {', '.join(DASK_SCHEMES)}), "
                                         f"not {text!r}")
    return text


VERSIONED = ("libact", "alipy", "scikit-activeml", "scikit-learn")  # the AL libraries and their models


class _Version(argparse.Action):
    """`audit --version`: this tool's version and the installed libraries', read from their
    package metadata (importing them would take seconds)."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        def version(name: str) -> str:
            try:
                return metadata.version(name)
            except metadata.PackageNotFoundError:
                return "absent"

        print(f"al-audit {__version__} ({', '.join(f'{n} {version(n)}' for n in VERSIONED)})")
        parser.exit()


TRIALS_KEPT = "finished trials are saved, rerun the same command to resume"
TEMPORARY_TRIALS = "its trials ran in a temporary store and are not kept"
# What a Ctrl-C leaves of each command's work, said on its one line.
KEPT_ON_INTERRUPT = {"reproduce": TRIALS_KEPT, "crosscheck": TRIALS_KEPT, "usefulness": TRIALS_KEPT,
                     "rank": TRIALS_KEPT, "wtl": TRIALS_KEPT, "runs-needed": TRIALS_KEPT, "diagnose": TRIALS_KEPT,
                     "compat": TRIALS_KEPT, "run": TRIALS_KEPT, "baseline": TEMPORARY_TRIALS,
                     "gate": TEMPORARY_TRIALS}
FETCH_STOPPED = "the download in progress was stopped and its partial file removed; data sets fetched before it are kept"


def _interrupted_line(args: argparse.Namespace) -> str:
    """The one line a Ctrl-C prints: what it stopped and what is kept."""
    kept = FETCH_STOPPED if args.command == "datasets" and args.fetch else KEPT_ON_INTERRUPT.get(args.command)
    return "audit: interrupted" + (f"; {kept}" if kept else "")


class _Interrupts:
    """Ctrl-C, which a terminal sends to the whole process group; workers ignore it (see
    audit.workers), so this process alone stops. The first raises KeyboardInterrupt, so
    clean-up runs (the pool's workers are ended, no trial is stored in part); a second
    while the command stops leaves at once, with the same one line and no traceback.
    `uv run` forwards the terminal's SIGINT to this process, which so gets each Ctrl-C
    twice within moments: a SIGINT within ``SAME_CTRL_C_SECONDS`` of the first is that
    same Ctrl-C and changes nothing."""

    SAME_CTRL_C_SECONDS = 1.0

    def __init__(self):
        self.line = "audit: interrupted"
        self.signalled: float | None = None  # when the first SIGINT came
        self._told = False

    def first(self, signum, frame):
        self.signalled = time.monotonic()
        signal.signal(signal.SIGINT, self.second)
        raise KeyboardInterrupt

    def second(self, signum, frame):
        if time.monotonic() - self.signalled < self.SAME_CTRL_C_SECONDS:
            return
        self.tell()
        os._exit(EXIT_INTERRUPTED)

    def tell(self) -> None:
        if not self._told:
            self._told = True
            os.write(sys.stderr.fileno(), f"{self.line}\n".encode())  # no buffer a handler could reenter


def _reader_gone(stream) -> bool:
    """Whether ``stream`` is a pipe whose reading end is closed (the kernel reports POLLERR)."""
    try:
        poller = select.poll()
        poller.register(stream.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (OSError, ValueError):  # not a file descriptor, or already closed
        return False


def _cores_here() -> int:
    """The cores this process may run on (its affinity mask, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no sched_getaffinity (macOS)
        return os.cpu_count() or 1


def _cap_to_cores(args: argparse.Namespace) -> int:
    """The worker processes to start on this machine: ``--jobs`` (``audit run``: ``--workers``
    unless they run on a Dask scheduler elsewhere), capped, with one warning, at the cores
    here; more would only take turns, each trial slower and the whole no sooner (results
    do not depend on the count)."""
    option = "workers" if args.command == "run" else "jobs"
    asked = getattr(args, option, 1)
    if getattr(args, "scheduler", None):
        return asked
    cores = _cores_here()
    if asked > cores:
        print(f"audit: warning: --{option} {asked} is more than the {cores} core{'s' * (cores != 1)} this process "
              f"can use; running {cores}", file=sys.stderr)
        setattr(args, option, cores)
        return cores
    return asked

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
        progress=not args.no_progress, retry_errors=args.retry_errors, no_diagnose=args.no_diagnose,
        force=args.force,
        references=args.references,
    ))
    for line in provenance_lines(outcome.report):
        print(line)
    print()
    print(format_table(outcome.report))
    print()
    print(f"report: {outcome.out_dir}/ {', '.join(outcome.files)} "
          f"({outcome.ran} trials run, {outcome.reused} reused from {args.store})")
    return 0


def _datasets(args: argparse.Namespace) -> int:
    from audit.datasets import REGISTRY, dataset_status, fetch, format_registry_table, resolve_data_dir

    if args.fetch:
        for name in args.fetch:
            print(f"{name}: {fetch(name)}")
        return 0
    if args.split:
        from audit.protocols import load_protocol  # imports scikit-learn: seconds, so only when asked

        protocol = load_protocol(args.split)
    print(f"data directory: {resolve_data_dir(args.data_dir)}")
    statuses = [dataset_status(name, args.data_dir) for name in REGISTRY]
    if args.split:
        for status in statuses:
            if status["status"] == "ok":
                status["test_in_train"] = _test_in_train(protocol, status["name"], args.data_dir)
    print(format_registry_table(statuses))
    split = f"the {args.split} split of trial seed 0" if args.split else "give --split PROTOCOL"
    print(f"dup rows: rows equal (features and label) to an earlier row; test in train: test rows whose feature "
          f"vector is also a training row's ({split})")
    return 0


def _test_in_train(protocol, name: str, data_dir: str | None) -> int | None:
    """None when the protocol skips trial seed 0 on this data set."""
    import numpy as np

    from audit.datasets import load_dataset, test_rows_seen_in_training
    from audit.splits import make_split

    data = load_dataset(name, data_dir)
    split = make_split(protocol, data.y, 0)
    if isinstance(split, str):
        return None
    return test_rows_seen_in_training(data.X, split.test, np.concatenate([split.labeled, split.pool]))


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


def _references(args: argparse.Namespace) -> int:
    from audit.datasets import REGISTRY
    from audit.protocols import load_protocol
    from audit.references import read_user_table

    protocol = load_protocol(args.protocol)
    refs = read_user_table(args.file, REGISTRY, protocol.strategies)
    cells = {(r.dataset, r.strategy) for r in refs if r.mean is not None}
    print(f"{args.file}: {len(refs)} rows valid for {protocol.name} ({len(cells)} data set x strategy cells "
          f"with a mean; papers {', '.join(sorted({r.paper for r in refs}))}; "
          f"metrics {', '.join(sorted({r.metric for r in refs}))})")
    return 0


def _check_strategy(args: argparse.Namespace) -> int:
    import adapters
    from adapters.testing import strategy_checks

    cls = adapters.strategy_class(args.implementation)  # one line and exit 2 when it does not load
    try:
        params = json.loads(args.params) if args.params else {}
    except json.JSONDecodeError as exc:
        raise AuditError(f"--params is not JSON: {exc}") from None
    if not isinstance(params, dict):
        raise AuditError("--params must be a JSON object, e.g. '{\"beta\": 2.0}'")
    checks = strategy_checks(cls, [params] if params else ())
    failed = 0
    for name, check in checks:
        try:
            check()
            print(f"pass  {name}")
        except Exception as exc:  # a breach (AssertionError) or the strategy's own error
            failed += 1
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            print(f"FAIL  {name}: {type(exc).__name__}: {reason}")
    print(f"{cls.__module__}:{cls.__qualname__} ({cls.library_version()}): {len(checks) - failed} of "
          f"{len(checks)} checks passed")
    return 1 if failed else 0


def _strategies(args: argparse.Namespace) -> int:
    from audit.capabilities import format_matrix, format_plugins, matrix

    print(format_matrix(matrix([args.protocol] if args.protocol else None)))
    print()
    print(format_plugins())
    return 0


def _crosscheck(args: argparse.Namespace) -> int:
    from audit.crosscheck import crosscheck, format_crosscheck

    report = crosscheck(args.dataset, trials=args.trials, jobs=args.jobs, data_dir=args.data_dir,
                        store_path=args.store, out=args.out, progress=not args.no_progress)
    print(format_crosscheck(report))
    print(f"\nreport: {report['out_dir']}/crosscheck.md")
    return 0


def _stats(args: argparse.Namespace) -> int:
    from audit.analyses import run_command

    datasets = _csv(args.datasets) if hasattr(args, "datasets") else [args.dataset]
    text, out_dir = run_command(args.command, args.protocol, datasets,
                                _csv(args.strategies) if args.strategies else None, args.trials, args.jobs,
                                args.data_dir, args.store, args.out, not args.no_progress,
                                getattr(args, "samples", 1000))
    print(text)
    print(f"\ntables: {out_dir}/{args.command}.csv")
    return 0


def _lint(args: argparse.Namespace) -> int:
    from audit.datasets import load_dataset
    from audit.diagnose.detectors import lint
    from audit.protocols import load_protocol

    data = load_dataset(args.dataset, args.data_dir) if args.dataset else None
    for finding in lint(load_protocol(args.protocol), data):
        print(finding.line())
    return 0


def _lint_references(args: argparse.Namespace) -> int:
    from audit.reference_lint import lint_references, resolve_paper

    for finding in lint_references(resolve_paper(args.paper)):
        print(finding.line())
    return 0


def _diagnose(args: argparse.Namespace) -> int:
    from audit.protocols import load_protocol
    from audit.reproduce import ReproduceRequest, reproduce

    _lint(args)
    protocol = load_protocol(args.protocol)
    if not protocol.released:
        print(f"{protocol.name} names no released-code protocol ([diagnosis] released): detectors only")
        return 0
    outcome = reproduce(ReproduceRequest(
        protocol=protocol, dataset=args.dataset, strategies=_csv(args.strategies) if args.strategies else None,
        trials=args.trials, jobs=args.jobs, data_dir=args.data_dir, store=args.store, out=args.out,
        progress=not args.no_progress, force=args.force,
    ))
    for cell in outcome.report["strategies"]:
        if cell.get("status") == "ok":
            print(f"{cell['strategy']}: {cell['verdict']}"
                  + (f"; {cell['diagnosis']['summary']}" if cell.get("diagnosis") else ""))
    print(f"report: {outcome.out_dir}/ {', '.join(outcome.files)}")
    return 0


def _baseline(args: argparse.Namespace) -> int:
    from audit.gate import DEFAULT_BASELINE_DIR, create_baseline, load_suite

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
    from audit.gate import format_summary, gate

    report = gate(args.baseline, margin=args.margin, alpha=args.alpha, strict=args.strict, protocol=args.protocol,
                  jobs=args.jobs, data_dir=args.data_dir, out=args.out, progress=not args.no_progress)
    print(format_summary(report))
    print(f"reports: {report['out_dir']}/summary.md, junit.xml, gate.json; exit {report['exit_code']}")
    return report["exit_code"]


def _compat(args: argparse.Namespace) -> int:
    from audit.compat import CompatRequest, format_grid, format_summary, run_compat
    from audit.models import split_specs

    if bool(args.dataset) == bool(args.datasets):
        raise AuditError("give either --dataset NAME or --datasets a,b,c")
    reports, summary = run_compat(CompatRequest(
        protocol=args.protocol, datasets=[args.dataset] if args.dataset else _csv(args.datasets),
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


def _replay_options(sp: argparse.ArgumentParser, out_help: str) -> None:
    """The options every replaying command shares."""
    sp.add_argument("--trials", type=_COUNT, help="number of trials (default: the protocol's)")
    sp.add_argument("--jobs", type=_COUNT, default=1, help="parallel worker processes (default 1)")
    sp.add_argument("--data-dir", help="directory of the LIBSVM files")
    sp.add_argument("--store", default=".audit-store.sqlite", help="SQLite results store (default %(default)s)")
    sp.add_argument("--out", help=out_help)
    sp.add_argument("--no-progress", action="store_true", help="no progress bar")


def _force_option(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--force", action="store_true", help="replace an earlier al-audit report in the output "
                    "directory even when it held strategies or trials this one lacks")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="audit", description="Replay published active-learning protocols "
                                     "through the real libraries and audit the published numbers.")
    parser.add_argument("--version", action=_Version, help="print the versions of al-audit and the AL libraries")
    sub = parser.add_subparsers(dest="command", required=True)

    rep = sub.add_parser("reproduce", help="replay a protocol on one data set and compare with the paper")
    rep.add_argument("protocol", help="protocol name (see `audit protocols`) or a protocol .toml file")
    rep.add_argument("--dataset", required=True, help="data set name (see `audit datasets`)")
    rep.add_argument("--strategies", help="comma-separated strategy ids (default: all available in the protocol)")
    rep.add_argument("--trials", type=_COUNT, help="number of trials (default: the protocol's, 100 or 10 by size)")
    rep.add_argument("--jobs", type=_COUNT, default=1, help="parallel worker processes (default 1)")
    rep.add_argument("--batch-size", type=_COUNT, help="override the protocol's batch size (zhan2021 used 1, 2, 5, 10)")
    rep.add_argument("--trial-timeout", type=_SECONDS, help="seconds per trial before it is recorded as TLE "
                     "(default: no limit)")
    rep.add_argument("--data-dir", help="directory of the LIBSVM files (default: $AL_AUDIT_DATA_DIR, "
                     "then ../shared/datasets, then the user cache)")
    rep.add_argument("--store", default=".audit-store.sqlite", help="SQLite results store (default %(default)s)")
    rep.add_argument("--out", help="report directory (default reports/<protocol>-<dataset>)")
    rep.add_argument("--retry-errors", action="store_true", help="rerun trials stored as errors")
    _force_option(rep)
    rep.add_argument("--references", metavar="FILE.csv", help="compare with your own published table "
                     "(the reference_results/ schema; see `audit references check`) instead of the shipped ones")
    rep.add_argument("--no-progress", action="store_true", help="no progress bar")
    rep.set_defaults(func=_reproduce)

    ds = sub.add_parser("datasets", help="the data-set registry with presence and checksum status")
    ds.add_argument("--data-dir", help="directory of the LIBSVM files")
    ds.add_argument("--fetch", nargs="+", metavar="NAME", help="download data sets into the user cache")
    ds.add_argument("--split", metavar="PROTOCOL", help="also count test rows also in training, on this "
                    "protocol's split of trial seed 0 (e.g. lu2023)")
    ds.set_defaults(func=_datasets)

    st = sub.add_parser("strategies", help="the capability matrix: every strategy, its binding and status")
    st.add_argument("--protocol", help="only this protocol (default: all)")
    st.set_defaults(func=_strategies)

    ck = sub.add_parser("check-strategy", help="run the adapter conformance checks on a strategy class "
                        "(exit 0: all pass, 1: a breach)")
    ck.add_argument("implementation", help="package.module:ClassName, an entry point's name, or a shipped "
                    "implementation (e.g. native.margin)")
    ck.add_argument("--params", help="also query with these parameters, a JSON object (e.g. '{\"beta\": 2}')")
    ck.set_defaults(func=_check_strategy)

    cc = sub.add_parser("crosscheck", help="the same strategy through every library that offers it")
    cc.add_argument("--dataset", required=True, help="data set name")
    cc.add_argument("--trials", type=_COUNT, default=5, help="trials per implementation (default %(default)s)")
    cc.add_argument("--jobs", type=_COUNT, default=1, help="parallel worker processes (default 1)")
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
            sp.add_argument("--samples", type=_COUNT, default=1000, help="subsets per k (default %(default)s)")
        else:
            sp.add_argument("--datasets", required=True, help="comma-separated data set names")
        sp.add_argument("--strategies", help="comma-separated strategy ids (default: every query strategy "
                        "that runs here, the reference oracles bso and greedy-oracle left out)")
        _replay_options(sp, f"output directory (default reports/{name}-<protocol>)")
        sp.set_defaults(func=_stats)

    rep.add_argument("--no-diagnose", action="store_true",
                     help="no counterfactual replays of discrepant cells (see `audit diagnose`)")
    li = sub.add_parser("lint", help="static detectors of settings known to move published AUBCs")
    li.add_argument("protocol", help="protocol name or .toml file")
    li.add_argument("--dataset", help="data set for the data-dependent detectors (pool order, duplicates...)")
    li.add_argument("--data-dir", help="directory of the LIBSVM files")
    li.set_defaults(func=_lint)
    lr = sub.add_parser("lint-references", help="detectors that read a published table: copied columns, "
                        "BEST/WORST labels that are not the extremes, means off [0, 1]")
    lr.add_argument("paper", help="paper (lu2023, zhan2021) or a protocol that compares with one")
    lr.set_defaults(func=_lint_references)
    dg = sub.add_parser("diagnose", help="detectors, then replay discrepant cells one released-code knob at a time")
    dg.add_argument("protocol", help="protocol name or .toml file")
    dg.add_argument("--dataset", required=True, help="data set name")
    dg.add_argument("--strategies", help="comma-separated strategy ids (default: all available)")
    _replay_options(dg, "report directory (default reports/<protocol>-<dataset>)")
    _force_option(dg)
    dg.set_defaults(func=_diagnose)

    bl = sub.add_parser("baseline", help="replay a suite here and record it for `audit gate` (CI gating)")
    bl.add_argument("action", choices=["create"], help="create: replay the suite and write the baseline file")
    bl.add_argument("--suite", required=True, help="a shipped suite (smoke, standard) or a suite .toml/.yaml file")
    bl.add_argument("--out", help="baseline file (default al-audit-baselines/<suite>.json in the current directory)")
    bl.add_argument("--force", action="store_true", help="overwrite a baseline file git tracks (one al-audit wrote)")
    bl.add_argument("--jobs", type=_COUNT, default=1, help="parallel worker processes (default 1)")
    bl.add_argument("--data-dir", help="directory of the LIBSVM files")
    bl.add_argument("--no-progress", action="store_true", help="no progress bar")
    bl.set_defaults(func=_baseline)

    gt = sub.add_parser("gate", help="replay a baseline here: identical, equivalent, drift or inconclusive per cell")
    gt.add_argument("--baseline", required=True, help="baseline file written by `audit baseline create`")
    gt.add_argument("--margin", type=_number(0.0, 1.0, "a number between 0 and 1 (an AUBC difference)"), default=0.005, help="equivalence margin on AUBC (default %(default)s)")
    gt.add_argument("--alpha", type=_number(0.0, 0.5, "a level between 0 and 0.5"), default=0.05, help="level of the equivalence and difference tests "
                    "(default %(default)s)")
    gt.add_argument("--strict", action="store_true", help="exit 2 when a cell is inconclusive")
    gt.add_argument("--protocol", help="replay under this protocol (name or .toml file) instead of the baseline's "
                    "recorded spec, e.g. one with a changed default; the suite's strategies and bindings are kept")
    gt.add_argument("--jobs", type=_COUNT, default=1, help="parallel worker processes (default 1)")
    gt.add_argument("--data-dir", help="directory of the LIBSVM files")
    gt.add_argument("--out", help="report directory for summary.md, junit.xml, gate.json (default reports/gate-<suite>)")
    gt.add_argument("--no-progress", action="store_true", help="no progress bar")
    gt.set_defaults(func=_gate)

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
    _replay_options(cp, "output directory (default reports/compat-<protocol>-<dataset>)")
    cp.set_defaults(func=_compat)

    # -- scale-out: `audit run` and `audit status` (handled in audit/run.py) --
    def scale_out(handler: str):
        def call(args: argparse.Namespace) -> int:
            from audit import run as scale_run

            return getattr(scale_run, handler)(args)
        return call

    ru = sub.add_parser("run", help="a protocol's whole benchmark (every data set x strategy x trial the store "
                        "lacks) on a local pool or a Dask cluster; resumable")
    ru.add_argument("--protocol", required=True, help="protocol name or .toml file")
    ru.add_argument("--datasets", help="comma-separated data sets (default: every one the protocol covers)")
    ru.add_argument("--strategies", help="comma-separated strategy ids (default: all available)")
    ru.add_argument("--trials", type=_COUNT, help="trials per cell (default: the protocol's, 100 or 10 by size)")
    ru.add_argument("--executor", choices=["local", "dask"], default="local",
                    help="local process pool (default) or dask.distributed")
    ru.add_argument("--scheduler", type=_scheduler_address, help="Dask scheduler address (default with --executor dask: a LocalCluster)")
    ru.add_argument("--workers", type=_COUNT, default=1, help="local processes or LocalCluster workers (default 1)")
    ru.add_argument("--retries", type=_integer(0), default=2, help="extra attempts of a trial whose worker died or "
                    "that raised outside the strategy (default %(default)s)")
    ru.add_argument("--max-trial-seconds", type=_SECONDS, help="seconds per trial before it is recorded as TLE")
    ru.add_argument("--data-dir", help="directory of the LIBSVM files")
    ru.add_argument("--store", default=".audit-store.sqlite", help="SQLite results store (default %(default)s)")
    ru.add_argument("--retry-errors", action="store_true", help="rerun trials stored as errors")
    ru.add_argument("--no-progress", action="store_true", help="no progress display")
    ru.set_defaults(func=scale_out("run_command"))
    ss = sub.add_parser("status", help="progress of the latest `audit run` on a store, from another process")
    ss.add_argument("--store", default=".audit-store.sqlite", help="SQLite results store (default %(default)s)")
    ss.set_defaults(func=scale_out("status_command"))

    rf = sub.add_parser("references", help="check a published table of your own before comparing with it")
    rf.add_argument("action", choices=["check"], help="validate FILE against the schema, the data sets and a protocol")
    rf.add_argument("file", help="a CSV table in the reference_results/ schema")
    rf.add_argument("--protocol", default="lu2023", help="protocol whose strategy ids the table uses "
                    "(default %(default)s)")
    rf.set_defaults(func=_references)
    pr = sub.add_parser("protocols", help="list protocols; `audit protocols show NAME` prints one")
    pr.add_argument("action", nargs="?", choices=["show"], help="show one protocol")
    pr.add_argument("name", nargs="?", help="protocol name")
    pr.add_argument("--json", action="store_true", help="print the parsed spec as JSON")
    pr.set_defaults(func=_protocols)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    interrupts = _Interrupts()
    previous = signal.signal(signal.SIGINT, interrupts.first)
    try:
        return _main(argv, interrupts)
    finally:
        if interrupts.signalled is None:  # after a Ctrl-C a second one must still leave at once
            signal.signal(signal.SIGINT, previous)


def _main(argv: Sequence[str] | None, interrupts: "_Interrupts") -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "action", None) == "show" and not args.name:
        parser.error("protocols show needs a protocol name")
    interrupts.line = _interrupted_line(args)
    try:
        if _cap_to_cores(args) > 1 and getattr(args, "executor", "local") == "local":
            from audit.workers import start_early

            start_early()  # worker imports overlap with the driver's own
        return args.func(args)
    except AuditError as exc:
        print(f"audit: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        interrupts.tell()
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        if not _reader_gone(sys.stdout):
            raise
        # `audit datasets | head -1`: the reader has all it wanted; what is still buffered
        # goes nowhere, so the flush at exit cannot fail again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE


if __name__ == "__main__":
    sys.exit(main())
