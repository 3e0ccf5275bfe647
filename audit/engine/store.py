"""SQLite results store: one transaction per finished trial.

A trial is keyed by (protocol, dataset, strategy, trial seed, fingerprint), where the
fingerprint covers the protocol spec, the code a trial runs (see :func:`replay_sources`)
and the environment (:func:`audit.engine.environment.environment_versions`): a result is reused only when all of them are the same. A trial and its rounds are written
in one transaction, so a run killed at any moment leaves each trial either complete or
absent, and the UNIQUE key makes a finished trial impossible to store twice.

A file is checked before SQLite writes to it: al-audit writes only to an undamaged store
of its own whose schema version (``PRAGMA user_version``) it knows. Anything else (another
program's database, a damaged or older store, a file that is not SQLite, a directory) is
left byte for byte as it is, with one line saying why; so is every later SQLite error.
"""
from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import json
import os
import sqlite3
from contextlib import contextmanager
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import adapters
from adapters.lal_data import AUTHORS_DATA_ENV, AUTHORS_FILES  # without importing ALiPy
from audit.engine.environment import environment_versions
from audit.engine.runner import RoundRecord, TrialResult
from audit.errors import AuditError
from audit.paths import PROJECT_ROOT
from audit.protocols import Protocol

DEFAULT_STORE = Path(".audit-store.sqlite")

# PRAGMA user_version of the stores this code writes. 0 is a store written before versioning:
# one whose tables match version 1's layout is taken as version 1, nothing else is.
SCHEMA_VERSION = 2
# Columns each version added, as (table, column, declaration): an older store is upgraded in
# place on open (ALTER TABLE ... ADD COLUMN), its existing rows holding NULL there ("not recorded").
ADDED_COLUMNS = {2: (("trials", "fast_path", "TEXT"),)}
SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS fingerprints (
    fingerprint TEXT PRIMARY KEY,
    details TEXT NOT NULL
)""",
    """
CREATE TABLE IF NOT EXISTS trials (
    id INTEGER PRIMARY KEY,
    protocol TEXT NOT NULL,
    dataset TEXT NOT NULL,
    strategy TEXT NOT NULL,
    trial_seed INTEGER NOT NULL,
    fingerprint TEXT NOT NULL REFERENCES fingerprints(fingerprint),
    status TEXT NOT NULL CHECK (status IN ('ok', 'error', 'tle')),
    aubc REAL,
    aubc_by_metric TEXT,
    query_hash TEXT,
    error TEXT,
    warnings TEXT,
    seconds REAL NOT NULL,
    finished_at TEXT NOT NULL,
    fast_path TEXT,
    UNIQUE (protocol, dataset, strategy, trial_seed, fingerprint)
)""",
    """
CREATE TABLE IF NOT EXISTS rounds (
    trial_id INTEGER NOT NULL REFERENCES trials(id) ON DELETE CASCADE,
    round INTEGER NOT NULL,
    n_labeled INTEGER NOT NULL,
    queried TEXT NOT NULL,
    accuracy REAL, f1 REAL, roc_auc REAL,
    fit_seconds REAL, query_seconds REAL,
    PRIMARY KEY (trial_id, round)
) WITHOUT ROWID""",
    """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY,
    pid INTEGER NOT NULL,
    host TEXT NOT NULL,
    executor TEXT NOT NULL,
    workers INTEGER NOT NULL,
    running INTEGER NOT NULL DEFAULT 0,
    state TEXT NOT NULL CHECK (state IN ('running', 'finished', 'interrupted')),
    plan TEXT NOT NULL,
    started_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
)""",
)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


# What a stored trial is computed by: the runner, and the adapters package, whose modules
# are imported by name at run time. Everything these import from this tool, at any depth,
# belongs to it too (replay_sources); reports, statistics, diagnosis, the comparison with
# the papers and the CLI only read stored trials.
REPLAY_ROOTS = ("audit.engine.runner", "adapters")
NOT_REPLAYED = ("adapters.testing",)  # the conformance checks: they test adapters, no trial runs them
_OWN_PACKAGES = ("audit", "adapters")


def _source(module: str) -> Path | None:
    """The file of one of this tool's modules, or None for anything else."""
    if module.split(".")[0] not in _OWN_PACKAGES:
        return None
    base = PROJECT_ROOT.joinpath(*module.split("."))
    return next((p for p in (base.with_suffix(".py"), base / "__init__.py") if p.is_file()), None)


def _imports(path: Path, in_functions: bool = True) -> list[tuple[str, bool]]:
    """(module, whether its functions may run) for every absolute import of the file,
    function-level ones included unless ``in_functions`` is false. ``from a import b`` of a
    module ``a.b`` runs ``a.b`` and only the module-level code of the package ``a``."""
    tree = ast.parse(path.read_bytes(), str(path))
    found = []
    for node in ast.walk(tree) if in_functions else tree.body:
        if isinstance(node, ast.Import):
            found += [(alias.name, True) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            submodules = [f"{node.module}.{a.name}" for a in node.names if _source(f"{node.module}.{a.name}")]
            found += [(name, True) for name in submodules]
            found.append((node.module, len(submodules) < len(node.names)))  # a name defined in node.module
    return found


@lru_cache(maxsize=1)
def replay_sources() -> tuple[Path, ...]:
    """The source files a trial can execute: REPLAY_ROOTS (a package with all its modules),
    their parent packages, and every module of this tool they import, transitively. A
    package that is only a parent runs just its module-level code on import, so only
    those imports count (``audit``'s on-demand API loader is not part of a trial)."""
    todo, found = [(root, True) for root in REPLAY_ROOTS], {}
    while todo:
        module, imported = todo.pop()
        path = _source(module)
        if path is None or found.get(module) in (True, imported):
            continue
        found[module] = imported
        if module in REPLAY_ROOTS and path.name == "__init__.py":
            todo += [(f"{module}.{p.stem}", True) for p in path.parent.glob("*.py")
                     if p.stem != "__init__" and f"{module}.{p.stem}" not in NOT_REPLAYED]
        parts = module.split(".")
        todo += [(".".join(parts[:i]), False) for i in range(1, len(parts))]
        todo += _imports(path, in_functions=imported)
    return tuple(sorted({_source(module) for module in found}))


def model_versions(protocol: Protocol) -> dict[str, str]:
    """The versions of what the protocol's task models need beyond the base install (PyTorch
    for CDALBench's): only such a protocol's fingerprint names them, so others keep theirs."""
    from audit.engine.environment import distribution_version
    from audit.engine.models import REQUIRES

    specs = [protocol.task_model, *protocol.task_model_by_dataset.values()]
    return {module: distribution_version(module) for module in sorted({REQUIRES[s.name][1] for s in specs
                                                                         if s.name in REQUIRES})}


@lru_cache(maxsize=1)
def code_hash() -> str:
    """Hash of the code a trial runs (replay_sources): when it changes, trials are recomputed;
    an edit to a report or a statistic keeps every stored trial."""
    digest = hashlib.sha256()
    for path in replay_sources():
        digest.update(str(path.relative_to(PROJECT_ROOT)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def fingerprint_details(protocol: Protocol) -> dict[str, Any]:
    details = {"protocol_spec": protocol.spec_hash, "code": code_hash(),
               "versions": {**environment_versions(), **model_versions(protocol)}}
    plugins = {}
    for spec in protocol.strategies.values():  # a plug-in's own code, outside this tool's sources
        with contextlib.suppress(AuditError):  # one that does not load runs nothing
            if (digest := adapters.plugin_code_hash(spec.implementation)) is not None:
                plugins[spec.implementation] = digest
    details = {**details, "plugins": plugins} if plugins else details
    lal = _lal_authors_file(protocol)
    return {**details, "lal_data": lal} if lal else details




def _lal_authors_file(protocol: Protocol) -> dict[str, str] | None:
    """{mode: sha256} of the files a protocol's ALiPy LAL reads from $AL_AUDIT_LAL_DATA (the
    authors'), so trials run on them are never mixed with trials run on the regenerated
    file (that one is covered by the code hash: the same code writes the same bytes)."""
    directory = os.environ.get(AUTHORS_DATA_ENV)
    if not directory:
        return None
    found = {}
    for spec in protocol.strategies.values():
        mode = spec.params.get("mode", "LAL_iterative")
        path = Path(directory) / AUTHORS_FILES.get(mode, "")
        if spec.implementation == "alipy.lal" and path.is_file():
            with open(path, "rb") as f:
                found[mode] = hashlib.file_digest(f, "sha256").hexdigest()
    return found or None


def fingerprint_of(details: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(details, sort_keys=True).encode()).hexdigest()[:16]


LEFT_AS_IS = "al-audit left it as it is; give another --store"
KEPT = "; every trial stored so far is kept, and a rerun resumes"  # after a failed write


@lru_cache(maxsize=None)
def _layout(version: int = SCHEMA_VERSION) -> dict[str, list[tuple]]:
    """{table: its PRAGMA table_info rows} in a store of ``version`` (0 reads as 1), as SQLite
    reads them: SCHEMA's tables without the columns later versions added."""
    later = {(table, column) for v, added in ADDED_COLUMNS.items() if v > version for table, column, _ in added}
    db = sqlite3.connect(":memory:")
    try:
        for statement in SCHEMA:
            db.execute(statement)
        tables = [name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {table: [c for c in db.execute(f"PRAGMA table_info({table})") if (table, c[1]) not in later]
                for table in tables}
    finally:
        db.close()


def _upgrade(db: sqlite3.Connection) -> None:
    """Add the columns of the versions after the store's own, inside the caller's transaction;
    re-read there, so a store another process upgraded meanwhile is left as it is."""
    version = db.execute("PRAGMA user_version").fetchone()[0]
    for table, column, declaration in (a for v, added in sorted(ADDED_COLUMNS.items()) if v > version
                                       for a in added):
        have = {c[1] for c in db.execute(f"PRAGMA table_info({table})")}
        if have and column not in have:  # a table SCHEMA has yet to create gets the column with it
            db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")


def _check_destination(path: Path) -> None:
    """Refuse a store path that is a directory, whose directory does not exist (a typo must
    not create directories), or that this user cannot write, before SQLite opens (and
    would create) anything."""
    if path.is_dir():
        raise AuditError(f"results store {path} is a directory; --store takes a file, e.g. {path / DEFAULT_STORE}")
    if not path.parent.is_dir():
        raise AuditError(f"cannot create results store {path}: {path.parent} is not an existing directory")
    # SQLite writes the file and, beside it, the -wal and -shm files of WAL mode
    for needed in (path.parent, path) if path.exists() else (path.parent,):
        if not os.access(needed, os.W_OK):
            raise AuditError(f"cannot write results store {path}: {needed} is not writable")


def _inspect(db: sqlite3.Connection, path: Path) -> tuple[int, list[str]]:
    """(schema version, tables of SCHEMA it lacks) of an opened file, read without writing to it.

    Raises AuditError for a file this code must not write: not SQLite, damaged (PRAGMA
    quick_check: about 1.5 s for 20,000 trials of 140 rounds), of a newer schema version,
    another program's database, or holding al-audit tables of another layout.
    """
    try:
        version = db.execute("PRAGMA user_version").fetchone()[0]
        damage = db.execute("PRAGMA quick_check(1)").fetchone()[0]
    except sqlite3.DatabaseError as exc:
        if exc.sqlite_errorname == "SQLITE_NOTADB":
            raise AuditError(f"results store {path} is not an SQLite database ({exc}); {LEFT_AS_IS}") from None
        if not exc.sqlite_errorname.startswith("SQLITE_CORRUPT"):
            raise
        damage = str(exc)
    if damage != "ok":  # quick_check's report opens with a "*** in database main ***" line
        raise AuditError(f"results store {path} is damaged (SQLite: {damage.splitlines()[-1]}); {LEFT_AS_IS}, "
                         "or restore a copy")
    if version > SCHEMA_VERSION:
        raise AuditError(f"results store {path} has schema version {version}, newer than this al-audit's "
                         f"{SCHEMA_VERSION}; {LEFT_AS_IS}, or use the al-audit that wrote it")
    tables = [name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'"
                                             " AND name NOT LIKE 'sqlite_%'")]
    layout = _layout(version)
    if tables and not layout.keys() & set(tables):
        raise AuditError(f"results store {path} is another program's SQLite database (tables {', '.join(tables)}), "
                         f"not an al-audit store; {LEFT_AS_IS}")
    for table in (t for t in layout if t in tables):
        columns = db.execute(f"PRAGMA table_info({table})").fetchall()
        if columns != layout[table]:
            lacking = [c[1] for c in layout[table] if c[1] not in {have[1] for have in columns}]
            what = f"lacks column {', '.join(lacking)}" if lacking else "has other columns"
            raise AuditError(f"results store {path} has a layout this al-audit cannot use (table {table} {what}, "
                             f"as in an older al-audit); {LEFT_AS_IS}")
    return version, [t for t in layout if t not in tables]


def open_read_only(path: str | Path) -> sqlite3.Connection:
    """A read-only connection to an existing al-audit store (the Python API, `audit summary`):
    reading never changes a user's file. A missing file or one without the trials and rounds
    tables is refused with one line."""
    path = Path(path)
    if not path.is_file():
        raise AuditError(f"no result store at {path}")
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise AuditError(f"cannot read the result store {path}: {exc}") from None
    try:
        db.execute("SELECT id FROM trials LIMIT 1")
        db.execute("SELECT trial_id FROM rounds LIMIT 1")
    except sqlite3.Error as exc:
        db.close()
        what = ("it is not an al-audit result store (no trials or rounds table)" if "no such table" in str(exc)
                else exc)
        raise AuditError(f"cannot read the result store {path}: {what}") from None
    return db


def _reported(action: str, after: str = "") -> Callable:
    """A ResultStore method whose SQLite errors become one line naming the store and what failed."""
    def decorate(method: Callable) -> Callable:
        @functools.wraps(method)
        def reported(self: "ResultStore", *args, **kwargs):
            try:
                return method(self, *args, **kwargs)
            except sqlite3.Error as exc:
                raise AuditError(f"results store {self.path}: cannot {action}: {exc}{after}") from None
        return reported
    return decorate


@contextmanager
def _transaction(db: sqlite3.Connection) -> Iterator[None]:
    """BEGIN IMMEDIATE ... COMMIT, rolled back on any failure unless SQLite rolled it back
    itself (it does on a full disk or an I/O error: a second ROLLBACK would hide the cause)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
        db.execute("COMMIT")
    except BaseException:
        try:
            open_transaction = db.in_transaction
        except sqlite3.ProgrammingError:
            # closed first: a Ctrl-C between entering this block and the ``with`` taking it
            # leaves it to the garbage collector; closing the connection rolled the write back
            open_transaction = False
        if open_transaction:
            db.execute("ROLLBACK")
        raise


class ResultStore:
    """The SQLite file holding every finished trial."""

    def __init__(self, path: str | Path = DEFAULT_STORE):
        self.path = Path(path)
        _check_destination(self.path)
        self._db = self._connect()

    @_reported("open it")
    def _connect(self) -> sqlite3.Connection:
        """A connection to the checked file; a new or older store gets its tables, columns and version."""
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        try:
            version, missing = _inspect(db, self.path)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA foreign_keys=ON")
            if missing or version != SCHEMA_VERSION:
                with _transaction(db):
                    _upgrade(db)
                    for statement in SCHEMA:  # IF NOT EXISTS: another process may have created them since
                        db.execute(statement)
                    db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        except BaseException:
            db.close()
            raise
        return db

    def close(self) -> None:
        self._db.close()

    @_reported("register a fingerprint", KEPT)
    def register(self, details: dict[str, Any]) -> str:
        fingerprint = fingerprint_of(details)
        self._db.execute(
            "INSERT OR IGNORE INTO fingerprints VALUES (?, ?)", (fingerprint, json.dumps(details, sort_keys=True))
        )
        return fingerprint

    @_reported("read its trials")
    def finished_seeds(self, protocol: str, dataset: str, strategy: str, fingerprint: str) -> set[int]:
        rows = self._db.execute(
            "SELECT trial_seed FROM trials WHERE protocol=? AND dataset=? AND strategy=? AND fingerprint=?",
            (protocol, dataset, strategy, fingerprint),
        )
        return {r[0] for r in rows}

    @_reported("store a trial", KEPT)
    def save(self, result: TrialResult, fingerprint: str) -> bool:
        """Store one finished trial atomically; False when it was already stored."""
        db = self._db
        with _transaction(db):
            cursor = db.execute(
                "INSERT OR IGNORE INTO trials (protocol, dataset, strategy, trial_seed, fingerprint, status, aubc,"
                " aubc_by_metric, query_hash, error, warnings, seconds, finished_at, fast_path)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (result.protocol, result.dataset, result.strategy, result.trial_seed, fingerprint, result.status,
                 result.aubc, json.dumps(result.aubc_by_metric), result.query_hash, result.error,
                 json.dumps(result.warnings), result.seconds, _now(), result.fast_path),
            )
            if cursor.rowcount == 0:
                return False
            db.executemany(
                "INSERT INTO rounds VALUES (?,?,?,?,?,?,?,?,?)",
                ((cursor.lastrowid, r.round, r.n_labeled, json.dumps(r.queried), r.accuracy, r.f1, r.roc_auc,
                  r.fit_seconds, r.query_seconds) for r in result.rounds),  # streamed, not copied into a list
            )
        return True

    @_reported("read its trials")
    def trials(self, protocol: str, dataset: str, strategy: str, fingerprint: str,
               seeds: Iterable[int] | None = None) -> list[TrialResult]:
        """Stored trials in seed order (restricted to ``seeds`` when given), rounds included."""
        wanted = None if seeds is None else set(seeds)
        rows = self._db.execute(
            "SELECT id, trial_seed, status, aubc, aubc_by_metric, error, seconds, warnings, fast_path FROM trials"
            " WHERE protocol=? AND dataset=? AND strategy=? AND fingerprint=? ORDER BY trial_seed",
            (protocol, dataset, strategy, fingerprint),
        ).fetchall()
        results = []
        for trial_id, seed, status, aubc, by_metric, error, seconds, warned, fast_path in rows:
            if wanted is not None and seed not in wanted:
                continue
            rounds = [
                RoundRecord(r[0], r[1], tuple(json.loads(r[2])), *r[3:])
                for r in self._db.execute(
                    "SELECT round, n_labeled, queried, accuracy, f1, roc_auc, fit_seconds, query_seconds"
                    " FROM rounds WHERE trial_id=? ORDER BY round", (trial_id,))
            ]
            results.append(TrialResult(protocol, dataset, strategy, seed, status, aubc,
                                       json.loads(by_metric or "{}"), rounds, error, seconds,
                                       json.loads(warned or "[]"), fast_path=fast_path))
        return results

    @_reported("read its trials")
    def count(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM trials").fetchone()[0]

    @_reported("read its trials")
    def seconds_per_trial(self, protocol: str, dataset: str, strategy: str) -> float | None:
        """Mean seconds of the successful trials stored for a cell under any fingerprint
        (code changes rarely change a trial's cost): how long its next trial will take."""
        return self._db.execute(
            "SELECT AVG(seconds) FROM trials WHERE protocol=? AND dataset=? AND strategy=? AND status='ok'",
            (protocol, dataset, strategy)).fetchone()[0]

    @_reported("read its trials")
    def statuses(self, protocol: str, dataset: str, strategy: str, fingerprint: str) -> dict[int, str]:
        """{trial seed: status} of the stored trials of a cell."""
        return dict(self._db.execute(
            "SELECT trial_seed, status FROM trials WHERE protocol=? AND dataset=? AND strategy=? AND fingerprint=?",
            (protocol, dataset, strategy, fingerprint)))

    # -- runs of `audit run`: their plan and progress, for `audit status` --------------
    @_reported("record the run", KEPT)
    def start_run(self, pid: int, host: str, executor: str, workers: int, plan: dict[str, Any]) -> int:
        now = _now()
        cursor = self._db.execute(
            "INSERT INTO runs (pid, host, executor, workers, state, plan, started_at, updated_at)"
            " VALUES (?,?,?,?,'running',?,?,?)", (pid, host, executor, workers, json.dumps(plan), now, now))
        return cursor.lastrowid

    @_reported("record the run's progress", KEPT)
    def update_run(self, run_id: int, running: int, workers: int, state: str = "running") -> None:
        self._db.execute("UPDATE runs SET running=?, workers=?, state=?, updated_at=? WHERE id=?",
                         (running, workers, state, _now(), run_id))

    @_reported("read the latest run")
    def latest_run(self) -> dict[str, Any] | None:
        cursor = self._db.execute("SELECT * FROM runs ORDER BY id DESC LIMIT 1")
        row = cursor.fetchone()
        if row is None:
            return None
        run = dict(zip([c[0] for c in cursor.description], row))
        run["plan"] = json.loads(run["plan"])
        return run
