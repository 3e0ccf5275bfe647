"""Did two runs store the same trials, and how much slower was one run's hour? (by hand, not CI)

    uv run python benchmarks/same_trials.py THIS.sqlite OTHER.sqlite [--protocol zhan2021]

The VM's speed moves wall times by 10-40% from one hour to the next, so a run's minutes say
little about its code by themselves. This matches every trial the two stores share (protocol,
data set, strategy, trial seed and protocol settings: ``audit.trials``'s ``protocol_spec``),
counts those whose status, ``query_hash`` or AUBC differ (exit 1 if any), and prints the
ratio of their recorded seconds per strategy (the audited protocol's trials and the diagnosis
replays apart) and in all: the same work, timed in two hours (or at two versions of the code).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from audit.api import trials

KEY = ["protocol", "dataset", "strategy", "trial_seed", "protocol_spec"]
RESULT = ["status", "query_hash", "aubc"]


def matched(this: Path, other: Path) -> pd.DataFrame:
    """The trials both stores hold, one row each: this run's and the other's results and seconds."""
    both = trials(this)[KEY + RESULT + ["seconds"]].merge(trials(other)[KEY + RESULT + ["seconds"]], on=KEY,
                                                          suffixes=("", "_other"))
    if both.duplicated(KEY).any():
        raise SystemExit("same_trials: a store holds one trial under several environments; compare one environment each")
    return both


def differing(both: pd.DataFrame) -> pd.DataFrame:
    """The matched trials whose status, query hash or AUBC differ (AUBC compared exactly; both
    missing counts as the same)."""
    same = pd.Series(True, index=both.index)
    for column in RESULT:
        a, b = both[column], both[f"{column}_other"]
        same &= (a == b) | (a.isna() & b.isna())
    return both[~same]


def seconds_ratio(both: pd.DataFrame, audited: str) -> pd.DataFrame:
    """Recorded seconds of the matched trials per strategy and part, this run over the other."""
    part = ["trials" if p == audited else "diagnosis" for p in both.protocol]
    table = both.assign(part=part).groupby(["strategy", "part"])[["seconds", "seconds_other"]].agg(["count", "sum"])
    out = pd.DataFrame({"trials": table[("seconds", "count")], "seconds": table[("seconds", "sum")],
                        "seconds other": table[("seconds_other", "sum")]})
    out["ratio"] = out["seconds"] / out["seconds other"]
    return out.sort_values("seconds", ascending=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("this", type=Path)
    parser.add_argument("other", type=Path)
    parser.add_argument("--protocol", default="zhan2021", help="the audited protocol (its replays are the diagnosis)")
    args = parser.parse_args()
    for path in (args.this, args.other):
        if not path.is_file():
            parser.error(f"{path} is not a file")
    sys.exit(report(args.this, args.other, args.protocol))


def report(this: Path, other: Path, audited: str) -> int:
    """Print the comparison; 1 if a shared trial differs, else 0."""
    both = matched(this, other)
    changed = differing(both)
    print(f"\n{len(both)} trials in both {this} and {other}: {len(both) - len(changed)} identical "
          f"(status, query_hash, AUBC), {len(changed)} different")
    if not changed.empty:
        print(changed[KEY + RESULT + [f"{c}_other" for c in RESULT]].head(20).to_string(index=False))
    if both.empty:
        return 0
    table = seconds_ratio(both, audited)
    print(f"seconds of the same trials, {this} over {other}:")
    print(table.round(2).to_string())
    total, total_other = both.seconds.sum(), both.seconds_other.sum()
    print(f"in all: {total:.0f} s against {total_other:.0f} s, ratio {total / total_other:.3f}")
    return int(not changed.empty)


if __name__ == "__main__":
    main()
