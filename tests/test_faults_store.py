"""Store faults (issue 16, items 7, 8, 9): each is one line, exit 2, and the file is left as it is.

Every store here is real: written by `audit reproduce`, then damaged, aged or replaced the
way a user's file can be; a full disk is a real full filesystem or SQLite's own page limit.
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
import random
import shutil
import sqlite3
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

from audit.analysis.reproduce import ReproduceRequest, reproduce
from audit.cli.main import main
from audit.engine.runner import run_trial
from audit.engine.store import SCHEMA_VERSION, ResultStore, fingerprint_details
from audit.errors import AuditError

REPO = Path(__file__).resolve().parent.parent
TRIALS = 3


@pytest.fixture(scope="module")
def real_store(tmp_path_factory, sonar):
    """A store written by `audit reproduce` (lu2023, sonar, Uniform, 3 trials), closed."""
    where = tmp_path_factory.mktemp("real")
    reproduce(ReproduceRequest("lu2023", "sonar", ["uniform"], trials=TRIALS, store=where / "store.sqlite",
                               out=where / "report", progress=False), log=lambda _: None)
    return where / "store.sqlite"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _tree(path: Path) -> dict[str, str]:
    """Every file under (or beside, for a file) ``path`` with its hash: what a command may not change."""
    root = path if path.is_dir() else path.parent
    return {str(p.relative_to(root)): _sha256(p) for p in sorted(root.rglob("*")) if p.is_file()}


def _edit(path: Path, *statements: str) -> None:
    db = sqlite3.connect(path)
    for statement in statements:
        db.execute(statement)
    db.commit()
    db.close()


def _damaged(store: Path, path: Path) -> None:
    shutil.copy(store, path)
    size = path.stat().st_size
    with open(path, "r+b") as f:  # the middle third, with bytes that are the same on every run
        f.seek(size // 3)
        f.write(random.Random(0).randbytes(size // 3))


def _foreign(store: Path, path: Path) -> None:
    _edit(path, "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)", "INSERT INTO customers VALUES (1, 'a')")


def _older(store: Path, path: Path) -> None:  # the first al-audit's layout: trials without warnings, no runs
    shutil.copy(store, path)
    _edit(path, "ALTER TABLE trials DROP COLUMN warnings", "DROP TABLE runs", "PRAGMA user_version=0")


def _newer(store: Path, path: Path) -> None:
    shutil.copy(store, path)
    _edit(path, f"PRAGMA user_version={SCHEMA_VERSION + 1}")


def _text(store: Path, path: Path) -> None:
    path.write_text("my notes on the benchmark\nnot a database\n")


def _directory(store: Path, path: Path) -> None:
    path.mkdir()
    (path / "notes.txt").write_text("kept\n")


def _commands(store: Path, out: Path) -> list[list[str]]:
    """Every kind of command that opens a store: replay, statistics, scale-out, status."""
    common = ["--trials", "2", "--store", str(store), "--no-progress"]
    return [["reproduce", "lu2023", "--dataset", "sonar", "--strategies", "uniform", "--out", str(out), *common],
            ["usefulness", "--protocol", "lu2023", "--datasets", "sonar", "--strategies", "uniform,us-c",
             "--out", str(out), *common],
            ["run", "--protocol", "lu2023", "--datasets", "sonar", "--strategies", "uniform", *common],
            ["status", "--store", str(store)]]


def _one_error_line(err: str) -> str:
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if line.startswith("audit:")]
    assert len(errors) == 1, err
    return errors[0]


@pytest.mark.parametrize("make, says", [
    (_damaged, "is damaged (SQLite: "),
    (_foreign, "is another program's SQLite database (tables customers)"),
    (_older, "table trials lacks column warnings"),
    (_newer, f"has schema version {SCHEMA_VERSION + 1}, newer than this al-audit's {SCHEMA_VERSION}"),
    (_text, "is not an SQLite database"),
    (_directory, "is a directory"),
], ids=["damaged", "foreign", "older-layout", "newer-version", "not-sqlite", "directory"])
def test_a_file_that_is_no_usable_store_is_refused_by_every_command_and_left_unchanged(
        tmp_path, real_store, capsys, make, says):
    store = tmp_path / "given" / "store.sqlite"
    store.parent.mkdir()
    make(real_store, store)
    before = _tree(store)
    out = tmp_path / "out"
    for argv in _commands(store, out):
        assert main(argv) == 2, argv
        line = _one_error_line(capsys.readouterr().err)
        assert line.startswith(f"audit: error: results store {store} ") and says in line, line
        assert _tree(store) == before, argv  # byte for byte, and no -wal, -shm or .lock left beside it
        assert not out.exists()  # refused before any work


@pytest.mark.parametrize("version, drop", [(0, ()), (0, ("DROP TABLE runs",)), (1, ())],
                         ids=["before-versioning", "before-audit-run", "version-1"])
def test_an_older_store_is_upgraded_in_place_and_its_trials_reused(tmp_path, real_store, capsys, version, drop):
    """Versions 0 and 1 lack the fast_path column (schema version 2): it is added, NULL for the
    trials stored before, and every stored trial is reused."""
    store = tmp_path / "previous.sqlite"
    shutil.copy(real_store, store)
    _edit(store, "ALTER TABLE trials DROP COLUMN fast_path", *drop, f"PRAGMA user_version={version}")
    before = sqlite3.connect(store).execute("SELECT * FROM trials").fetchall()

    assert main(["reproduce", "lu2023", "--dataset", "sonar", "--strategies", "uniform", "--trials", str(TRIALS),
                 "--store", str(store), "--out", str(tmp_path / "out"), "--no-progress"]) == 0
    assert f"(0 trials run, {TRIALS} reused from {store})" in capsys.readouterr().out
    db = sqlite3.connect(store)
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 2
    assert db.execute("SELECT * FROM trials").fetchall() == [(*row, None) for row in before]  # not recorded
    assert db.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0  # created when it was missing
    assert "uniform: not recorded" in (tmp_path / "out" / "report.md").read_text()


def test_a_full_database_reports_its_cause_and_keeps_every_earlier_trial(tmp_path, lu2023, sonar):
    """SQLite's page limit makes the database full for real; SQLite then rolls the trial back
    itself, and the store's own ROLLBACK used to hide the cause behind 'no transaction is active'."""
    protocol = dataclasses.replace(lu2023, budget_size=5)
    store = ResultStore(tmp_path / "s.sqlite")
    fingerprint = store.register(fingerprint_details(protocol))
    store._db.execute(f"PRAGMA max_page_count={store._db.execute('PRAGMA page_count').fetchone()[0] + 1}")
    saved = []
    with pytest.raises(AuditError) as refused:
        for seed in range(200):
            result = run_trial(protocol, "sonar", sonar.X, sonar.y, "uniform", seed)
            store.save(result, fingerprint)
            saved.append(result)
    store.close()
    message = str(refused.value)
    assert message.startswith(f"results store {tmp_path / 's.sqlite'}: cannot store a trial: database or disk is full")
    assert "rollback" not in message and saved
    reopened = ResultStore(tmp_path / "s.sqlite")
    back = reopened.trials(protocol.name, "sonar", "uniform", fingerprint)
    assert [(r.trial_seed, r.aubc, r.rounds) for r in back] == [(r.trial_seed, r.aubc, r.rounds) for r in saved]


@contextmanager
def _tmpfs(path: Path, options: str):
    """A tmpfs mounted on ``path`` for the block: a real small or read-only filesystem."""
    path.mkdir(exist_ok=True)
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root and mount(8)")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=True)


def _stored(store: Path) -> list[tuple]:
    db = sqlite3.connect(store)
    try:
        return db.execute("SELECT trial_seed, status, aubc, query_hash FROM trials ORDER BY trial_seed").fetchall()
    finally:
        db.close()


@pytest.mark.parametrize("command", ["reproduce", "run"])
def test_a_full_filesystem_stops_the_driver_with_one_line_and_the_rerun_resumes(tmp_path, protocol_file, command):
    """A 160 KiB tmpfs fills after a few short trials: a write of the driver fails for real."""
    protocol = protocol_file(replace={'size = "pool"': "size = 5"})
    with _tmpfs(tmp_path / "small", "size=160k") as small:
        store = small / "store.sqlite"
        argv = {"reproduce": ["reproduce", str(protocol), "--dataset", "sonar", "--out", str(tmp_path / "out")],
                "run": ["run", "--protocol", str(protocol), "--datasets", "sonar"]}[command]
        cmd = [sys.executable, "-m", "audit.cli.main", *argv, "--strategies", "uniform", "--trials", "15",
               "--store", str(store), "--no-progress"]
        full = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600)
        assert full.returncode == 2, full.stderr
        line = _one_error_line(full.stderr)
        assert line.startswith(f"audit: error: results store {store}: cannot ") and "database or disk is full" in line
        partial = _stored(store)  # readable on the full disk
        assert 0 < len(partial) < 15 and {row[1] for row in partial} == {"ok"}  # the failure is no trial's error

        subprocess.run(["mount", "-o", "remount,size=8m", str(small)], check=True)
        resumed = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600)
        assert resumed.returncode == 0, resumed.stderr
        final = _stored(store)
        assert len(final) == 15 and final[:len(partial)] == partial  # every trial before the failure, as it was


@contextmanager
def _unwritable(path: Path):
    """A directory this process cannot write: read-only to its owner, or a read-only tmpfs
    for root, whom permissions do not stop."""
    if os.geteuid() == 0:
        with _tmpfs(path, "ro,size=64k"):
            yield path
        return
    path.mkdir()
    path.chmod(0o555)
    try:
        yield path
    finally:
        path.chmod(0o755)


@pytest.mark.parametrize("where", ["store.sqlite", "missing/store.sqlite"], ids=["directory", "missing-directory"])
def test_a_store_in_an_unwritable_directory_is_refused_before_any_work(tmp_path, capsys, where):
    with _unwritable(tmp_path / "read-only") as read_only:
        store = read_only / where
        out = tmp_path / "out"
        for argv in _commands(store, out)[:3]:  # `audit status` only reads an existing store
            assert main(argv) == 2, argv
            line = _one_error_line(capsys.readouterr().err)
            assert line.startswith("audit: error: cannot ") and str(store) in line, line
            assert not out.exists() and not any(read_only.iterdir())


def test_a_lock_file_that_cannot_be_opened_stops_audit_run_with_one_line(tmp_path, real_store, capsys):
    store = tmp_path / "store.sqlite"
    shutil.copy(real_store, store)
    (tmp_path / "store.sqlite.lock").mkdir()  # not a file this user can open
    assert main(_commands(store, tmp_path / "out")[2]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert line.startswith(f"audit: error: cannot open {store}.lock, the lock file of results store {store}: "), line


def test_a_store_in_a_missing_directory_is_refused_and_no_directory_is_made(tmp_path, capsys):
    """A typo in --store must not create directories (as a given --out needs its parent too)."""
    store = tmp_path / "typo" / "deeper" / "store.sqlite"
    for argv in _commands(store, tmp_path / "out")[:3]:
        assert main(argv) == 2, argv
        line = _one_error_line(capsys.readouterr().err)
        assert "is not an existing directory" in line and str(store) in line, line
        assert not (tmp_path / "typo").exists() and not (tmp_path / "out").exists()
