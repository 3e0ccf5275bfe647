"""Put the example plug-in through lu2023's protocol from Python and print the pandas tables.

    uv run --with-editable examples/own-strategy python examples/own-strategy/compare.py [--trials N]

Same replays, same store and same verdicts as the CLI (`audit reproduce`); the tables say
in their ``attrs`` which protocol, AUBC variant, library versions and seeds produced them.
"""
import argparse
from pathlib import Path

import audit

HERE = Path(__file__).resolve().parent
parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--trials", type=int, default=20, help="trials per strategy and data set (default 20)")
parser.add_argument("--store", default=".audit-store.sqlite", help="result store (default %(default)s)")
parser.add_argument("--out", default="reports", help="directory for the two reports (default %(default)s)")
args = parser.parse_args()
Path(args.out).mkdir(parents=True, exist_ok=True)  # the reports go into new subdirectories of it

for dataset in ("heart", "sonar"):
    replay = audit.reproduce(HERE / "lu2023-plus-own.toml", dataset, trials=args.trials, store=args.store,
                             out=Path(args.out) / f"lu2023-plus-own-{dataset}")
    print(f"\n{dataset}: protocol {replay.cells.attrs['protocol']} (spec {replay.cells.attrs['spec_hash']}), "
          f"AUBC {replay.cells.attrs['aubc_variant']}, trial seeds {replay.cells.attrs['trial_seeds'][0]}-"
          f"{replay.cells.attrs['trial_seeds'][-1]}")
    print(replay.cells[["strategy", "n", "mean", "ci95_low", "ci95_high", "published_mean", "verdict"]]
          .to_string(index=False))

trials = audit.trials(args.store, protocol="lu2023-plus-own")
print("\nmean AUBC per data set and strategy, from the store:")
print(trials[trials.status == "ok"].pivot_table(index="dataset", columns="strategy", values="aubc").round(4))
