"""This tool's ALiPy speed-ups against ALiPy and scikit-learn as shipped (run by hand, not in CI; not
named alipy.py, which would shadow the alipy package when run as a script).

    cd /work/main && uv run python benchmarks/alipy_speed.py [--repeats 3] [--seed 0]
        [--protocol lu2023] [--cases eer:sonar,eer:ionosphere,bmdr:heart,lal:heart]

One full trial (budget = the whole pool, lu2023 by default) of each case (strategy:data
set; by default EER on sonar and ionosphere, BMDR and LAL on heart), through the runner
both ways: as this tool runs it (LeanSVC for the SVC query and task models, EER's log
loss without ALiPy's Python loop, BMDR's ADMM reusing the pseudo-inverse of its repeated
matrix, LAL's forests lean) and with every speed-up off (``tests/plain_libraries.py``:
scikit-learn's SVC and forests, ALiPy's own code paths). The two must
give the same queries and the same accuracy in every round; the script checks that,
then prints the fastest of ``--repeats`` runs of each (alternating, so drift in the
machine's speed hits both) and their ratio.
"""
from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from audit.engine.datasets import load_dataset  # noqa: E402
from audit.engine.runner import run_trial  # noqa: E402
from audit.protocols import load_protocol  # noqa: E402
from tests.plain_libraries import plain_libraries  # noqa: E402

CASES = "eer:sonar,eer:ionosphere,bmdr:heart,lal:heart"


def timed(protocol, data, strategy: str, seed: int):
    """Wall and CPU seconds (every thread of this process) of one trial, and its rounds."""
    start, cpu = time.perf_counter(), time.process_time()
    result = run_trial(protocol, data.info.name, data.X, data.y, strategy, seed)
    if result.status != "ok":
        sys.exit(f"{strategy} on {data.info.name}: {result.error}")
    return (time.perf_counter() - start, time.process_time() - cpu), [(r.queried, r.accuracy) for r in result.rounds]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0, help="trial seed (default %(default)s)")
    parser.add_argument("--protocol", default="lu2023")
    parser.add_argument("--cases", default=CASES, help="strategy:data set, comma-separated (default %(default)s)")
    args = parser.parse_args()
    protocol = load_protocol(args.protocol)
    print(f"{args.protocol}, trial seed {args.seed}, the whole pool; fastest of {args.repeats}; "
          f"{platform.machine()}, Python {platform.python_version()}")
    print("| strategy | data set | as shipped s (CPU s) | this tool s (CPU s) | ratio (CPU) |")
    print("|---|---|---|---|---|")
    for strategy, name in (case.split(":") for case in args.cases.split(",")):
        data = load_dataset(name)
        best = {"plain": (float("inf"),) * 2, "fast": (float("inf"),) * 2}
        rounds = {}
        for _ in range(args.repeats):
            with plain_libraries():
                seconds, rounds["plain"] = timed(protocol, data, strategy, args.seed)
            best["plain"] = min(best["plain"], seconds)
            seconds, rounds["fast"] = timed(protocol, data, strategy, args.seed)
            best["fast"] = min(best["fast"], seconds)
        if rounds["plain"] != rounds["fast"]:
            sys.exit(f"{strategy} on {name}: the queries or accuracies differ")
        (plain, plain_cpu), (fast, fast_cpu) = best["plain"], best["fast"]
        print(f"| {strategy} | {name} | {plain:.1f} ({plain_cpu:.1f}) | {fast:.1f} ({fast_cpu:.1f}) | "
              f"{plain / fast:.2f}x ({plain_cpu / fast_cpu:.2f}x) |", flush=True)
    print("queries and accuracies identical in every case")


if __name__ == "__main__":
    main()
