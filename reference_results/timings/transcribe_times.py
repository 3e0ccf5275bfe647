"""Transcribe lu2023's published running times into lu2023_repository_times.csv.

Usage (from the repo root), with the authors' results/README.md saved from their repository:
    git -C <clone of ariapoy/active-learning-benchmark> show 5ef0bdb:results/README.md > README-lu2023.md
    uv run python reference_results/timings/transcribe_times.py README-lu2023.md

The section "Computational Time" of that file is one table: the running time of one
experiment (one trial) of each strategy on each of the 20 small data sets, printed as
``XmY.ZZZs`` (or ``Xhr*``, marked "estimated time to complete"). Each cell becomes one row
with the printed text kept and its value in seconds; nothing is rounded.
"""

import argparse
import csv
import re
import sys
from decimal import Decimal
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from transcribe import STRATEGIES  # noqa: E402  (the paper's strategy names -> ours)

OUT = HERE / "lu2023_repository_times.csv"
SECTION = "## Computational Time"
COLUMNS = ["dataset", "strategy", "seconds", "printed", "estimated"]
MINUTES = re.compile(r"^(\d+)m(\d+(?:\.\d+)?)s$")
HOURS = re.compile(r"^(\d+(?:\.\d+)?)hr$")


def seconds(printed: str) -> Decimal:
    """'14m30.543s' -> 870.543; '65hr' -> 234000 (decimal, so no digit is lost)."""
    if match := MINUTES.match(printed):
        return int(match[1]) * 60 + Decimal(match[2])
    if match := HOURS.match(printed):
        return Decimal(match[1]) * 3600
    raise ValueError(f"unreadable running time {printed!r}")


def transcribe(readme: str) -> list[dict[str, str]]:
    lines = readme.splitlines()
    start = lines.index(SECTION) + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("#")), len(lines))
    table = [line for line in lines[start:end] if line.startswith("|")]
    header = [cell.strip() for cell in table[0].strip("|").split("|")]
    strategies = [STRATEGIES[name.lower()] for name in header[1:]]
    rows = []
    for line in table[2:]:  # table[1] is the |:---| rule
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        dataset = cells[0].lower()
        for strategy, printed in zip(strategies, cells[1:]):
            value = printed.rstrip("*")
            rows.append({"dataset": dataset, "strategy": strategy, "seconds": str(seconds(value)),
                         "printed": printed, "estimated": "yes" if printed.endswith("*") else "no"})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("readme", type=Path, help="the authors' results/README.md")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    rows = transcribe(args.readme.read_text(encoding="utf-8"))
    with args.out.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    print(f"{len(rows)} rows -> {args.out}")


if __name__ == "__main__":
    main()
