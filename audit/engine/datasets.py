"""The benchmark data sets: a checksummed registry, a strict LIBSVM loader, and fetching.

The audit replays published protocols on the exact files their authors released, so the
registry pins each file's SHA-256 and shape, and the loader keeps rows in file order:
several files are sorted by label, and pool order changes what a seeded protocol queries.
"""
from __future__ import annotations

import bz2
import fcntl
import functools
import hashlib
import http.client
import json
import math
import os
import stat
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import BinaryIO, Callable, Sequence

import numpy as np

from audit.engine.synthetic import Draw, draw
from audit.errors import AuditError
from audit.paths import REFERENCE_DIR, SHARED_DATA_DIR

DATA_DIR_ENV = "AL_AUDIT_DATA_DIR"
DATA_URL_ENV = "AL_AUDIT_DATA_URL"
# Where the project's shared checkout keeps the files; tests monkeypatch this.
REPO_DATA_DIR = SHARED_DATA_DIR


class DataError(AuditError):
    """A data set is unknown, missing, corrupt or unparsable; the message is one line."""


LIBSVM_SITE = "https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets"
# Upper bounds, not sizes: the sizes of the train/test files below are not known to al-audit
# (docs/data.md). A download or read stops one byte past them, a .bz2 file's text likewise.
PUBLISHED_MAX_BYTES = 64 << 20
DECOMPRESSED_MAX_BYTES = 256 << 20
# al-audit's own record of a train/test file's SHA-256 and size at its first fetch, beside it.
PIN_SUFFIX = ".al-audit-pin.json"


@dataclass(frozen=True)
class PublishedFile:
    """One file of a set published as train and test files on the LIBSVM site, kept as
    published (a .bz2 file is decompressed when loaded, so its checksum is the published
    bytes'). ``sha256`` "" means not pinned by the registry: the published checksum could not
    be read where the registry was written, so the file is pinned at its first fetch instead."""

    name: str
    site_dir: str  # the LIBSVM site's directory: "binary" or "multiclass"
    sha256: str = ""


@dataclass(frozen=True)
class TrainTestFiles:
    """A predefined split: the train files' rows (in this order), then the test files'."""

    train: tuple[PublishedFile, ...]
    test: tuple[PublishedFile, ...]

    @property
    def files(self) -> tuple[PublishedFile, ...]:
        return self.train + self.test


@dataclass(frozen=True)
class DatasetInfo:
    """What the published file contains (not what a paper's table says).

    ``class_counts`` holds the labels as spelled in the file, positive class first for
    binary sets and in numeric order for multi-class ones. ``n_bytes`` is the file's exact
    size: no read or download of it goes past that, so a wrong file cannot run unbounded.
    """

    name: str
    file: str
    n: int
    d: int
    n_classes: int
    class_counts: tuple[tuple[str, int], ...]
    imbalance_ratio: float
    sha256: str
    n_bytes: int
    task: str
    size: str
    # A data set drawn per data seed (audit/engine/synthetic.py) instead of read from a file:
    # ``file`` is empty, ``sha256`` the checksum of data seed 0's draw (Draw.checksum), ``task``
    # "synthetic" (so protocols for published files never pick it up) and n_bytes 0.
    generator: str | None = None
    # A set published as train and test files (task "train-test"): ``file`` and ``size`` are
    # empty, and n, n_classes, class_counts, imbalance_ratio, sha256, n_bytes 0 or empty where
    # the registry does not know them; a loaded Dataset's info has them from the files (sha256:
    # of the lines "<file's sha256>  <file>", so it changes with any file).
    parts: TrainTestFiles | None = None


# Generated once from the files in the shared data directory (sha256 as in SHA256SUMS).
# d is the largest feature index in the file: tictactoe has 18 (the paper says 9).
REGISTRY: dict[str, DatasetInfo] = {
    "appendicitis": DatasetInfo("appendicitis", "appendicitis-svmstyle.txt", 106, 7, 2,
        (("+1", 21), ("-1", 85)), 4.05,
        "50b0bea51c188bd769319150e4b52bdb0b9d9144851bee1babfeac3533236c5f", 6122, "binary", "small"),
    "sonar": DatasetInfo("sonar", "sonar-svmstyle.txt", 208, 60, 2,
        (("1", 97), ("-1", 111)), 1.14,
        "5d820b62d9873f13b283738971b02aef67900fcd98b310c8e77eca3d0dc53daa", 156000, "binary", "small"),
    "parkinsons": DatasetInfo("parkinsons", "parkinsons-svmstyle.txt", 195, 22, 2,
        (("1", 147), ("0", 48)), 3.06,
        "aec5103b7edf76c4ad8ef851fc266db3e45d05c0a11810b4b7ae7fff30290d37", 96266, "binary", "small"),
    "ex8b": DatasetInfo("ex8b", "ex8b-svmstyle.txt", 210, 2, 2,
        (("+1", 105), ("-1", 105)), 1.0,
        "6e6e4fd65f665119a320ea42e8eb8106048929641d8e1388bfe5ded743107e54", 5588, "binary", "small"),
    "heart": DatasetInfo("heart", "heart-svmstyle.txt", 270, 13, 2,
        (("+1", 120), ("-1", 150)), 1.25,
        "671652b87f81e679315026d3582ff2c6f6d50b4c20e026050a0dc2200a9a7e2f", 27940, "binary", "small"),
    "haberman": DatasetInfo("haberman", "haberman-svmstyle.txt", 306, 3, 2,
        (("+1", 81), ("-1", 225)), 2.78,
        "83577dadf4451e7b163b2fb944273e4a8648b8a73960aa56066a1d5c0ed70bdd", 5245, "binary", "small"),
    "ionosphere": DatasetInfo("ionosphere", "ionosphere-svmstyle.txt", 351, 34, 2,
        (("1", 225), ("-1", 126)), 1.79,
        "c4f7fb384c95f758fbc92e06652b952cdf906e28707a5f24ab5b1d691d9296e3", 102169, "binary", "small"),
    "clean1": DatasetInfo("clean1", "clean1-svmstyle.txt", 476, 166, 2,
        (("+1", 207), ("-1", 269)), 1.3,
        "5f6fabcba1ae2bc906916beee6a3c39a59c65231c04f8cd40488374418d191d2", 977228, "binary", "small"),
    "breast": DatasetInfo("breast", "breast-svmstyle.txt", 478, 10, 2,
        (("+1", 239), ("-1", 239)), 1.0,
        "0e990f7fff974197e2c942d6c54b2316a0e9a6282336846ff19b8cd2ef463e47", 43907, "binary", "small"),
    "wdbc": DatasetInfo("wdbc", "wdbc-svmstyle.txt", 569, 30, 2,
        (("+1", 212), ("-1", 357)), 1.68,
        "66704dc3f9630f2589f6297e3a75af6b62a2f6db14f2a097c4ee9e4441b57636", 385394, "binary", "small"),
    "australian": DatasetInfo("australian", "australian-svmstyle.txt", 690, 14, 2,
        (("+1", 307), ("-1", 383)), 1.25,
        "2cd070cb79b304b9f2397c04799fd49553a57caf5e8a14c13d99622886998e41", 71159, "binary", "small"),
    "diabetes": DatasetInfo("diabetes", "diabetes-svmstyle.txt", 768, 8, 2,
        (("+1", 500), ("-1", 268)), 1.87,
        "2dca3b76a3d138de239bd5a24ff9703530a74064ae2569e06b3274c0e7262074", 68645, "binary", "small"),
    "mammographic": DatasetInfo("mammographic", "mammographic-svmstyle.txt", 830, 5, 2,
        (("+1", 403), ("-1", 427)), 1.06,
        "df438dab48f576b2ad85a4aa0d46c811e8bb55622a0f1675b03029dde3220914", 20751, "binary", "small"),
    "ex8a": DatasetInfo("ex8a", "ex8a-svmstyle.txt", 766, 2, 2,
        (("+1", 383), ("-1", 383)), 1.0,
        "831d50cfb2ca2b0bb0da551e5baad82be816467db8f6ae97f7039e5356db3fa3", 18987, "binary", "small"),
    "tic": DatasetInfo("tic", "tictactoe-svmstyle.txt", 958, 18, 2,
        (("1", 626), ("-1", 332)), 1.89,
        "e2bd8dd47d38e8df822e4c69d9179642eacf064c4ef30a23808f4199c8cd6428", 114334, "binary", "small"),
    "german": DatasetInfo("german", "german-svmstyle.txt", 1000, 24, 2,
        (("+1", 300), ("-1", 700)), 2.33,
        "e461161650598fda2988f2a4c3b592634bbcae1c0eec382c94ceda5f30d4dab4", 165392, "binary", "small"),
    # LIBSVM's splice training file only (1,000 rows); its test file splice.t (2,175 rows), which
    # CDALBench's Splice column also used, is not among the shared files (docs/data.md)
    "splice": DatasetInfo("splice", "splice-svmstyle.txt", 1000, 60, 2,
        (("1", 517), ("-1", 483)), 1.07,
        "a2d597dff4e95ee6a5e153571b7126b798130e27ed1812b2b892860f55bc8c04", 541715, "binary", "small"),
    "gcloudb": DatasetInfo("gcloudb", "gcloudb-svmstyle.txt", 1000, 2, 2,
        (("+1", 500), ("-1", 500)), 1.0,
        "71a3f5c3bb327cc22b0724fdcd5fd5e6dc08bf26bdc542922e010d52838fa864", 46285, "binary", "small"),
    "gcloudub": DatasetInfo("gcloudub", "gcloudub-svmstyle.txt", 1000, 2, 2,
        (("+1", 670), ("-1", 330)), 2.03,
        "6afa2a61dbcf814da2f29badca27aa61ec3aba4a2e12662322ae8bea54e62e1a", 45633, "binary", "small"),
    "checkerboard": DatasetInfo("checkerboard", "checkerboard-svmstyle.txt", 1600, 2, 2,
        (("+1", 1032), ("-1", 568)), 1.82,
        "248e720e47caa65bad739fa231f6c96f155fc9727829dc9d008663675d104d31", 75412, "binary", "small"),
    "spambase": DatasetInfo("spambase", "spambase-svmstyle.txt", 4601, 57, 2,
        (("1", 1813), ("-1", 2788)), 1.54,
        "2b402a28eba6efeebed937eb9e68d286f59080b854a49820fede46c284b55846", 2799673, "binary", "large"),
    "banana": DatasetInfo("banana", "banana-svmstyle.txt", 5300, 2, 2,
        (("+1", 2376), ("-1", 2924)), 1.23,
        "5e29d8d1c7ce4333a20db5d1742ec769c5b19ac5c95208ec6b9ea3934df0eaa1", 250082, "binary", "large"),
    "phoneme": DatasetInfo("phoneme", "phoneme-svmstyle.txt", 5404, 5, 2,
        (("+1", 1586), ("-1", 3818)), 2.41,
        "ac22caf09e9f5fa54c6433d2f9ae59f7682fb1ff3ea0a400a12f324aaeffe17f", 607995, "binary", "large"),
    "ringnorm": DatasetInfo("ringnorm", "ringnorm-svmstyle.txt", 7400, 20, 2,
        (("+1", 3664), ("-1", 3736)), 1.02,
        "97e7e9e06a29476858e157e0e1e70d101a0c6a231b9d8a992ca4448968316200", 3323382, "binary", "large"),
    "twonorm": DatasetInfo("twonorm", "twonorm-svmstyle.txt", 7400, 20, 2,
        (("+1", 3697), ("-1", 3703)), 1.0,
        "bb4e1f034beb93a3d2d57a630259e2d018f264703f64c1033c40d76d26e3ed81", 3312146, "binary", "large"),
    "phishing": DatasetInfo("phishing", "phishing-svmstyle.txt", 11055, 30, 2,
        (("+1", 6157), ("-1", 4898)), 1.26,
        "d04532820d4decc40a699f8e3e98a9fd3841934fb11f6704017e4191ae177543", 1690332, "binary", "large"),
    "iris": DatasetInfo("iris", "iris-svmstyle.txt", 150, 4, 3,
        (("1", 50), ("2", 50), ("3", 50)), 1.0,
        "4b6f903a179a3d373880fbc9d06660c8de92b5d4573f9c7a0ec22c463b72e314", 6953, "multiclass", "small"),
    "wine": DatasetInfo("wine", "wine-svmstyle.txt", 178, 13, 3,
        (("1", 59), ("2", 71), ("3", 48)), 1.48,
        "7f879aac5750917376ed24f424c735e76cbe5c2573a73203b08f65180d013f97", 28115, "multiclass", "small"),
    "thyroid": DatasetInfo("thyroid", "thyroid-svmstyle.txt", 215, 5, 3,
        (("1", 150), ("2", 35), ("3", 30)), 5.0,
        "1091df161dbf0dd50c061f96284c353e8fb93b11957958649759cdb3ec66a85a", 6994, "multiclass", "small"),
    "vehicle": DatasetInfo("vehicle", "vehicle-svmstyle.txt", 846, 18, 4,
        (("1", 212), ("2", 217), ("3", 218), ("4", 199)), 1.1,
        "1c1b4cb16370301bc3e048329826508a710f1e112c3cfaaa7ac85c3a7561e2ef", 180522, "multiclass", "small"),
    "glass": DatasetInfo("glass", "glass-svmstyle.txt", 214, 9, 6,
        (("1", 70), ("2", 76), ("3", 17), ("4", 13), ("5", 9), ("6", 29)), 8.44,
        "f2d4cb0b57ce78c411b8c1d1db47e53dba1da4d2016370ca4463295c70ae3bbd", 20455, "multiclass", "small"),
    "seeds": DatasetInfo("seeds", "seeds-svmstyle.txt", 210, 7, 3,
        (("1", 70), ("2", 70), ("3", 70)), 1.0,
        "5998b98561260d77e6642121b7490f8adc92939280cdca402b9f1bd3bd02ae1c", 32227, "multiclass", "small"),
    "d31": DatasetInfo("d31", "d31-svmstyle.txt", 3100, 2, 31,
        (("1", 100), ("2", 100), ("3", 100), ("4", 100), ("5", 100), ("6", 100), ("7", 100),
        ("8", 100), ("9", 100), ("10", 100), ("11", 100), ("12", 100), ("13", 100), ("14", 100),
        ("15", 100), ("16", 100), ("17", 100), ("18", 100), ("19", 100), ("20", 100), ("21", 100),
        ("22", 100), ("23", 100), ("24", 100), ("25", 100), ("26", 100), ("27", 100), ("28", 100),
        ("29", 100), ("30", 100), ("31", 100)), 1.0,
        "aa2da1b924a2243c1ce68a0faaffe2c154e5df9c2a4afbc164b32544ca6afccb", 141998, "multiclass", "large"),
    "r15": DatasetInfo("r15", "r15-svmstyle.txt", 600, 2, 15,
        (("1", 40), ("2", 40), ("3", 40), ("4", 40), ("5", 40), ("6", 40), ("7", 40), ("8", 40),
        ("9", 40), ("10", 40), ("11", 40), ("12", 40), ("13", 40), ("14", 40), ("15", 40)), 1.0,
        "7e102dc07bf9c46ccf266b33a506c6382d21e3af01e509eab78917a0a45fe65c", 27524, "multiclass", "small"),
}

# Generated per data seed (CDALBench Sec. 8: "generated from scratch for each experiment"); the
# checksums are of data seed 0's draw, so a numpy whose generators draw differently is caught.
REGISTRY.update({
    "threeclust": DatasetInfo("threeclust", "", 600, 2, 2, (("1", 300), ("0", 300)), 1.0,
        "fdfe46fd7d89e3c2181656c79bef102d30945d9d0be2232cb58df10d986fbba0", 0, "synthetic", "small",
        generator="threeclust"),
    "divergingsin": DatasetInfo("divergingsin", "", 2000, 2, 2, (("1", 1000), ("0", 1000)), 1.0,
        "944fc445cc44ca98e4f5f84ca19a0c2ddcf4dddeb232ca35de5338cc1780575c", 0, "synthetic", "small",
        generator="divergingsin"),
})



def _train_test(name: str, d: int, n_classes: int, site_dir: str, train: tuple[str, ...],
                test: tuple[str, ...]) -> DatasetInfo:
    """A registry entry for a set published as train and test files: only its feature count
    (and class count where stated) is known; everything else comes from the files."""
    parts = TrainTestFiles(tuple(PublishedFile(f, site_dir) for f in train),
                           tuple(PublishedFile(f, site_dir) for f in test))
    return DatasetInfo(name, "", 0, d, n_classes, (), 0.0, "", 0, "train-test", "", parts=parts)


# CDALBench's tabular sets (Appendix E: LibSVMTools' predefined train/test splits), the files
# and feature counts its released loaders read (wernerth94/A-Cross-Domain-Benchmark-for-Active-
# Learning, datasets/splice.py, dna.py, usps.py: load_svmlight_file(..., n_features=60/180/256)).
# splice: binary/splice + splice.t, labels -1/+1 (core/data.py postprocess_svm_data's binary
# case); the shared `splice` file above is the 1,000-row train part only. dna: the train part is
# dna.scale.tr alone (the loader names dna.scale.val but never downloads it). usps: usps.bz2 +
# usps.t.bz2. Multi-class labels are 1..K with every class in the train part (core/data.py
# postprocess_svm_data asserts it). Row and class counts are not printed there: the files give them.
REGISTRY.update({
    "splice-full": _train_test("splice-full", 60, 2, "binary", ("splice",), ("splice.t",)),
    "dna": _train_test("dna", 180, 0, "multiclass", ("dna.scale.tr",), ("dna.scale.t",)),
    "usps": _train_test("usps", 256, 0, "multiclass", ("usps.bz2",), ("usps.t.bz2",)),
})

# Names people use for a set that the registry spells differently.
ALIASES = {"tictactoe": "tic", "honeypot": "threeclust", "diverging-sine": "divergingsin",
           "splice-cdalbench": "splice-full"}


def names(task: str | Sequence[str] | None = None, size: str | None = None) -> list[str]:
    """Registry names in benchmark order, optionally filtered by task (one, or any of several:
    a protocol's ``tasks``) and size."""
    tasks = None if task is None else {task} if isinstance(task, str) else set(task)
    return [k for k, v in REGISTRY.items() if (tasks is None or v.task in tasks) and size in (None, v.size)]


def get_info(name: str) -> DatasetInfo:
    """Look a data set up by name; the error lists every valid name so typos are cheap."""
    info = REGISTRY.get(ALIASES.get(name, name))
    if info is None:
        raise DataError(f"unknown data set {name!r}; known: {', '.join(sorted(REGISTRY))}")
    return info


def user_cache_dir() -> Path:
    """Per-user download cache, following the XDG base-directory convention."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "al-audit" / "datasets"


def resolve_data_dir(data_dir: str | os.PathLike | None = None) -> Path:
    """Pick the data directory: argument, then $AL_AUDIT_DATA_DIR, then the shared checkout
    next to the repo, then the user cache (which may not exist yet: loading then says so).

    A directory the user named explicitly must exist; silently falling back would load
    different files than the ones asked for.
    """
    named = _named_data_dir(data_dir)
    if named is not None:
        return named
    return REPO_DATA_DIR if REPO_DATA_DIR.is_dir() else user_cache_dir()


def _named_data_dir(data_dir: str | os.PathLike | None) -> Path | None:
    """The directory named by the argument or $AL_AUDIT_DATA_DIR (it must exist), else None."""
    for value, origin in ((data_dir, ""), (os.environ.get(DATA_DIR_ENV), f" (from ${DATA_DIR_ENV})")):
        if value is not None and str(value) != "":
            path = Path(value).expanduser()
            if not path.is_dir():
                raise DataError(f"data directory not found: {path}{origin}")
            return path.resolve()
    return None


def train_test_dir(info: DatasetInfo, data_dir: str | os.PathLike | None = None) -> Path:
    """Where a train/test set's files are: the directory named (argument, $AL_AUDIT_DATA_DIR),
    else the data directory if it holds the first train file, else the user cache, where
    `audit datasets --fetch` puts them (the shared checkout does not hold these sets)."""
    named = _named_data_dir(data_dir)
    if named is not None:
        return named
    default = resolve_data_dir()
    return default if (default / info.parts.train[0].name).exists() else user_cache_dir()


@dataclass(frozen=True, eq=False)
class Dataset:
    """A loaded data set: rows in file order, labels encoded 0..K-1, arrays read-only
    because they are shared through the in-process cache."""

    info: DatasetInfo
    X: np.ndarray
    y: np.ndarray
    classes: tuple[str, ...]
    path: Path
    # A train/test set's own split (the same for every seed): the train files' rows, then the test files'
    given: Draw | None = None

    def draw(self, data_seed: int) -> "Draw | None":
        """A generated set's draw for ``data_seed``; a train/test set's fixed split whatever the
        seed; None for a single file: its rows never change."""
        if self.given is not None:
            return self.given
        return draw(self.info.generator, data_seed) if self.info.generator else None


def parse_libsvm(path: str | os.PathLike) -> tuple[np.ndarray, list[str]]:
    """Parse a LIBSVM file: a dense float64 matrix as wide as the largest feature index,
    and the label tokens as written, both in file order. Anything odd is a DataError.
    The file is not a registered one, so its size is not bounded; it must be a regular file."""
    path = Path(path)
    return _parse(_read(path, None), path)


def encode_labels(labels: list[str], task: str | None = None) -> tuple[np.ndarray, tuple[str, ...]]:
    """Encode label tokens as int64 codes and return the original spellings by code.

    Binary: the positive label (+1 or 1) -> 1 and the other (-1 or 0) -> 0, so the three
    encodings in the benchmark agree. Multi-class: numeric order -> 0..K-1. ``task=None``
    infers binary from the label values.
    """
    spelling: dict[float, str] = {}
    for s in labels:
        spelling.setdefault(float(s), s)
    values = sorted(spelling)
    is_pm = len(values) == 2 and values[1] == 1.0 and values[0] in (-1.0, 0.0)
    if task == "binary" and not is_pm:
        found = ", ".join(spelling[v] for v in values)
        raise DataError(f"binary labels must be +1/-1, 1/-1 or 1/0; found {found}")
    code = {v: i for i, v in enumerate(values)}
    y = np.fromiter((code[float(s)] for s in labels), dtype=np.int64, count=len(labels))
    return y, tuple(spelling[v] for v in values)


def label_runs(y: np.ndarray) -> int:
    """Number of maximal runs of equal labels in file order: 2 means the file is sorted by
    label, so any protocol that takes the first rows as its pool sees one class only."""
    y = np.asarray(y)
    return 0 if y.size == 0 else 1 + int(np.count_nonzero(y[1:] != y[:-1]))


def load_dataset(name: str, data_dir: str | os.PathLike | None = None, verify: bool = True) -> Dataset:
    """Load a registered data set, checking its checksum (unless ``verify=False``) and shape.
    Either way it must be a regular file no larger than the registered size."""
    info = get_info(name)
    if info.generator:
        return _generated(info, verify)
    if info.parts:
        directory = train_test_dir(info, data_dir)
        # every file's and pin's size and mtime in the key: a file replaced in place is re-read
        return _load_train_test(info, directory, verify, tuple(_stat_key(directory / f.name, info)
                                                               for f in info.parts.files))
    path = resolve_data_dir(data_dir) / info.file
    try:
        st = path.stat()
    except FileNotFoundError:
        raise DataError(
            f"data file for {info.name!r} not found: {path} "
            f"(set --data-dir or {DATA_DIR_ENV}, or run `audit datasets --fetch`)"
        ) from None
    except OSError as e:
        raise DataError(f"cannot read {path}: {e.strerror or e}") from None
    # mtime and size in the key: a file replaced in place is re-read, not served stale.
    return _load(info, path, verify, st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=64)
def _load(info: DatasetInfo, path: Path, verify: bool, _mtime: int, _size: int) -> Dataset:
    data = _read(path, info.n_bytes)  # hash and parse the same bytes
    if verify:
        _check_sha256(path, hashlib.sha256(data).hexdigest(), info.sha256)
    X, labels = _parse(data, path)
    if X.shape != (info.n, info.d):
        raise DataError(
            f"{path} has {X.shape[0]} rows and {X.shape[1]} features; "
            f"the registry expects {info.n} x {info.d}"
        )
    try:
        y, classes = encode_labels(labels, info.task)
    except DataError as e:
        raise DataError(f"cannot load {path}: {e}") from None
    if len(classes) != info.n_classes:
        raise DataError(f"{path} has {len(classes)} classes; the registry expects {info.n_classes}")
    X.flags.writeable = False
    y.flags.writeable = False
    return Dataset(info, X, y, classes, path)


@functools.lru_cache(maxsize=8)
def _generated(info: DatasetInfo, verify: bool) -> Dataset:
    """A generated set as data seed 0 draws it (what planning and reports look at); each
    trial draws its own (audit.engine.splits.trial_rows). ``verify`` checks the registered checksum."""
    first = draw(info.generator, 0)
    if verify:
        _check_sha256(f"the {info.name} generator's draw for data seed 0", first.checksum(), info.sha256)
    return Dataset(info, first.X, first.y, tuple(sorted((label for label, _ in info.class_counts), key=float)),
                   Path(f"generated:{info.name}"))


def _stat_key(path: Path, info: DatasetInfo) -> tuple[int, int, int, int]:
    """(mtime, size) of a train/test file and of its pin; a missing file is one line."""
    try:
        st = path.stat()
    except FileNotFoundError:
        raise DataError(f"{info.name} is not present ({path} not found): "
                        f"audit datasets --fetch {info.name}") from None
    except OSError as e:
        raise DataError(f"cannot read {path}: {e.strerror or e}") from None
    try:
        pin = _pin_path(path).stat()
        return st.st_mtime_ns, st.st_size, pin.st_mtime_ns, pin.st_size
    except OSError:
        return st.st_mtime_ns, st.st_size, 0, 0


@functools.lru_cache(maxsize=8)
def _load_train_test(info: DatasetInfo, directory: Path, verify: bool, _stats: tuple) -> Dataset:
    """The train files' rows then the test files', each file checked against its published
    checksum or else its pin (``verify``), every file as wide as the loaders read it."""
    blocks, labels, digests, n_bytes = [], [], [], 0
    n_train = 0
    for part in info.parts.files:
        path = directory / part.name
        data = _read(path, PUBLISHED_MAX_BYTES)
        digest = hashlib.sha256(data).hexdigest()
        if verify:
            _check_sha256(path, digest, _expected_sha256(path, part, info))
        X, part_labels = _part_rows(data, path, info)
        blocks.append(X)
        labels += part_labels
        digests.append(f"{digest}  {part.name}\n")
        n_bytes += len(data)
        n_train += len(part_labels) if part in info.parts.train else 0
    X = np.concatenate(blocks)
    y, classes = _train_test_labels(labels, n_train, info, directory)
    counts = np.bincount(y, minlength=len(classes))
    by_count = list(zip(classes, counts.tolist()))
    known = replace(info, n=int(y.size), n_classes=len(classes),
                    class_counts=tuple(reversed(by_count)) if len(classes) == 2 else tuple(by_count),
                    imbalance_ratio=round(float(counts.max() / counts.min()), 2),
                    sha256=hashlib.sha256("".join(digests).encode()).hexdigest(), n_bytes=n_bytes,
                    size="small" if y.size < 2000 else "large")
    ids = np.arange(y.size)
    for array in (X, y, ids):
        array.flags.writeable = False
    return Dataset(known, X, y, classes, directory, Draw(X, y, ids[n_train:], ids[:n_train]))


def _part_rows(data: bytes, path: Path, info: DatasetInfo) -> tuple[np.ndarray, list[str]]:
    """One train/test file's rows, as wide as the set's feature count (the loaders'
    ``n_features``): a file whose last features are all zero is narrower, a wider one is refused."""
    X, labels = _parse(_decompressed(data, path), path)
    if X.shape[1] > info.d:
        raise DataError(f"{path} has feature index {X.shape[1]}; {info.name} has {info.d} features")
    if info.n_classes == 2:
        try:
            encode_labels(labels, "binary")
        except DataError as e:
            raise DataError(f"cannot load {path}: {e}") from None
    return np.pad(X, ((0, 0), (0, info.d - X.shape[1]))), labels


def _train_test_labels(labels: list[str], n_train: int, info: DatasetInfo,
                       directory: Path) -> tuple[np.ndarray, tuple[str, ...]]:
    """Labels encoded over both parts; every class must be in the train part, and a multi-class
    set's labels must be 1..K (as the released loader asserts)."""
    y, classes = encode_labels(labels, "binary" if info.n_classes == 2 else None)
    where = f"{info.name} in {directory}"
    if info.n_classes and len(classes) != info.n_classes:
        raise DataError(f"{where} has {len(classes)} classes; the registry expects {info.n_classes}")
    if np.unique(y[:n_train]).size != len(classes):
        raise DataError(f"{where}: the test files have a label the train files lack")
    if info.n_classes != 2 and [float(c) for c in classes] != list(range(1, len(classes) + 1)):
        raise DataError(f"{where} has labels {', '.join(classes)}; its loader expects 1..K")
    return y, classes


def _decompressed(data: bytes, path: Path) -> bytes:
    """A .bz2 file's text (every stream of it), at most DECOMPRESSED_MAX_BYTES; others as they are."""
    if not path.name.endswith(".bz2"):
        return data
    text, rest = bytearray(), data
    try:
        while rest:
            stream = bz2.BZ2Decompressor()
            text += stream.decompress(rest, max_length=DECOMPRESSED_MAX_BYTES + 1 - len(text))
            if len(text) > DECOMPRESSED_MAX_BYTES:
                raise DataError(f"{path} decompresses to more than {DECOMPRESSED_MAX_BYTES} bytes; "
                                "it is not the published file")
            if not stream.eof:
                raise DataError(f"cannot decompress {path}: it ends inside a bz2 stream (cut off)")
            rest = stream.unused_data
    except (OSError, EOFError) as e:
        raise DataError(f"cannot decompress {path}: {e}") from None
    return bytes(text)


def _pin_path(path: Path) -> Path:
    return path.with_name(path.name + PIN_SUFFIX)


def read_pin(path: Path) -> dict | None:
    """al-audit's pin of a train/test file (written at its first fetch), None when absent."""
    pin = _pin_path(path)
    if not os.path.lexists(pin):
        return None
    try:
        record = json.loads(_read(pin, 1 << 12))
        if not isinstance(record, dict) or len(str(record.get("sha256", ""))) != 64:
            raise ValueError("no sha256")
    except (ValueError, UnicodeDecodeError) as e:
        raise DataError(f"{pin} is not an al-audit pin ({e}); al-audit does not replace it") from None
    return record


def _expected_sha256(path: Path, part: PublishedFile, info: DatasetInfo) -> str:
    """The published checksum where the registry has it, else the file's pin."""
    if part.sha256:
        return part.sha256
    record = read_pin(path)
    if record is None:
        raise DataError(f"{path} is not pinned (no {_pin_path(path).name}: al-audit pins a file of "
                        f"{info.name} when it fetches it): audit datasets --fetch {info.name}")
    return record["sha256"]


def _write_pin(path: Path, digest: str, n_bytes: int, url: str) -> None:
    """Record a fetched file's checksum beside it; an existing pin is never replaced."""
    record = {"file": path.name, "sha256": digest, "n_bytes": n_bytes, "source": url,
              "pinned_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
              "meaning": "trust on first fetch: the published checksum was not known to al-audit"}
    try:
        with open(os.open(_pin_path(path), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644), "w") as f:
            json.dump(record, f, indent=1)
            f.write("\n")
    except FileExistsError:
        pass  # pinned before: the download was checked against it
    except OSError as e:
        raise DataError(f"cannot write the pin of {path}: {e.strerror or e}") from None


_NOT_REGULAR = {stat.S_IFIFO: "a FIFO", stat.S_IFCHR: "a device", stat.S_IFBLK: "a device",
                stat.S_IFSOCK: "a socket", stat.S_IFDIR: "a directory"}


def _read(path: Path, max_bytes: int | None) -> bytes:
    """A regular file's bytes, at most ``max_bytes`` (a registered file's size; None: any).

    Anything else is refused before a byte is read: a FIFO would block forever and a device
    such as /dev/zero never ends. The type is checked on the opened file (opening does not
    block: O_NONBLOCK), so a file swapped in meanwhile cannot slip through; a file larger
    than ``max_bytes`` is refused from its size, and the read stops past it should it grow.
    """
    try:
        with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY), "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                kind = _NOT_REGULAR.get(stat.S_IFMT(st.st_mode), "not a regular file")
                raise DataError(f"cannot read {path}: it is {kind}, not a regular file")
            if max_bytes is not None and st.st_size > max_bytes:
                raise _too_large(path, max_bytes)
            data = f.read(-1 if max_bytes is None else max_bytes + 1)
    except OSError as e:
        raise DataError(f"cannot read {path}: {e.strerror or e}") from None
    if max_bytes is not None and len(data) > max_bytes:
        raise _too_large(path, max_bytes)
    return data


def _too_large(where: object, max_bytes: int) -> DataError:
    return DataError(f"{where} is larger than the published file ({max_bytes} bytes); "
                     "it is corrupt or not the published version")


def _check_sha256(where: object, got: str, expected: str) -> None:
    if got != expected:
        raise DataError(
            f"checksum mismatch for {where}: expected {expected[:12]}..., got {got[:12]}...; "
            "the file is corrupt or not the published version"
        )


def _parse(data: bytes, path: Path) -> tuple[np.ndarray, list[str]]:
    """Strict LIBSVM reader: numeric labels, `index:value` pairs with strictly increasing
    1-based indices, finite values, optional `#` comments; CRLF and blank lines are fine."""
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError as e:
        raise DataError(f"cannot parse {path}: not a text file (byte {e.start})") from None

    def bad(lineno: int, what: str) -> DataError:
        return DataError(f"cannot parse {path} line {lineno}: {what}")

    labels: list[str] = []
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        tokens = line.split("#", 1)[0].split()
        if not tokens:
            continue
        try:
            ok = math.isfinite(float(tokens[0]))
        except ValueError:
            ok = False
        if not ok:
            raise bad(lineno, f"bad label {tokens[0]!r}")
        row, last = len(labels), 0
        for tok in tokens[1:]:
            idx, sep, val = tok.partition(":")
            try:
                j, v = int(idx), float(val)
            except ValueError:
                j, v = 0, 0.0
            if not sep or j <= last:
                raise bad(lineno, f"bad feature {tok!r} (want index:value, indices increasing)")
            if not math.isfinite(v):
                raise bad(lineno, f"non-finite value in {tok!r}")
            rows.append(row)
            cols.append(j - 1)
            vals.append(v)
            last = j
        labels.append(tokens[0])
    if not labels:
        raise DataError(f"cannot parse {path}: no data rows")
    X = np.zeros((len(labels), max(cols, default=-1) + 1), dtype=np.float64)
    X[rows, cols] = vals
    return X, labels


def dataset_status(name: str, data_dir: str | os.PathLike | None = None) -> dict:
    """One data set's state for `audit datasets`: never raises for a missing or corrupt
    file (only for an unknown name); the reason goes into ``problem``."""
    info = get_info(name)
    out: dict = {"name": info.name, "present": False, "verified": None, "path": None,
                 "label_runs": None, "duplicate_rows": None, "status": "missing", "problem": None,
                 "paper_differences": property_differences(info)}
    out.update((k, v) for k, v in asdict(info).items() if k != "name")
    if info.generator:  # nothing to find on disk: the generator must reproduce its checksum
        try:
            data = load_dataset(info.name)
        except DataError as e:
            return {**out, "status": "generator differs", "problem": str(e)}
        return {**out, "present": True, "verified": True, "path": str(data.path), "status": "ok",
                "label_runs": label_runs(data.y), "duplicate_rows": duplicate_rows(data.X, data.y)}
    if info.parts:
        return _train_test_status(info, out, data_dir)
    try:
        path = resolve_data_dir(data_dir) / info.file
    except DataError as e:
        return {**out, "problem": str(e)}
    out["path"] = str(path)
    if not path.exists():
        return {**out, "problem": f"not found: {path}"}
    out["present"] = True
    try:
        out["verified"] = hashlib.sha256(_read(path, info.n_bytes)).hexdigest() == info.sha256
        if not out["verified"]:
            return {**out, "status": "checksum mismatch",
                    "problem": f"checksum mismatch for {path}; the file is corrupt or not the published version"}
        data = load_dataset(info.name, path.parent)
        out["label_runs"] = label_runs(data.y)
        out["duplicate_rows"] = duplicate_rows(data.X, data.y)
    except DataError as e:
        return {**out, "status": "unreadable", "problem": str(e)}
    out["status"] = "ok"
    return out


def _train_test_status(info: DatasetInfo, out: dict, data_dir: str | os.PathLike | None) -> dict:
    """dataset_status of a train/test set: not present (how to fetch it), refused (why), or
    loaded, with each file's pin ("pins") and the counts from the files."""
    try:
        directory = train_test_dir(info, data_dir)
    except DataError as e:
        return {**out, "problem": str(e)}
    out = {**out, "path": str(directory), "pins": []}
    if not all((directory / part.name).exists() for part in info.parts.files):
        return {**out, "status": "not present", "problem": f"not present (fetch: audit datasets --fetch {info.name})"}
    out["present"] = True
    try:
        data = load_dataset(info.name, directory)
    except DataError as e:
        return {**out, "verified": False, "status": "refused", "problem": str(e)}
    for part in info.parts.files:
        pin = read_pin(directory / part.name)
        out["pins"].append(f"{part.name}: published sha256 {part.sha256}" if part.sha256 else
                           f"{part.name}: pinned at first fetch {pin['pinned_at']}, sha256 {pin['sha256']}")
    known = {k: v for k, v in asdict(data.info).items() if k in ("n", "n_classes", "class_counts",
                                                                 "imbalance_ratio", "size", "sha256", "n_bytes")}
    return {**out, **known, "verified": True, "status": "ok", "label_runs": label_runs(data.y),
            "duplicate_rows": duplicate_rows(data.X, data.y)}


def fetch(name: str, cache_dir: str | os.PathLike | None = None) -> Path:
    """Copy a data set's files from the mirror at $AL_AUDIT_DATA_URL (any urllib URL, file://
    too; a train/test set's from the LIBSVM site when it is unset) into the cache, so that only
    the published file ever appears under its real name. Returns the file, or a train/test
    set's directory.

    A download goes to al-audit's hidden ``.<file>.al-audit-partial`` beside it, stops one
    byte past the registered size (a train/test file's bound), and is linked under the real
    name once checked: against the registered checksum, else (a train/test file) against its
    pin if one is left from an earlier fetch, and its rows parsed. A train/test file is then
    pinned (``<file>.al-audit-pin.json``). The partial is removed on any failure, Ctrl-C
    included; one left by a killed fetch holds no lock and is reclaimed by the next. A file
    already under the real name is never replaced: the published (or pinned) one is kept,
    anything else is refused.
    """
    info = get_info(name)
    if info.generator:
        raise DataError(f"{info.name} is generated per data seed: there is no file to fetch")
    target_dir = Path(cache_dir).expanduser() if cache_dir is not None else user_cache_dir()
    if info.parts:
        for part in info.parts.files:
            _fetch_part(info, part, target_dir)
        return target_dir
    dest = target_dir / info.file
    if os.path.lexists(dest):
        return _keep_published(dest, info)
    base = os.environ.get(DATA_URL_ENV, "").strip()
    if not base:
        raise DataError(f"no download source configured: set {DATA_URL_ENV} to a mirror of the LIBSVM files")
    url = base.rstrip("/") + "/" + urllib.parse.quote(info.file)
    if not _fetch_into(dest, url, info.n_bytes, lambda _, digest: _check_sha256(url, digest, info.sha256)):
        return _keep_published(dest, info)
    return dest


def _fetch_part(info: DatasetInfo, part: PublishedFile, target_dir: Path) -> None:
    """Fetch one train/test file (from the mirror if set, else the LIBSVM site) and pin it."""
    dest = target_dir / part.name
    if not os.path.lexists(dest):
        base = os.environ.get(DATA_URL_ENV, "").strip()
        url = (base.rstrip("/") + "/" + urllib.parse.quote(part.name) if base
               else f"{LIBSVM_SITE}/{part.site_dir}/{urllib.parse.quote(part.name)}")
        received: list[tuple[str, int]] = []

        def check(partial: Path, digest: str) -> None:
            expected = part.sha256 or (read_pin(dest) or {}).get("sha256")
            if expected:  # the published checksum, or the pin of an earlier fetch
                _check_sha256(url, digest, expected)
            data = _read(partial, PUBLISHED_MAX_BYTES)
            try:
                _part_rows(data, dest, info)
            except DataError as e:
                raise DataError(f"download of {url} refused: {e}") from None
            received.append((digest, len(data)))

        if _fetch_into(dest, url, PUBLISHED_MAX_BYTES, check):
            _write_pin(dest, *received[0], url)
            return
    expected = part.sha256 or (read_pin(dest) or {}).get("sha256")
    if not expected:
        raise DataError(f"{dest} was not fetched by al-audit (no {_pin_path(dest).name}); "
                        f"al-audit does not replace it: move it away to fetch {info.name}")
    try:
        _check_sha256(dest, _sha256_of(dest), expected)
    except DataError as e:
        raise DataError(f"{e}; al-audit does not replace it: move it away to fetch {info.name}") from None


def _sha256_of(path: Path) -> str:
    return hashlib.sha256(_read(path, PUBLISHED_MAX_BYTES)).hexdigest()


def _fetch_into(dest: Path, url: str, max_bytes: int, check: Callable[[Path, str], None]) -> bool:
    """Download ``url`` into al-audit's partial beside ``dest``, ``check(partial, sha256)`` it
    (a DataError refuses it) and link it under ``dest``. False when a file appeared under
    ``dest`` meanwhile: it is left as it is, for the caller to judge."""
    target_dir = dest.parent
    partial = target_dir / f".{dest.name}.al-audit-partial"
    try:
        target_dir.mkdir(parents=True, exist_ok=True)
        out = _claim_partial(partial)
    except OSError as e:
        raise DataError(f"cannot write to cache directory {target_dir}: {e.strerror or e}") from None
    with out:
        try:
            digest = _download(url, out, max_bytes)
            out.flush()
            check(partial, digest)
            os.link(partial, dest)  # unlike a rename, never replaces a file that appeared meanwhile
        except FileExistsError:
            return False
        except (OSError, ValueError, http.client.HTTPException) as e:  # URLError, HTTPError, IncompleteRead
            reason = getattr(e, "reason", None) or getattr(e, "strerror", None) or e
            raise DataError(f"download of {url} failed: {reason}") from None
        finally:
            os.unlink(partial)  # still ours: we hold its lock
    return True


def _keep_published(dest: Path, info: DatasetInfo) -> Path:
    """Return a file already under the data set's name if it is the published one; refuse
    anything else, since al-audit did not write it and must not replace it."""
    try:
        _check_sha256(dest, hashlib.sha256(_read(dest, info.n_bytes)).hexdigest(), info.sha256)
    except DataError as e:
        raise DataError(f"{e}; al-audit does not replace it: move it away to fetch {info.name}") from None
    return dest


def _claim_partial(path: Path) -> BinaryIO:
    """Open al-audit's partial download locked and empty. The lock (flock) dies with its
    holder, so a partial left by a killed fetch is reclaimed, and one a live fetch is
    writing is refused."""
    out = open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o644), "wb")
    try:
        fcntl.flock(out, fcntl.LOCK_EX | fcntl.LOCK_NB)
        # A fetch that held the lock until just now may have linked this very file as the
        # data file and unlinked the partial name: only the file still under it is ours.
        if not os.path.samestat(os.fstat(out.fileno()), os.stat(path, follow_symlinks=False)):
            raise BlockingIOError
        out.truncate(0)
    except (BlockingIOError, FileNotFoundError):
        out.close()
        raise DataError(f"{path} is being written by another `audit datasets --fetch`; "
                        "wait for it to finish") from None
    except BaseException:
        out.close()
        raise
    return out


def _download(url: str, out: BinaryIO, max_bytes: int) -> str:
    """Stream ``url`` into ``out`` and return its SHA-256; more than ``max_bytes`` is refused
    after reading one byte past them, and fewer than the server announced is a cut-off
    transfer, not a corrupt file (http.client reads a closed connection as the end)."""
    digest = hashlib.sha256()
    received = 0
    with urllib.request.urlopen(url, timeout=60) as resp:
        while chunk := resp.read(min(1 << 16, max_bytes + 1 - received)):
            received += len(chunk)
            digest.update(chunk)
            out.write(chunk)
        announced = resp.headers.get("Content-Length", "")
    if received > max_bytes:
        raise _too_large(url, max_bytes)
    if announced.isdigit() and received < int(announced):
        raise DataError(f"download of {url} failed: the connection closed after {received} of {announced} bytes")
    return digest.hexdigest()


def format_registry_table(statuses: list[dict]) -> str:
    """Render dataset_status() rows as a fixed-width table."""
    header = ("name", "task", "n", "d", "classes", "IR", "size", "status", "label runs", "dup rows",
              "test in train", "vs papers")
    rows = [header]
    for s in statuses:
        counts = [c for _, c in s["class_counts"]]
        many_equal = len(counts) > 6 and len(set(counts)) == 1
        classes = f"{len(counts)}x{counts[0]}" if many_equal else "/".join(map(str, counts)) or "?"
        status = s.get("status") or ("ok" if s.get("verified") else "missing")
        counts = [s.get(key) for key in ("label_runs", "duplicate_rows", "test_in_train")]
        differs = s.get("paper_differences")
        papers = ("differs" + " (!)" * any(d.endswith("(no paper agrees)") for d in differs)) if differs else "ok"
        known = bool(s["n"])  # a train/test set not loaded: the registry knows only d
        rows.append((s["name"], s["task"], str(s["n"]) if known else "?", str(s["d"]), classes,
                     f"{s['imbalance_ratio']:.2f}" if known else "?", s["size"] or "?", status,
                     *("-" if c is None else str(c) for c in counts), papers))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    right = {2, 3, 5, 8, 9, 10}

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    flags = [f"{s['name']}: {d}" for s in statuses for d in s.get("paper_differences") or []]
    notes = ["", "Properties that differ from the papers (zhan2021 Table 2; [60]'s Table 2 -> new version in "
             "lu2023 Table 5); (!) = no paper agrees: replays on that file cannot be compared trial by trial "
             "with the papers' runs:", *flags] if flags else []
    pairs = [f"{s['name']}: {'; '.join(s['pins']) if s.get('pins') else s['problem']}"
             for s in statuses if s["task"] == "train-test"]
    if pairs:
        notes += ["", "Train/test sets (the published files' checksums are not known to al-audit: each file is "
                  "pinned at its first fetch, docs/data.md):", *pairs]
    return "\n".join([line(header), line(tuple("-" * w for w in widths))] + [line(r) for r in rows[1:]] + notes)


PROPERTIES_DIR = REFERENCE_DIR / "dataset_properties"
# What a paper row prints -> the DatasetInfo field it is compared with.
PRINTED_PROPERTIES = {"n": "n", "d": "d", "classes": "n_classes", "imbalance_ratio": "imbalance_ratio"}


@functools.lru_cache(maxsize=1)
def paper_properties() -> tuple[dict[str, str], ...]:
    """The data-set properties the papers print (reference_results/dataset_properties/*.csv)."""
    import csv

    rows: list[dict[str, str]] = []
    for path in sorted(PROPERTIES_DIR.glob("*.csv")):
        with open(path, encoding="utf-8", newline="") as f:
            rows += [{**row, "source": f"{path.name}:{i}"} for i, row in enumerate(csv.DictReader(f), 2)]
    return tuple(rows)


def _agrees(printed: str, value: float) -> bool:
    """Equal up to one unit of the printed last digit (lu2023 prints [60]'s IR 2.78 as 2)."""
    decimals = len(printed.partition(".")[2])
    return abs(float(printed) - value) < 10 ** -decimals


def _source(row: dict[str, str]) -> str:
    """'zhan2021 Table 2'; a paper's number printed in another's table says whose it is:
    'zhan2021 as quoted in lu2023 Table 5'."""
    if row["table"].split(" ")[0] in ("lu2023", "zhan2021") and not row["table"].startswith(row["paper"]):
        return f"{row['paper']} as quoted in {row['table']}"
    return f"{row['paper']} {row['table']}"


def property_differences(info: DatasetInfo) -> list[str]:
    """One line per property where the file differs from a paper's table, each printed value
    with the tables that print it, e.g. 'n is 208 in the file; 108 in zhan2021 Table 2 and
    zhan2021 as quoted in lu2023 Table 5; 208 in lu2023 Table 5'; '(no paper agrees)' when none
    prints the file's value."""
    lines = []
    for printed, field in PRINTED_PROPERTIES.items():
        value = getattr(info, field)
        stated = [row for row in paper_properties() if row["dataset"] == info.name and row[printed]]
        if all(_agrees(row[printed], value) for row in stated):
            continue
        sources: dict[str, list[str]] = {}
        for row in sorted(stated, key=lambda r: " as quoted in " in _source(r)):  # a paper's own table first
            sources.setdefault(row[printed], []).append(_source(row))
        ordered = sorted(sources.items(), key=lambda item: _agrees(item[0], value))
        said = "; ".join(f"{text} in {' and '.join(where)}" for text, where in ordered)
        agrees = any(_agrees(row[printed], value) for row in stated)
        lines.append(f"{printed} is {value:g} in the file; {said}" + ("" if agrees else " (no paper agrees)"))
    return lines


def incomparable(info: DatasetInfo) -> bool:
    """True when some property of the file agrees with no paper: the papers' runs used another file."""
    return any(line.endswith("(no paper agrees)") for line in property_differences(info))


def duplicate_rows(X: np.ndarray, y: np.ndarray) -> int:
    """Rows equal (features and label) to an earlier row of the file."""
    return int(len(y) - len(np.unique(np.column_stack([X, y]), axis=0)))


def test_rows_seen_in_training(X: np.ndarray, test: np.ndarray, train: np.ndarray) -> int:
    """Test rows whose feature vector is also a training row's: the model is tested on points it saw."""
    _, codes = np.unique(X, axis=0, return_inverse=True)
    return int(np.isin(codes[test], codes[train]).sum())
