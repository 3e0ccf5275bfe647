"""Published reference numbers (reference_results/*.csv) with validation on load."""

import csv
from dataclasses import dataclass
from pathlib import Path

REFERENCE_DIR = Path(__file__).resolve().parent.parent / "reference_results"
COLUMNS = ("paper", "table", "row", "dataset", "strategy", "batch_size", "metric",
           "mean", "sd", "n", "scale", "aubc_variant", "note")
REQUIRED = ("paper", "table", "row", "dataset", "strategy", "metric", "scale", "aubc_variant")
METRICS = {"accuracy", "roc_auc", "f1"}
SCALES = {"percent": 100.0, "fraction": 1.0}


@dataclass(frozen=True)
class Reference:
    paper: str
    table: str
    row: str
    dataset: str
    strategy: str
    batch_size: int
    metric: str
    mean: float | None
    sd: float | None
    n: int | None
    scale: str
    aubc_variant: str
    note: str
    source: str  # "reference_results/<file>:<line>"

    @property
    def mean_fraction(self) -> float | None:
        """The mean on the 0-1 scale (None where the paper printed no number)."""
        return None if self.mean is None else self.mean / SCALES[self.scale]


def _number(text, kind):
    return kind(text) if text else None


def _parse(fields, source, check_range=True):
    for name in REQUIRED:
        if not fields[name]:
            raise ValueError(f"{name} is empty")
    if fields["metric"] not in METRICS:
        raise ValueError(f"unknown metric {fields['metric']!r}")
    if fields["scale"] not in SCALES:
        raise ValueError(f"unknown scale {fields['scale']!r}")
    ref = Reference(**{**fields, "batch_size": int(fields["batch_size"]),
                       "mean": _number(fields["mean"], float), "sd": _number(fields["sd"], float),
                       "n": _number(fields["n"], int), "source": source})
    if ref.batch_size < 1 or (ref.n is not None and ref.n < 1):
        raise ValueError("batch_size and n must be positive")
    if check_range and ref.mean is not None and not 0.0 <= ref.mean_fraction <= 1.0:
        raise ValueError(f"mean {ref.mean} outside the {ref.scale} range")
    if ref.sd is not None and not ref.sd >= 0:
        raise ValueError(f"sd {ref.sd} is not >= 0")
    return ref


def _read(path, check_range=True):
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None or tuple(header) != COLUMNS:
            where = f"{path.parent.name}/{path.name}:1"
            raise ValueError(f"{where}: columns must be {','.join(COLUMNS)}")
        for cells in reader:
            source = f"{path.parent.name}/{path.name}:{reader.line_num}"
            if len(cells) != len(COLUMNS):
                raise ValueError(f"{source}: {len(cells)} cells, expected {len(COLUMNS)}")
            try:
                yield _parse(dict(zip(COLUMNS, cells)), source, check_range)
            except ValueError as err:
                raise ValueError(f"{source}: {err}") from None


def load_references(paper=None, dataset=None, strategy=None, metric="accuracy",
                    batch_size=None, directory=REFERENCE_DIR, check_range=True) -> list[Reference]:
    """All references in `directory`/*.csv matching the given filters (None = any).
    check_range=False keeps means outside the AUBC range, for `audit lint-references` to list."""
    wanted = {"paper": paper, "dataset": dataset, "strategy": strategy, "metric": metric,
              "batch_size": batch_size}
    return [ref for path in sorted(Path(directory).glob("*.csv")) for ref in _read(path, check_range)
            if all(v is None or getattr(ref, k) == v for k, v in wanted.items())]
