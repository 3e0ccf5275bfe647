"""What is here: data sets, protocols, strategies (and plug-ins), published tables, and the
conformance checks for a strategy of your own."""
from __future__ import annotations

import argparse
import json

from audit.errors import AuditError


def _datasets(args: argparse.Namespace) -> int:
    from audit.engine.datasets import (
        REGISTRY,
        dataset_status,
        fetch,
        format_registry_table,
        resolve_data_dir,
    )

    if args.fetch:
        from audit.engine import openml_data

        for name in args.fetch:  # LIBSVM files by registry name, OpenML data sets as openml:ID
            done = openml_data.fetch(openml_data.parse_id(name)) if name.startswith(openml_data.PREFIX) else fetch(name)
            print(f"{name}: {done}")
        return 0
    if args.alpbench:
        from audit.engine import openml_data

        rows = openml_data.alpbench_status()
        for openml_id, where in rows:
            print(f"openml:{openml_id:<6d} {where}")
        present = sum(where != "not present" for _, where in rows)
        print(f"{present} of {len(rows)} ALPBench data sets present here; the rest: `audit datasets --fetch openml:ID` "
              "where openml.org can be reached")
        return 0
    if args.split:
        from audit.protocols import (
            load_protocol,  # imports scikit-learn: seconds, so only when asked
        )

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

    from audit.engine.datasets import load_dataset, test_rows_seen_in_training
    from audit.engine.splits import make_split

    data = load_dataset(name, data_dir)
    split = make_split(protocol, data.y, 0, data.given)
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
    from audit.analysis.references import read_user_table
    from audit.engine.datasets import REGISTRY
    from audit.protocols import load_protocol

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
    from audit.engine.capabilities import format_learners, format_matrix, format_plugins, learner_matrix, matrix

    protocols = [args.protocol] if args.protocol else None
    print(format_matrix(matrix(protocols)))
    print()
    learners = format_learners(learner_matrix(protocols))
    if learners:
        print(learners)
        print()
    print(format_plugins())
    return 0


def _lal_data(args: argparse.Namespace) -> int:
    """Generate (or find) LAL's regenerated training data in the cache ahead of a replay."""
    import dataclasses
    import sys
    import time

    from adapters import lal_data

    config = dataclasses.replace(lal_data.DEFAULT_CONFIG, criterion=args.criterion)
    started = time.perf_counter()

    def progress(size: int) -> None:
        print(f"  size {size}/{config.sizes[-1]} done ({time.perf_counter() - started:.0f} s)", file=sys.stderr)

    if lal_data.cached(config) is None:
        print(f"generating {config.n_episodes} simulated episodes into {lal_data.data_dir(config)} ...", file=sys.stderr)
    directory, meta = lal_data.ensure(config, progress)
    print(f"{directory / meta['file']}: {meta['rows']} rows, sha256 {meta['sha256'][:16]}, "
          f"generated in {meta['seconds']} s")
    print(lal_data.describe(meta))
    return 0


def _lint_references(args: argparse.Namespace) -> int:
    from audit.analysis.reference_lint import lint_references, resolve_paper

    for finding in lint_references(resolve_paper(args.paper)):
        print(finding.line())
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    ds = sub.add_parser("datasets", help="the data-set registry with presence and checksum status")
    ds.add_argument("--data-dir", help="directory of the LIBSVM files")
    ds.add_argument("--fetch", nargs="+", metavar="NAME", help="download data sets into the user cache (a LIBSVM "
                    "file by name, or an OpenML data set as openml:ID: needs the extra alpbench)")
    ds.add_argument("--alpbench", action="store_true", help="ALPBench's OpenML data sets and where each is here")
    ds.add_argument("--split", metavar="PROTOCOL", help="also count test rows also in training, on this "
                    "protocol's split of trial seed 0 (e.g. lu2023)")
    ds.set_defaults(func=_datasets)

    ld = sub.add_parser("lal-data", help="generate LAL's training data (the LAL authors' procedure) into the cache")
    ld.add_argument("--criterion", choices=("iterative", "random"), default="iterative",
                    help="iterative: for LAL_iterative (default); random: for LAL_independent")
    ld.set_defaults(func=_lal_data)

    pr = sub.add_parser("protocols", help="list protocols; `audit protocols show NAME` prints one")
    pr.add_argument("action", nargs="?", choices=["show"], help="show one protocol")
    pr.add_argument("name", nargs="?", help="protocol name")
    pr.add_argument("--json", action="store_true", help="print the parsed spec as JSON")
    pr.set_defaults(func=_protocols)

    st = sub.add_parser("strategies", help="the capability matrix: every strategy, its binding and status")
    st.add_argument("--protocol", help="only this protocol (default: all)")
    st.set_defaults(func=_strategies)

    ck = sub.add_parser("check-strategy", help="run the adapter conformance checks on a strategy class "
                        "(exit 0: all pass, 1: a breach)")
    ck.add_argument("implementation", help="package.module:ClassName, an entry point's name, or a shipped "
                    "implementation (e.g. native.margin)")
    ck.add_argument("--params", help="also query with these parameters, a JSON object (e.g. '{\"beta\": 2}')")
    ck.set_defaults(func=_check_strategy)

    rf = sub.add_parser("references", help="check a published table of your own before comparing with it")
    rf.add_argument("action", choices=["check"], help="validate FILE against the schema, the data sets and a protocol")
    rf.add_argument("file", help="a CSV table in the reference_results/ schema")
    rf.add_argument("--protocol", default="lu2023", help="protocol whose strategy ids the table uses "
                    "(default %(default)s)")
    rf.set_defaults(func=_references)

    lr = sub.add_parser("lint-references", help="detectors that read a published table: copied columns, "
                        "BEST/WORST labels that are not the extremes, means off [0, 1]")
    lr.add_argument("paper", help="paper (lu2023, zhan2021) or a protocol that compares with one")
    lr.set_defaults(func=_lint_references)
