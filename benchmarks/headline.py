"""The headline command's wall time from an empty store, and its results (by hand, not CI).

    uv run python benchmarks/headline.py [--dataset sonar] [--jobs 2] [--until-settled]
        [--trials N] [--strategies a,b] [--no-diagnose] [--check 2] [--compare REPORT.json]
        [--against STORE] [--keep DIR]

Runs ``audit reproduce zhan2021 --dataset D --jobs J`` (with the options given) as a
subprocess with a new store and report directory (a temporary directory, or ``--keep DIR``,
which must not exist), and prints:

- wall seconds, and how busy the workers were: the trial seconds the store recorded over
  wall x jobs (the workers come from a forkserver, which no rusage of this process counts);
- each strategy's share of the trial seconds the store recorded, the audited protocol's
  trials and the diagnosis replays' apart;
- each cell's verdict, its trials (and, with ``--until-settled``, the n that settled it and
  the boundary) and its diagnosis line;
- with ``--check K``: the first K stored trials of every strategy replayed in this process
  with every fast path of :mod:`audit.fast` off (scikit-learn's and cvxpy's own code), their
  ``query_hash`` and AUBC compared with the stored ones;
- with ``--compare``: every cell's verdict and diagnosis line against another run's
  report.json (say, the full run's, for an ``--until-settled`` run);
- with ``--against``: every trial this run stored against another run's store
  (``benchmarks/same_trials.py``: identical or not, and the seconds ratio of the same trials,
  which separates a slower hour from slower code).

Exit 1 when a comparison or the check finds a difference.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from same_trials import report as compare_stores  # benchmarks/same_trials.py
from strategies import turn_off  # benchmarks/strategies.py

from audit.api import trials
from audit.engine.datasets import load_dataset
from audit.engine.runner import run_trial
from audit.protocols import load_protocol

PROTOCOL = "zhan2021"
FAST_PATHS = {"lean-svc", "lean-forest", "lean-forest-regressor", "lean-grid-lr", "lean-lr", "lean-qp", "lean-dwus",
              "blas-labels", "lean-scaler"}


def run_command(args: argparse.Namespace, work: Path) -> tuple[list[str], float, int]:
    """The headline command with a fresh store and report directory: (argv, wall s, exit code)."""
    argv = [str(Path(sys.executable).with_name("audit")), "reproduce", PROTOCOL, "--dataset", args.dataset, "--jobs", str(args.jobs),
            "--store", str(work / "store.sqlite"), "--out", str(work / "report")]
    argv += ["--trials", str(args.trials)] if args.trials else []
    argv += ["--strategies", args.strategies] if args.strategies else []
    argv += ["--until-settled"] if args.until_settled else []
    argv += ["--no-diagnose"] if args.no_diagnose else []
    start = time.perf_counter()
    code = subprocess.call(argv, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    return argv, wall, code


def print_shares(store: Path, wall: float, jobs: int) -> None:
    """Trial seconds per strategy (the audited protocol's trials and the diagnosis replays'),
    and their total over wall x jobs: how busy the workers were."""
    table = trials(store)
    table = table.assign(part=["trials" if p == PROTOCOL else "diagnosis" for p in table.protocol])
    total = table.seconds.sum()
    by = table.pivot_table(index="strategy", columns="part", values="seconds", aggfunc="sum", fill_value=0.0)
    by["total"] = by.sum(axis=1)
    by["share %"] = 100 * by["total"] / total
    print(f"\ntrial seconds recorded in the store: {total:.0f} (each trial's wall seconds in its own process); "
          f"workers busy {100 * total / (wall * jobs):.1f}% of {jobs} x the wall time")
    print(by.sort_values("total", ascending=False).round(1).to_string())


def outcome(cell: dict) -> tuple[str, str]:
    """What must not change between two runs of a cell: its verdict and its diagnosis line."""
    return cell["verdict"], (cell.get("diagnosis") or {}).get("summary", "")


def print_cells(report: dict) -> dict[str, tuple[str, str]]:
    """Each cell's verdict, trials and diagnosis line; returns {strategy: :func:`outcome`}."""
    print(f"\n{'strategy':14s} {'verdict':24s} {'trials':>6s}  settled / diagnosis")
    outcomes = {}
    for cell in report["strategies"]:
        verdict, summary = outcomes[cell["strategy"]] = outcome(cell)
        settle = cell.get("settle") or {}
        settled = (f"settled at n={settle['settled_at']} ({settle.get('stop')}); "
                   if settle.get("settled_at") else "")
        print(f"{cell['strategy']:14s} {verdict:24s} {cell.get('n_trials', 0):6d}  {settled}{summary}")
    return outcomes


def check_library_path(store: Path, dataset: str, per_strategy: int) -> int:
    """Replay the first ``per_strategy`` stored trials of each strategy with the fast paths off;
    the number of trials whose query_hash or AUBC differs from the stored one."""
    turn_off(FAST_PATHS)
    protocol = load_protocol(PROTOCOL)
    data = load_dataset(dataset)
    stored = trials(store, protocol=PROTOCOL, dataset=data.info.name)
    stored = stored[stored.status == "ok"].sort_values(["strategy", "trial_seed"])
    differ = 0
    print(f"\nlibrary-path check: the first {per_strategy} stored trials of each strategy, fast paths off")
    for sid, group in stored.groupby("strategy", sort=False):
        for row in group.head(per_strategy).itertuples():
            result = run_trial(protocol, data.info.name, data.X, data.y, sid, int(row.trial_seed))
            same = result.query_hash == row.query_hash and result.aubc == row.aubc
            differ += not same
            library = f"{float(result.aubc)!r}" if result.aubc is not None else f"none ({result.status})"
            print(f"  {sid:14s} seed {row.trial_seed:4d}  {'identical' if same else 'DIFFERS'}"
                  f"  (AUBC {float(row.aubc)!r} stored, {library} library path)", flush=True)
    return differ


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="sonar")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--trials", type=int, help="trials per cell (default: the protocol's)")
    parser.add_argument("--strategies", help="a,b (default: every available strategy)")
    parser.add_argument("--until-settled", action="store_true")
    parser.add_argument("--no-diagnose", action="store_true")
    parser.add_argument("--check", type=int, default=0, metavar="K",
                        help="replay the first K stored trials of each strategy on the library path")
    parser.add_argument("--compare", type=Path,
                        help="another run's report.json: compare every cell's verdict and diagnosis line")
    parser.add_argument("--against", type=Path, help="another run's store: compare every shared trial and its seconds")
    parser.add_argument("--keep", type=Path, help="a new directory for the store and report (default: temporary)")
    args = parser.parse_args()
    if args.keep is not None and args.keep.exists():
        parser.error(f"{args.keep} exists; give a new directory")
    for given in (args.compare, args.against):
        if given is not None and not given.is_file():
            parser.error(f"{given} is not a file")

    with tempfile.TemporaryDirectory() as scratch:
        work = args.keep if args.keep is not None else Path(scratch)
        work.mkdir(parents=True, exist_ok=args.keep is None)
        argv, wall, code = run_command(args, work)
        print(f"{' '.join(argv)}\n  exit {code}; wall {wall / 60:.1f} min ({os.cpu_count()} cores)")
        if code != 0:
            sys.exit(code)
        report = json.loads((work / "report" / "report.json").read_text())
        print_shares(work / "store.sqlite", wall, args.jobs)
        cells = print_cells(report)
        differs = False
        if args.compare is not None:
            other = {c["strategy"]: outcome(c) for c in json.loads(args.compare.read_text())["strategies"]}
            changed = sorted(s for s in cells if s in other and other[s] != cells[s])
            print(f"\nverdicts and diagnosis lines against {args.compare}: {len(cells) - len(changed)} of {len(cells)} "
                  "the same" + (f"; different: {', '.join(changed)}" if changed else ""))
            differs |= bool(changed)
        if args.against is not None:
            differs |= bool(compare_stores(work / "store.sqlite", args.against, PROTOCOL))
        if args.check:
            differs |= bool(check_library_path(work / "store.sqlite", args.dataset, args.check))
        sys.exit(int(differs))


if __name__ == "__main__":
    main()
