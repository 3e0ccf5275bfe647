"""What one trial of ALPBench's claims costs, per learner x strategy x data set (run by hand).

    uv run --extra alpbench python benchmarks/alpbench_cost.py [--datasets wdbc,phishing]
        [--learners svm_rbf,rf_entropy] [--strategies random,margin] [--seed-index 0]
        [--time-limit 180] [--profile 0]

One process, one trial per cell (the claims protocol's seed at ``--seed-index``), run through the
real runner under the claims' protocol with the learner as task and query model, as
``audit claims alpbench`` builds it. Prints CPU seconds (``time.process_time``), wall seconds,
the status, the fast path, the query hash and the AUBC of each cell, so two runs (before and
after a change) can be compared cell by cell. A trial over ``--time-limit`` wall seconds is
stopped and printed as "tle". ``--profile N`` prints the N functions with the largest
cumulative CPU time of each trial.
"""
from __future__ import annotations

import argparse
import cProfile
import dataclasses
import io
import pstats
import time
import tomllib

from audit.analysis.claims.alpbench import CLAIMS_FILE
from audit.engine.datasets import load_dataset
from audit.engine.runner import run_trial
from audit.engine.splits import plan_seeds
from audit.protocols import load_protocol


def main() -> None:
    config = tomllib.loads(CLAIMS_FILE.read_text())
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="wdbc,phishing")
    parser.add_argument("--learners", default=",".join(config["learners"]))
    parser.add_argument("--strategies", default="random,margin,power_bald,core_set")
    parser.add_argument("--seed-index", type=int, default=0)
    parser.add_argument("--time-limit", type=float, default=180.0)
    parser.add_argument("--profile", type=int, default=0)
    args = parser.parse_args()

    base = load_protocol(config["protocol"])
    print("dataset learner strategy cpu_s wall_s status fast_path query_hash aubc", flush=True)
    for dataset in args.datasets.split(","):
        data = load_dataset(dataset)
        seeds, _ = plan_seeds(base, data.y, args.seed_index + 1)
        seed = seeds[args.seed_index]
        for learner in args.learners.split(","):
            try:
                base.learners[learner].validate()
            except Exception as exc:  # TabPFN, TabNet: not installed here
                print(f"{dataset} {learner} - - - unavailable: {str(exc)[:80]}", flush=True)
                continue
            protocol = dataclasses.replace(base, name=f"{base.name}~{learner}", task_model=base.learners[learner])
            for strategy in args.strategies.split(","):
                profiler = cProfile.Profile(time.process_time) if args.profile else None
                cpu, wall = time.process_time(), time.perf_counter()
                if profiler:
                    profiler.enable()
                result = run_trial(protocol, data.info.name, data.X, data.y, strategy, seed, args.time_limit)
                if profiler:
                    profiler.disable()
                cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
                aubc = "-" if result.aubc is None else repr(result.aubc)
                print(f"{dataset} {learner} {strategy} {cpu:.2f} {wall:.2f} {result.status} {result.fast_path} "
                      f"{result.query_hash} {aubc}" + (f" {result.error[:100]}" if result.error else ""), flush=True)
                if profiler:
                    stats = pstats.Stats(profiler, stream=io.StringIO())
                    rows = sorted(((cum, calls, f"{f.rsplit('site-packages/', 1)[-1]}:{line}({name})")
                                   for (f, line, name), (_, calls, _, cum, _) in stats.stats.items()), reverse=True)
                    for cum, calls, where in rows[:args.profile]:
                        print(f"    {cum:8.2f} s {calls:8d}  {where[-100:]}")


if __name__ == "__main__":
    main()
