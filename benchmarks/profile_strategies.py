"""Where a replay's time goes: cProfile of the first trials of every strategy (run by hand).

    uv run python benchmarks/profile_strategies.py [--protocol zhan2021] [--dataset sonar]
        [--trials 2] [--strategies margin,eer] [--top 12] [--dump DIR]

One process. For each available strategy, runs its first trials through the real runner
under cProfile and prints CPU seconds per trial (``time.process_time``) and the functions
with the largest cumulative time (per trial), excluding the runner's own frames and a
strategy's one-time preparation (LAL's training data, generated first if missing).
``--dump DIR`` also writes each strategy's pstats file there.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time
from pathlib import Path

from audit.engine.capabilities import CANONICAL_STRATEGIES, capability
from audit.engine.datasets import load_dataset
from audit.engine.runner import prepare_strategy, run_trial
from audit.engine.splits import plan_seeds
from audit.protocols import load_protocol

_SKIP = ("runner.py", "profile_strategies.py", "contextlib.py", "{built-in method builtins.exec}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--protocol", default="zhan2021")
    parser.add_argument("--dataset", default="sonar")
    parser.add_argument("--trials", type=int, default=2)
    parser.add_argument("--strategies", default="")
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--dump", default="")
    args = parser.parse_args()

    protocol = load_protocol(args.protocol)
    data = load_dataset(args.dataset)
    seeds, _ = plan_seeds(protocol, data.y, args.trials, data)
    rank = {s: i for i, s in enumerate(CANONICAL_STRATEGIES)}
    chosen = [s for s in args.strategies.split(",") if s] or sorted(protocol.strategies,
                                                                   key=lambda s: rank.get(s, len(rank)))
    print(f"{args.protocol} on {args.dataset}, {len(seeds)} trials each, one process, cProfile on")
    for sid in chosen:
        if capability(protocol, sid).status != "available":
            print(f"\n== {sid}: not available")
            continue
        prepare_strategy(protocol.for_dataset(args.dataset), protocol.strategy(sid), print)  # not profiled
        profiler = cProfile.Profile(time.process_time)
        cpu = time.process_time()
        profiler.enable()
        results = [run_trial(protocol, data.info.name, data.X, data.y, sid, s) for s in seeds]
        profiler.disable()
        cpu = (time.process_time() - cpu) / len(seeds)
        statuses = sorted({r.status for r in results})
        print(f"\n== {sid}: {cpu:.2f} CPU s per trial (profiled), status {statuses}, "
              f"fast_path {sorted({r.fast_path for r in results})}")
        if args.dump:
            Path(args.dump).mkdir(parents=True, exist_ok=True)
            profiler.dump_stats(str(Path(args.dump) / f"{sid}.pstats"))
        stats = pstats.Stats(profiler, stream=io.StringIO())
        rows = []
        for (filename, line, name), (_, ncalls, _, cumulative, _) in stats.stats.items():
            where = f"{filename.rsplit('site-packages/', 1)[-1]}:{line}({name})"
            if any(s in where for s in _SKIP) or name in ("<module>",):
                continue
            rows.append((cumulative / len(seeds), ncalls / len(seeds), where))
        rows.sort(reverse=True)
        for cumulative, ncalls, where in rows[:args.top]:
            print(f"  {cumulative:8.2f} s {ncalls:10.0f} calls  {where[-110:]}")


if __name__ == "__main__":
    main()
