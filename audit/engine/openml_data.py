"""OpenML data sets by ID (ALPBench's data): fetched through the ``openml`` package into the
user's cache, each verified by the checksum recorded when it was first fetched; offline, the
ALPBench IDs whose data is also a shared LIBSVM file are mapped to it (alpbench_datasets.toml).

``audit datasets --fetch openml:31`` fetches; ``audit datasets --alpbench`` lists every ALPBench ID
with where its data is here. The ``openml`` package comes with the optional extra ``alpbench``.
"""
from __future__ import annotations

import functools
import hashlib
import json
import tomllib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from audit.engine.datasets import DataError, user_cache_dir
from audit.errors import AuditError
from audit.extras import require

CATALOGUE = Path(__file__).resolve().parent / "alpbench_datasets.toml"
PREFIX = "openml:"


@dataclass(frozen=True)
class LocalCopy:
    dataset: str  # the shared LIBSVM file's registry name
    caveat: str  # how it differs from the OpenML table
    drop_features: tuple[int, ...] = ()  # 1-based LIBSVM features the table does not have (an ID)


@functools.lru_cache(maxsize=1)
def catalogue() -> dict:
    return tomllib.loads(CATALOGUE.read_text())


def alpbench_ids() -> list[int]:
    """The 86 OpenML data set IDs of ALPBench's study (CC18 and TabZilla, less the 4 excluded)."""
    data = catalogue()
    return sorted(set(data["cc18"]) | set(data["tabzilla"]) - set(data["excluded"]))


def local_copy(openml_id: int) -> LocalCopy | None:
    entry = catalogue()["local"].get(str(openml_id))
    return None if entry is None else LocalCopy(entry["dataset"], entry["caveat"],
                                                tuple(entry.get("drop_features", ())))


def as_table_columns(dataset: str, X: np.ndarray) -> np.ndarray:
    """``X`` of the shared file ``dataset`` with only the columns of the OpenML table it stands
    in for (breast: without the sample code number); a file that stands in for none, as it is."""
    dropped = {c for entry in catalogue()["local"].values() if entry["dataset"] == dataset
               for c in entry.get("drop_features", ())}
    return np.delete(X, [c - 1 for c in sorted(dropped)], axis=1) if dropped else X


def parse_id(name: str) -> int:
    """The integer ID of ``openml:ID``; anything else is an input error."""
    text = name.removeprefix(PREFIX)
    if not text.isdigit() or int(text) < 1:
        raise AuditError(f"'{name}' is not an OpenML data set: write openml:ID with a positive integer ID")
    return int(text)


def cache_dir() -> Path:
    """Where the openml package keeps what al-audit fetches (beside al-audit's LIBSVM cache)."""
    return user_cache_dir().parent / "openml"


def _checksums_path() -> Path:
    return cache_dir() / "al-audit-checksums.json"


def _recorded() -> dict[str, str]:
    path = _checksums_path()
    return json.loads(path.read_text()) if path.exists() else {}


def _sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def fetch(openml_id: int) -> str:
    """Fetch one OpenML data set into the cache and check it against its recorded checksum (recorded
    on the first fetch); a line saying what was done. Raises DataError (one line) when openml.org
    cannot be reached, naming the shared file that holds the same data, if any."""
    require("alpbench", "fetching OpenML data sets")
    import openml

    openml.config.set_root_cache_directory(str(cache_dir()))
    try:
        dataset = openml.datasets.get_dataset(openml_id, download_data=True, download_qualities=False,
                                              download_features_meta_data=False)
    except Exception as exc:  # the openml package raises its own, requests' and urllib's errors
        copy = local_copy(openml_id)
        offline = (f"; offline, its data is the shared file {copy.dataset} ({copy.caveat})" if copy
                   else "; offline it is not present here")
        reason = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else type(exc).__name__
        raise DataError(f"OpenML data set {openml_id} cannot be fetched: openml.org is not reachable from "
                        f"here ({type(exc).__name__}: {reason}){offline}") from None
    data_file = Path(dataset.parquet_file or dataset.data_file)
    got = _sha256(data_file)
    recorded = _recorded()
    expected = recorded.get(str(openml_id))
    if expected is not None and expected != got:
        raise DataError(f"OpenML data set {openml_id} in {data_file} has sha256 {got[:12]}, recorded {expected[:12]} "
                        f"when first fetched: the cached copy changed")
    if expected is None:
        recorded[str(openml_id)] = got
        _checksums_path().write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")
    return f"{dataset.name} in {data_file}, sha256 {got[:12]} " + ("(verified)" if expected else "(recorded)")


def alpbench_status() -> list[tuple[int, str]]:
    """(ID, where its data is here) for every ALPBench data set: the cache, a shared file, or not present."""
    recorded = _recorded()
    rows = []
    for openml_id in alpbench_ids():
        copy = local_copy(openml_id)
        if str(openml_id) in recorded:
            where = f"in the OpenML cache, sha256 {recorded[str(openml_id)][:12]}"
        elif copy is not None:
            where = f"shared file {copy.dataset} ({copy.caveat})"
        else:
            where = "not present"
        rows.append((openml_id, where))
    return rows
