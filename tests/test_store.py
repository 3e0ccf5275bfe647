"""The SQLite store: atomic trials, no duplicates, resume after a kill."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from audit.analysis.reproduce import ReproduceRequest, reproduce
from audit.engine.runner import run_trial
from audit.engine.store import ResultStore, fingerprint_details
from audit.errors import AuditError

REPO = Path(__file__).resolve().parent.parent


def test_save_is_atomic_and_a_second_save_is_ignored(tmp_path, lu2023, sonar):
    store = ResultStore(tmp_path / "s.sqlite")
    fp = store.register(fingerprint_details(lu2023))
    result = run_trial(lu2023, "sonar", sonar.X, sonar.y, "uniform", 0)
    assert store.save(result, fp) is True
    assert store.save(result, fp) is False
    assert store.count() == 1
    (back,) = store.trials("lu2023", "sonar", "uniform", fp)
    assert back.aubc == result.aubc and back.rounds == result.rounds and back.query_hash == result.query_hash
    assert store.finished_seeds("lu2023", "sonar", "uniform", fp) == {0}
    assert store.finished_seeds("lu2023", "sonar", "uniform", "other-fingerprint") == set()


def test_a_failed_transaction_leaves_no_partial_trial(tmp_path, lu2023, sonar):
    store = ResultStore(tmp_path / "s.sqlite")
    fp = store.register(fingerprint_details(lu2023))
    result = run_trial(lu2023, "sonar", sonar.X, sonar.y, "uniform", 0)
    result.rounds.append(result.rounds[-1])  # duplicate (trial, round) key: the rounds insert fails
    with pytest.raises(AuditError, match="cannot store a trial: UNIQUE constraint failed"):
        store.save(result, fp)
    assert store.count() == 0
    assert store._db.execute("SELECT COUNT(*) FROM rounds").fetchone()[0] == 0


def test_fingerprint_changes_with_protocol_and_versions(lu2023):
    import dataclasses

    from audit.engine.store import fingerprint_of

    base = fingerprint_details(lu2023)
    other = fingerprint_details(dataclasses.replace(lu2023, batch_size=2))
    assert fingerprint_of(base) != fingerprint_of(other)
    bumped = json.loads(json.dumps(base))
    bumped["versions"]["scikit-learn"] = "0.0"
    assert fingerprint_of(bumped) != fingerprint_of(base)


def test_rerun_reuses_finished_trials(tmp_path, sonar):
    request = ReproduceRequest("lu2023", "sonar", ["uniform", "us-c"], trials=3, store=tmp_path / "s.sqlite",
                               out=tmp_path / "r", progress=False)
    first = reproduce(request, log=lambda _: None)
    second = reproduce(request, log=lambda _: None)
    assert (first.ran, first.reused) == (6, 0)
    assert (second.ran, second.reused) == (0, 6)
    assert second.report["strategies"] == first.report["strategies"]
    more = reproduce(ReproduceRequest(**{**request.__dict__, "trials": 4}), log=lambda _: None)
    assert (more.ran, more.reused) == (2, 6)


def _stored(path: Path) -> list[tuple]:
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT strategy, trial_seed, aubc, query_hash FROM trials ORDER BY strategy, trial_seed").fetchall()
    except sqlite3.OperationalError:  # the schema is not written yet
        return []
    finally:
        db.close()


def test_killed_run_resumes_without_loss_or_duplicates(tmp_path, sonar):
    """SIGKILL a real `audit reproduce` mid-run; the rerun completes the same trials exactly once."""
    store = tmp_path / "killed.sqlite"
    out = tmp_path / "report"
    cmd = [sys.executable, "-m", "audit.cli.main", "reproduce", "lu2023", "--dataset", "sonar", "--strategies", "us-c",
           "--trials", "40", "--jobs", "2", "--store", str(store), "--out", str(out), "--no-progress"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + 300
    try:
        while time.monotonic() < deadline:
            if store.exists() and len(_stored(store)) >= 3:
                break
            assert proc.poll() is None, "the run finished before it could be killed"
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and its workers, mid-run
    finally:
        proc.wait(timeout=30)
    partial = _stored(store)
    assert 3 <= len(partial) < 40
    assert not out.exists()  # no half-written report

    resumed = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{len(partial)} finished trials found" in resumed.stderr
    final = _stored(store)
    assert len(final) == 40 and len({row[1] for row in final}) == 40
    assert set(partial) <= set(final)  # nothing finished was lost or recomputed differently

    clean_store = tmp_path / "clean.sqlite"
    clean = cmd[:]
    clean[clean.index(str(store))] = str(clean_store)
    clean[clean.index("2")] = "1"  # --jobs 1
    subprocess.run(clean, cwd=tmp_path, check=True, capture_output=True, timeout=300)
    assert _stored(clean_store) == final  # same AUBC and query sequence per seed, killed or not
    report = json.loads((out / "report.json").read_text())
    assert report["strategies"][0]["n_trials"] == 40


def _relative(paths):
    return {str(p.relative_to(REPO)) for p in paths}


def test_the_fingerprint_covers_the_code_trials_run_and_not_what_reads_them():
    from audit.engine.store import replay_sources

    code = _relative(replay_sources())
    assert {"audit/engine/runner.py", "audit/engine/splits.py", "audit/engine/models.py", "audit/fast/forest.py", "audit/engine/metrics.py",
            "audit/engine/process_team.py", "audit/engine/datasets.py", "audit/protocols/__init__.py", "audit/__init__.py"} <= code
    assert {str(p.relative_to(REPO)) for p in (REPO / "adapters").glob("*.py")} - {"adapters/testing.py"} <= code
    assert not code & {"adapters/testing.py", "audit/api.py", "audit/report/sections.py", "audit/cli/main.py", "audit/analysis/compat.py", "audit/analysis/stats.py", "audit/gate/verdicts.py",
                       "audit/analysis/reproduce.py", "audit/analysis/compare.py", "audit/analysis/diagnose/counterfactual.py"}


TRIAL_MODULES = """
import json, sys
from audit.engine.datasets import load_dataset
from audit.protocols import load_protocol
from audit.engine.runner import run_trial
import dataclasses
from audit.engine.models import ModelSpec
data, lu2023 = load_dataset("sonar"), load_protocol("lu2023")
small = dataclasses.replace(lu2023, budget_size=6)
spec = lu2023.strategy("us-c")
strategies = {sid: dataclasses.replace(spec, id=sid, implementation=impl, query_model=ModelSpec("lr"))
              for sid, impl in [("a", "alipy.random"), ("s", "skactiveml.random")]}
small = dataclasses.replace(small, strategies={**lu2023.strategies, **strategies})
for sid in ("uniform", "us-c", "us-nc", "a", "s", "greedy-oracle"):
    assert run_trial(small, "sonar", data.X, data.y, sid, 0).status == "ok", sid
print(json.dumps(sorted(m.__file__ for n, m in sys.modules.items()
                        if n.split(".")[0] in ("audit", "adapters") and getattr(m, "__file__", None))))
"""


def test_every_module_of_this_tool_a_trial_loads_is_in_the_fingerprint():
    """The import graph is read statically; a real trial of every library in a fresh
    interpreter must not load a module of this tool that the fingerprint leaves out."""
    from audit.engine.store import replay_sources

    done = subprocess.run([sys.executable, "-c", TRIAL_MODULES], cwd=REPO, capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0, done.stderr
    loaded = _relative(Path(f) for f in json.loads(done.stdout.splitlines()[-1]))
    assert {"adapters/alipy.py", "adapters/skactiveml.py", "adapters/libact.py", "adapters/oracles.py"} <= loaded
    assert loaded <= _relative(replay_sources()), loaded - _relative(replay_sources())


def test_a_transaction_left_open_by_an_interrupt_and_collected_after_close_raises_nothing(tmp_path):
    """Ctrl-C between the transaction's BEGIN and the ``with`` taking it: the connection closes
    (rolling the write back) before the collector finishes the block, which must not raise."""
    from audit.engine.store import _transaction

    db = sqlite3.connect(tmp_path / "t.sqlite", isolation_level=None)
    db.execute("CREATE TABLE t (x)")
    block = _transaction(db)
    block.__enter__()
    db.execute("INSERT INTO t VALUES (1)")
    db.close()
    # the interrupt propagates (not suppressed) and nothing else is raised
    assert block.__exit__(KeyboardInterrupt, KeyboardInterrupt(), None) is False
    assert sqlite3.connect(tmp_path / "t.sqlite").execute("SELECT count(*) FROM t").fetchone() == (0,)
