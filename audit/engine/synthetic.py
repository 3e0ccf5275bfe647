"""Data sets generated per data seed: CDALBench's Honeypot ("ThreeClust") and Diverging Sine.

CDALBench draws its two synthetic sets afresh for every run, so that no method can
memorise them. A draw here follows the order of the authors' released generator (facts
read from their repository, re-expressed): one ``numpy.random.Generator`` seeded by the
data seed draws the points, then shuffles the row indices with the same generator; the
first 20% of the shuffled indices are the test rows, the rest the train rows in that
order. Rows are returned unscaled: the released min-max scaling (a separate scaler fitted
on the test rows) is a protocol knob, ``[scaling] test_fit`` (``audit/engine/runner.py``).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Callable

import numpy as np

TEST_RATIO = 0.2  # the authors' test_ratio for both sets


def threeclust(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Honeypot: four 2-D Gaussian clusters of 150 points with identity covariance, drawn
    in this order: mean (0, 0) label 1, (4, 3) label 1, (0, 6) label 0, (4, 3) label 0.
    The two (4, 3) clusters overlap with opposite labels: the "honeypot"."""
    clusters = [((0.0, 0.0), 1), ((4.0, 3.0), 1), ((0.0, 6.0), 0), ((4.0, 3.0), 0)]
    identity = np.eye(2)
    X = np.concatenate([rng.multivariate_normal(mean, identity, 150) for mean, _ in clusters])
    y = np.repeat([label for _, label in clusters], 150)
    return X, y


def divergingsin(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Diverging Sine: at x = linspace(0, 10, 1000), label 1 at sin(2x) + 0.5x + N(0, 0.3)
    and then label 0 at sin(2x) - 0.5x + N(0, 0.3): 2000 points whose classes meet at the
    left (hard) and part to the right (easy)."""
    x = np.linspace(0.0, 10.0, 1000)
    above = np.sin(2 * x) + 0.5 * x + rng.normal(0.0, 0.3, x.size)
    below = np.sin(2 * x) - 0.5 * x + rng.normal(0.0, 0.3, x.size)
    X = np.concatenate([np.column_stack([x, above]), np.column_stack([x, below])])
    y = np.repeat([1, 0], x.size)
    return X, y


GENERATORS: dict[str, Callable[[np.random.Generator], tuple[np.ndarray, np.ndarray]]] = {
    "threeclust": threeclust,
    "divergingsin": divergingsin,
}


@dataclass(frozen=True, eq=False)
class Draw:
    """One data seed's draw: every row in generation order, the test rows, and the train
    rows in the order the shuffle left them."""

    X: np.ndarray
    y: np.ndarray
    test: np.ndarray
    train: np.ndarray

    def checksum(self) -> str:
        """SHA-256 of the draw (features, labels, test and train rows as little-endian
        float64 / int64 bytes): equal checksums mean the same draw."""
        digest = hashlib.sha256()
        for array, dtype in ((self.X, "<f8"), (self.y, "<i8"), (self.test, "<i8"), (self.train, "<i8")):
            digest.update(np.ascontiguousarray(array, dtype=dtype).tobytes())
        return digest.hexdigest()


def draw(name: str, data_seed: int) -> Draw:
    """The draw of generated set ``name`` for ``data_seed`` (the protocol's s_D)."""
    rng = np.random.default_rng(data_seed)
    X, labels = GENERATORS[name](rng)
    y = labels.astype(np.int64)
    ids = np.arange(y.size)
    rng.shuffle(ids)
    cut = int(y.size * TEST_RATIO)
    for array in (X, y, ids):
        array.flags.writeable = False
    return Draw(X, y, ids[:cut], ids[cut:])
