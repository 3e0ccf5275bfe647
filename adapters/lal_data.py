"""LAL's regressor training data, regenerated here by the LAL authors' procedure.

ALiPy's ``QueryInstanceLAL`` trains a random-forest regressor on an ``.npz`` file that it
downloads from the LAL authors' GitHub at run time (arrays ``arr_0``: one row of 8 features
per (learning state, candidate), ``arr_1``: the reduction of test error after labelling that
candidate). Offline that fails. This module regenerates such a file with the procedure of
the authors' released generator (``LAL dataset generation/`` in ksenia-konyushkova/LAL:
``Dataset4LAL.py``, ``Tree4LAL.py``, ``LALmodel.py``, ``generateLAL-iterative.ipynb``;
the facts, with lines, are in docs/strategies.md#lal), written anew on a seeded numpy
``Generator``:

- one simulated AL episode: a 2-D two-class Gaussian data set (class-1 share uniform in
  10%..90%, 400 train rows, 10x as many test rows per class; each class mean uniform in
  [0, 1)^2, covariance A A^T with A uniform in [-0.5, 0.5)^2x2); one random row of each
  class is labelled, the other train rows are the pool in random order;
- the state is grown to ``k`` labelled rows: "iterative" by the LAL regressor learnt for
  each smaller size (the row its prediction ranks highest), "random" by random rows;
- a 50-tree random forest (out-of-bag score on) is fitted on the ``k`` labelled rows; the
  first ``candidates`` pool rows each give one feature row (the 8 features ALiPy's
  ``select`` computes, in its order) and the target: test 0-1 error of that forest minus
  the test error of a fresh 50-tree forest fitted with the candidate added;
- sizes k = 2..49, ``episodes`` data sets per size; in "iterative" mode, after each size
  a regressor on that size's rows (7 features: all but the labelled count) drives the
  next sizes' trajectories.

The authors ran 500 episodes per size (240,000 rows) and chose each size's regressor by
out-of-bag score over a 27-setting grid (500 to 5000 trees). Both are far beyond what one
core does in minutes here (scikit-learn fits a 50-tree forest on a few rows in about 0.1 s,
and the full size fits about 830,000 of them), so the default here is
:data:`DEFAULT_CONFIG`: fewer episodes and one fixed regressor setting. Files and reports
say which was used; the result is "locally regenerated training data", never the authors'.

Files go to ``<user cache>/al-audit/lal/<version>-<config hash>/`` under ALiPy's file name,
with a JSON sidecar (generator version, seed, parameters, sha256, seconds). A file is
written to a temporary name and linked into place (never replacing one); a lock file
serialises concurrent generators; a file under the name without al-audit's sidecar (or
with a checksum that does not match) is refused, never overwritten.
"""
from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from audit.errors import StrategyError

if TYPE_CHECKING:  # the forests are imported where they are used: the store reads this module's file names
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

GENERATOR_VERSION = 1
FILES = {
    "iterative": "LAL-iterativetree-simulatedunbalanced-big.npz",
    "random": "LAL-randomtree-simulatedunbalanced-big.npz",
}
MODES = {"LAL_iterative": "iterative", "LAL_independent": "random"}
"""ALiPy's LAL ``mode`` -> the criterion (and file name) of its training data."""
AUTHORS_FILES = {mode: FILES[criterion] for mode, criterion in MODES.items()}
"""Per mode, the name of the LAL authors' file, which ALiPy downloads and reads."""
AUTHORS_DATA_ENV = "AL_AUDIT_LAL_DATA"
"""A directory holding the authors' files: used instead of the regenerated ones."""
SIDECAR_SUFFIX = ".al-audit.json"
CACHE_ENV = "AL_AUDIT_LAL_CACHE"
"""A directory to use instead of ``<user cache>/al-audit/lal`` (tests, shared caches)."""


@dataclass(frozen=True)
class LalDataConfig:
    """One generation's parameters; the authors' values are the defaults except where noted."""

    criterion: str = "iterative"  # "iterative" (LAL_iterative) or "random" (LAL_independent)
    episodes: int = 500  # simulated data sets per labelled-set size
    sizes: tuple[int, ...] = tuple(range(2, 50))  # labelled-set sizes k (np.arange(2, 50))
    candidates: int = 10  # candidates scored per episode (n_points_per_experiment)
    n_dim: int = 2
    train_size: int = 400  # nDatapoints
    test_factor: int = 10  # test rows per class = 10 x train rows of that class
    n_trees: int = 50  # the classifier's forest (Tree4LAL.n_estimators)
    # The regressor that drives "iterative" trajectories. The authors cross-validated it per
    # size over n_estimators {500, 1000, 5000} x max_depth {5, 10, 20} x max_features {3, 5, 7};
    # here one fixed setting (the depth and features their logged run chose at size 3).
    selector_trees: int = 100
    selector_depth: int = 20
    selector_features: int = 5
    seed: int = 805  # the authors' np.random.seed(805); here the seed of a numpy Generator

    def key(self) -> str:
        """Version and a short hash of the parameters: the cache sub-directory."""
        text = json.dumps(self.as_dict(), sort_keys=True)
        return f"v{GENERATOR_VERSION}-{self.criterion}-{self.episodes}ep-{hashlib.sha256(text.encode()).hexdigest()[:10]}"

    def as_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["sizes"] = list(self.sizes)
        return out

    @property
    def n_episodes(self) -> int:
        return self.episodes * len(self.sizes)

    @property
    def n_rows(self) -> int:
        return self.n_episodes * self.candidates


AUTHORS_CONFIG = LalDataConfig()
"""The authors' size: 500 episodes per size, 24,000 episodes, 240,000 rows (their file's)."""

DEFAULT_CONFIG = LalDataConfig(episodes=1)
"""What al-audit generates: 1 episode per size (48 episodes, 480 rows: 0.2% of the
authors'): 1187 s (20 minutes) on one core of the shared, loaded two-core machine where it
was measured with scikit-learn's forests; 198 CPU s with the lean forests (the same file,
byte for byte); the authors' size would take days."""


# --- the simulation ---------------------------------------------------------------------

def _forest_seed(rng: np.random.Generator) -> int:
    return int(rng.integers(2**31 - 1))


def simulate_dataset(rng: np.random.Generator, config: LalDataConfig
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(X_train, y_train, X_test, y_test)`` of one unbalanced two-Gaussian data set
    (Dataset4LAL.DatasetSimulated): class 1 first, then class 0."""
    share = (rng.random() - 0.5) * 0.8 + 0.5  # class-1 proportion in 10%..90%
    n1 = int(config.train_size * share)
    n0 = config.train_size - n1
    d = config.n_dim
    mean1 = rng.random(d)
    a = rng.random((d, d)) - 0.5
    cov1 = a @ a.T
    mean0 = rng.random(d)
    a = rng.random((d, d)) - 0.5
    cov0 = a @ a.T
    X_train = np.concatenate([rng.multivariate_normal(mean1, cov1, n1), rng.multivariate_normal(mean0, cov0, n0)])
    X_test = np.concatenate([rng.multivariate_normal(mean1, cov1, n1 * config.test_factor),
                             rng.multivariate_normal(mean0, cov0, n0 * config.test_factor)])
    y_train = np.concatenate([np.ones(n1), np.zeros(n0)])
    y_test = np.concatenate([np.ones(n1 * config.test_factor), np.zeros(n0 * config.test_factor)])
    return X_train, y_train, X_test, y_test


def _forest(config: LalDataConfig, rng: np.random.Generator, oob: bool) -> RandomForestClassifier:
    """scikit-learn's forest, fitted through the bit-identical lean path (audit.fast.forest)."""
    from audit.fast.forest import LeanForest

    return LeanForest(n_estimators=config.n_trees, oob_score=oob, n_jobs=1, random_state=_forest_seed(rng))


def state_features(model: RandomForestClassifier, X_candidates: np.ndarray, known_labels: np.ndarray,
                   n_dim: int, with_size: bool = True) -> np.ndarray:
    """The LAL features of each candidate, in ALiPy's ``select`` order: mean and SD over the
    trees of P(class 0); share of class 1 among the labelled; OOB score; SD of the feature
    importances / n_dim; mean of the SDs; mean tree depth; (labelled count)."""
    per_tree = np.array([tree.predict_proba(X_candidates)[:, 0] for tree in model.estimators_])
    f1, f2 = per_tree.mean(axis=0), per_tree.std(axis=0)
    ones = np.ones_like(f1)
    n = known_labels.size
    columns = [f1, f2, (np.sum(known_labels > 0) / n) * ones, model.oob_score_ * ones,
               np.std(model.feature_importances_ / n_dim) * ones, np.mean(f2) * ones,
               np.mean([tree.tree_.max_depth for tree in model.estimators_]) * ones]
    if with_size:
        columns.append(n * ones)
    return np.column_stack(columns)


def run_episode(rng: np.random.Generator, config: LalDataConfig, size: int,
                selectors: list[RandomForestRegressor]) -> tuple[np.ndarray, np.ndarray]:
    """One simulated episode at labelled-set size ``size``: (features, targets) of
    ``config.candidates`` candidates (Tree4LAL.generateTree + getLALdatapoints)."""
    X, y, X_test, y_test = simulate_dataset(rng, config)
    ones, zeros = rng.permutation(np.flatnonzero(y == 1)), rng.permutation(np.flatnonzero(y == 0))
    known = np.array([ones[0], zeros[0]])
    unknown = rng.permutation(np.concatenate([ones[1:], zeros[1:]]))
    if config.criterion == "random":
        known, unknown = np.concatenate([known, unknown[:size - 2]]), unknown[size - 2:]
    else:
        for step in range(2, size):
            model = _forest(config, rng, oob=True).fit(X[known], y[known])
            features = state_features(model, X[unknown], y[known], config.n_dim, with_size=False)
            best = int(np.argmax(selectors[step - 2].predict(features)))
            known, unknown = np.append(known, unknown[best]), np.delete(unknown, best)
    model = _forest(config, rng, oob=True).fit(X[known], y[known])
    candidates = unknown[:config.candidates]
    features = state_features(model, X[candidates], y[known], config.n_dim)
    error = np.mean(model.predict(X_test) != y_test)
    gains = np.empty(candidates.size)
    for i, row in enumerate(candidates):
        rows = np.append(known, row)
        grown = _forest(config, rng, oob=False).fit(X[rows], y[rows])
        gains[i] = error - np.mean(grown.predict(X_test) != y_test)
    return features, gains


def generate(config: LalDataConfig = DEFAULT_CONFIG, progress: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """``(arr_0, arr_1)`` of a whole generation (generateLAL-iterative.ipynb's loop)."""
    from audit.fast.forest import LeanForestRegressor

    if config.criterion not in FILES:
        raise StrategyError(f"LAL data criterion must be one of {sorted(FILES)}")
    if config.criterion == "iterative" and tuple(config.sizes) != tuple(range(2, 2 + len(config.sizes))):
        raise StrategyError("iterative LAL data needs the sizes 2, 3, ... in order (each drives the next)")
    rng = np.random.default_rng(config.seed)
    selectors: list[RandomForestRegressor] = []
    all_features, all_gains = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # OOB on 2 rows: some rows never out of bag
        for size in config.sizes:
            episodes = [run_episode(rng, config, size, selectors) for _ in range(config.episodes)]
            features = np.concatenate([f for f, _ in episodes])
            gains = np.concatenate([g for _, g in episodes])
            if config.criterion == "iterative":
                selector = LeanForestRegressor(n_estimators=config.selector_trees, max_depth=config.selector_depth,
                                               max_features=config.selector_features, n_jobs=1,
                                               random_state=_forest_seed(rng))
                selectors.append(selector.fit(features[:, :-1], gains))
            all_features.append(features)
            all_gains.append(gains)
            if progress is not None:
                progress(size)
    return np.concatenate(all_features), np.concatenate(all_gains)


# --- the cache ------------------------------------------------------------------------

def cache_root() -> Path:
    """``$AL_AUDIT_LAL_CACHE``, else ``lal/`` beside the data-set cache (XDG cache)."""
    value = os.environ.get(CACHE_ENV, "").strip()
    if value:
        return Path(value).expanduser()
    from audit.engine.datasets import user_cache_dir

    return user_cache_dir().parent / "lal"


def data_dir(config: LalDataConfig = DEFAULT_CONFIG) -> Path:
    """The directory that holds (or will hold) the file of ``config``: ALiPy's ``data_path``."""
    return cache_root() / config.key()


def file_sha256(path: str | Path) -> str:
    """The SHA-256 of a file's bytes, in hex."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def cached(config: LalDataConfig = DEFAULT_CONFIG) -> dict[str, Any] | None:
    """The sidecar of the cached file of ``config`` when it is there and is al-audit's;
    None when nothing is there; StrategyError for a file al-audit did not write."""
    path = data_dir(config) / FILES[config.criterion]
    if not os.path.lexists(path):
        return None
    sidecar = path.with_name(path.name + SIDECAR_SUFFIX)
    try:
        meta = json.loads(sidecar.read_text())
        ours = (meta.get("generator") == "al-audit lal_data" and meta.get("config") == config.as_dict()
                and path.is_file() and not path.is_symlink() and file_sha256(path) == meta.get("sha256"))
    except (OSError, ValueError, AttributeError):
        ours = False
    if not ours:
        raise StrategyError(f"{path} was not written by al-audit's LAL data generator (no matching sidecar "
                            f"{sidecar.name} or checksum); al-audit does not replace it: move it away, or set "
                            f"AL_AUDIT_LAL_DATA to its directory if it is the LAL authors' file")
    return meta


def _refuse_foreign_sidecar(config: LalDataConfig) -> None:
    """The sidecar's name may hold only al-audit's own sidecar (one a killed generation left
    before linking its file) or nothing; anything else is the user's and is never replaced."""
    path = data_dir(config) / FILES[config.criterion]
    sidecar = path.with_name(path.name + SIDECAR_SUFFIX)
    if not os.path.lexists(sidecar):
        return
    try:
        ours = (sidecar.is_file() and not sidecar.is_symlink()
                and json.loads(sidecar.read_text()).get("generator") == "al-audit lal_data")
    except (OSError, ValueError, AttributeError):
        ours = False
    if not ours:
        raise StrategyError(f"{sidecar} was not written by al-audit's LAL data generator; al-audit does not "
                            f"replace it: move it away")


def _write_npz(path: Path, features: np.ndarray, gains: np.ndarray) -> None:
    """``np.savez``'s format (arr_0, arr_1), with fixed zip timestamps: same arrays, same bytes."""
    import zipfile

    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as zf:
        for name, array in (("arr_0", features), ("arr_1", gains)):
            buffer = _npy_bytes(np.ascontiguousarray(array))
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            zf.writestr(info, buffer)


def _npy_bytes(array: np.ndarray) -> bytes:
    import io

    out = io.BytesIO()
    np.lib.format.write_array(out, array, allow_pickle=False)
    return out.getvalue()


@contextlib.contextmanager
def _locked(directory: Path):
    """An exclusive lock on ``directory/.lock`` (flock: released when its holder dies)."""
    with open(directory / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def ensure(config: LalDataConfig = DEFAULT_CONFIG, progress: Any = None) -> tuple[Path, dict[str, Any]]:
    """The cached file's directory and sidecar, generating the file first if it is missing.
    Concurrent callers wait on a lock: one generates, the others then find its file."""
    meta = cached(config)
    directory = data_dir(config)
    if meta is not None:
        return directory, meta
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise StrategyError(f"cannot create the LAL data cache {directory}: {e.strerror or e}") from None
    with _locked(directory):
        meta = cached(config)
        if meta is not None:
            return directory, meta
        _refuse_foreign_sidecar(config)  # before the generation: its name is replaced at the end
        started = time.perf_counter()
        features, gains = generate(config, progress)
        seconds = time.perf_counter() - started
        final = directory / FILES[config.criterion]
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".al-audit-", suffix=".npz.partial")
        os.close(fd)
        sidecar_tmp = Path(tmp + ".json")  # both temporary names are ours: mkstemp made tmp
        try:
            _write_npz(Path(tmp), features, gains)
            meta = {"generator": "al-audit lal_data", "version": GENERATOR_VERSION, "seed": config.seed,
                    "config": config.as_dict(), "episodes": config.n_episodes, "rows": int(gains.size),
                    "authors_episodes": AUTHORS_CONFIG.n_episodes, "seconds": round(seconds, 1),
                    "sha256": file_sha256(Path(tmp)), "file": final.name}
            sidecar = final.with_name(final.name + SIDECAR_SUFFIX)
            sidecar_tmp.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
            os.replace(sidecar_tmp, sidecar)  # ours: only al-audit writes this name
            os.link(tmp, final)  # unlike a rename, never replaces a file that appeared meanwhile
        except FileExistsError:
            return directory, cached(config) or meta
        finally:
            for leftover in (tmp, sidecar_tmp):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(leftover)
    return directory, meta


def describe(meta: dict[str, Any]) -> str:
    """The honesty label of a regenerated file, for the capability matrix and reports."""
    return (f"training data regenerated locally (al-audit lal_data v{meta['version']}, seed {meta['seed']}, "
            f"{meta['episodes']} simulated episodes vs the authors' {meta['authors_episodes']}), "
            f"not the LAL authors' file")
