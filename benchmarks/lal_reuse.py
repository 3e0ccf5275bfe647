"""LAL's selector read back within a run against trained in every trial (by hand, not CI).

    uv run python benchmarks/lal_reuse.py [--dataset sonar] [--trials 5]

The diagnosis replays a LAL cell's trial seeds under several protocols; within a run the
selector forest is trained once per trial seed (the first protocol's trial) and read back by
the others (adapters/reuse.py). This runs ``--trials`` seeds under zhan2021 and then under
its released-scaling flip, first each trial on its own (every trial trains), then inside one
run scratch directory (the flip's trials read the selector back), and prints CPU seconds per
trial of each, checking that every trial's ``query_hash`` and AUBC are the same both ways.
"""
from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace

from audit.engine import scratch
from audit.engine.datasets import load_dataset
from audit.engine.runner import run_trial
from audit.engine.splits import plan_seeds
from audit.protocols import load_protocol


def _trials(protocols, data, dataset, seeds) -> list[tuple[float, str, float]]:
    out = []
    for protocol in protocols:
        for seed in seeds:
            start = time.process_time()
            result = run_trial(protocol, dataset, data.X, data.y, "lal", seed)
            out.append((time.process_time() - start, result.query_hash, result.aubc))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="sonar")
    parser.add_argument("--trials", type=int, default=5)
    args = parser.parse_args()
    audited = load_protocol("zhan2021")
    flipped = replace(audited, name="zhan2021~scaling", scaling=dict(load_protocol("zhan2021-released").scaling))
    data = load_dataset(args.dataset)
    seeds = plan_seeds(audited, data.y, args.trials, data)[0][:args.trials]
    _trials([audited], data, args.dataset, seeds[:1])  # warm-up: imports, self-checks, LAL's data
    alone = _trials([audited, flipped], data, args.dataset, seeds)
    with scratch.run_scratch():
        shared = _trials([audited, flipped], data, args.dataset, seeds)
    same = sum(a[1:] == b[1:] for a, b in zip(alone, shared))
    n = len(seeds)
    for label, rows in (("each trial trains", alone), ("one run (reads back)", shared)):
        first, second = [r[0] for r in rows[:n]], [r[0] for r in rows[n:]]
        print(f"{label:22s} zhan2021 {statistics.mean(first):.2f} CPU s/trial, released-scaling flip "
              f"{statistics.mean(second):.2f} CPU s/trial")
    flip_alone, flip_shared = (statistics.mean(r[0] for r in rows[n:]) for rows in (alone, shared))
    print(f"the flip's trials: {flip_alone / flip_shared:.2f}x faster; {same} of {len(alone)} trials identical "
          "(query_hash and AUBC)")


if __name__ == "__main__":
    main()
