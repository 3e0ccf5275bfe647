"""Published reference numbers: the tables in reference_results/*.csv and a user's own
table in the same schema, validated on load with the file and line of every problem."""

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from audit.errors import AuditError
from audit.paths import REFERENCE_DIR
from audit.protocols import Protocol

COLUMNS = ("paper", "table", "row", "dataset", "strategy", "batch_size", "metric",
           "mean", "sd", "n", "scale", "aubc_variant", "note")
REQUIRED = ("paper", "table", "dataset", "strategy", "metric", "scale", "aubc_variant")
OPTIONAL = tuple(c for c in COLUMNS if c not in REQUIRED + ("mean",))  # a user's table may leave these out
METRICS = {"accuracy", "roc_auc", "f1"}
SCALES = {"percent": 100.0, "fraction": 1.0}
PAPER_SD_DDOF = {"lu2023": 1, "zhan2021": 0}
"""The SD convention of each paper's printed SDs: lu2023 the sample SD, zhan2021's code np.std (ddof 0)."""


def paper_sd_ddof(paper: str) -> int | None:
    """The ddof of the SDs ``paper`` printed; None for a paper whose convention is not known."""
    return PAPER_SD_DDOF.get(paper)


@dataclass(frozen=True)
class Reference:
    paper: str
    table: str
    row: str
    dataset: str
    strategy: str
    batch_size: int | None  # None: the table does not say (matches any batch size)
    metric: str
    mean: float | None
    sd: float | None
    n: int | None
    scale: str
    aubc_variant: str
    note: str
    source: str  # "<directory>/<file>:<line>"

    @property
    def mean_fraction(self) -> float | None:
        """The mean on the 0-1 scale (None where the paper printed no number)."""
        return None if self.mean is None else self.mean / SCALES[self.scale]

    @property
    def sd_fraction(self) -> float | None:
        """The SD on the 0-1 scale (None where the paper printed none)."""
        return None if self.sd is None else self.sd / SCALES[self.scale]


def _number(fields, name, kind):
    text = fields[name]
    if not text:
        return None
    try:
        return kind(text)
    except ValueError:
        raise ValueError(f"{name} {text!r} is not {'an integer' if kind is int else 'a number'}") from None


def _parse(fields, source, check_range=True):
    for name in REQUIRED:
        if not fields[name]:
            raise ValueError(f"{name} is empty")
    if fields["metric"] not in METRICS:
        raise ValueError(f"unknown metric {fields['metric']!r}; known: {', '.join(sorted(METRICS))}")
    if fields["scale"] not in SCALES:
        raise ValueError(f"unknown scale {fields['scale']!r}; known: {', '.join(SCALES)}")
    ref = Reference(**{**fields, "batch_size": _number(fields, "batch_size", int),
                       "mean": _number(fields, "mean", float), "sd": _number(fields, "sd", float),
                       "n": _number(fields, "n", int), "source": source})
    if (ref.batch_size is not None and ref.batch_size < 1) or (ref.n is not None and ref.n < 1):
        raise ValueError("batch_size and n must be positive")
    if check_range and ref.mean is not None and not 0.0 <= ref.mean_fraction <= 1.0:
        raise ValueError(f"mean {ref.mean} outside the {ref.scale} range")
    if ref.mean is not None and ref.scale == "percent" and 0 < ref.mean <= 1:
        raise ValueError(f"mean {ref.mean} on the percent scale is at most 1%: is the scale fraction?")
    if ref.sd is not None and not ref.sd >= 0:
        raise ValueError(f"sd {ref.sd} is not >= 0")
    return ref


def _read(path: Path, where: str | None = None, check_range: bool = True):
    """The rows of one table; ``where`` names the file in messages (default: directory/file);
    check_range=False keeps means outside the AUBC range, for `audit lint-references` to list."""
    where = where or f"{path.parent.name}/{path.name}"
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        missing = [c for c in REQUIRED + ("mean",) if c not in (header or ())]
        unknown = [c for c in header or () if c not in COLUMNS]
        if missing or unknown or len(set(header)) != len(header):
            problem = (f"lacks column(s) {', '.join(missing)}" if missing else
                       f"has unknown column(s) {', '.join(unknown)}" if unknown else "repeats a column")
            raise ValueError(f"{where}:1: {problem}; the columns are {','.join(COLUMNS)} "
                             f"({', '.join(OPTIONAL)} may be left out)")
        for cells in reader:
            source = f"{where}:{reader.line_num}"
            if len(cells) != len(header):
                raise ValueError(f"{source}: {len(cells)} cells, expected {len(header)}")
            try:
                yield _parse({**dict.fromkeys(OPTIONAL, ""), **dict(zip(header, cells))}, source, check_range)
            except ValueError as err:
                raise ValueError(f"{source}: {err}") from None


def load_references(paper=None, dataset=None, strategy=None, metric="accuracy",
                    batch_size=None, directory=REFERENCE_DIR, check_range=True) -> list[Reference]:
    """All references in `directory`/*.csv matching the given filters (None = any).
    check_range=False keeps means outside the AUBC range, for `audit lint-references` to list."""
    return select([ref for path in sorted(Path(directory).glob("*.csv"))
                   for ref in _read(path, check_range=check_range)],
                  paper=paper, dataset=dataset, strategy=strategy, metric=metric, batch_size=batch_size)


def select(refs: Iterable[Reference], **wanted) -> list[Reference]:
    """The references matching every given filter (None = any; a reference without a
    batch size matches any batch size)."""
    return [ref for ref in refs
            if all(v is None or getattr(ref, k) == v or (k == "batch_size" and ref.batch_size is None)
                   for k, v in wanted.items())]


def read_user_table(path: str | Path, datasets: Iterable[str], strategies: Iterable[str]) -> list[Reference]:
    """A user's published table (--references FILE.csv), checked whole before any work:
    every problem is one AuditError naming the file and line."""
    path = Path(path)
    if not path.is_file():
        raise AuditError(f"reference table {path} is not a readable file")
    try:
        refs = list(_read(path, str(path)))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise AuditError(f"cannot read reference table {path}: {exc}") from None
    except ValueError as exc:
        raise AuditError(f"reference table {exc}") from None
    known_datasets, known_strategies = set(datasets), set(strategies)
    for ref in refs:
        line = ref.source.rsplit(":", 1)[1]
        if ref.dataset not in known_datasets:
            raise AuditError(f"reference table {path}:{line}: unknown data set {ref.dataset!r}")
        if ref.strategy not in known_strategies:
            raise AuditError(f"reference table {path}:{line}: strategy {ref.strategy!r} is not in the protocol; "
                             f"its strategies: {', '.join(sorted(known_strategies))}")
    if not refs:
        raise AuditError(f"reference table {path} has no rows")
    return refs


def pick_reference(protocol: Protocol, dataset: str, strategy: str,
                   table: list[Reference] | None = None) -> Reference | None:
    """The published number a cell is compared with, by the protocol's table preference;
    from a user's ``table`` when one is given (any paper), else from reference_results/."""
    wanted = {"dataset": dataset, "strategy": strategy, "metric": protocol.aubc_metric,
              "batch_size": protocol.batch_size}
    found = (select(table, **wanted) if table is not None
             else load_references(paper=protocol.reference_paper, **wanted))
    refs = [r for r in found if r.mean is not None]
    rank = {t: i for i, t in enumerate(protocol.reference_tables)}
    refs.sort(key=lambda r: rank.get(r.table, len(rank)))
    return refs[0] if refs else None
