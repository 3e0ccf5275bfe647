"""`audit run` on the local and Dask executors: identical results, and real faults.

Real processes throughout: a Dask LocalCluster of two worker processes (shared by the
tests, reached by its address as `--scheduler` is), worker processes killed with
SIGKILL, a driver subprocess killed with SIGKILL, a real SQLite store. Every process a
test starts is ended by the test.
"""
from __future__ import annotations

import functools
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from audit.cli.main import main
from audit.engine.benchmark import RunRequest, run
from audit.engine.executors import DaskExecutor, LocalExecutor
from audit.engine.runner import run_trial
from audit.engine.store import ResultStore
from tests import scale_faults
from tests.scale_faults import POISON_SEED, attempts, end_process_group

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def cluster():
    import dask
    from distributed import LocalCluster

    with dask.config.set({"distributed.scheduler.allowed-failures": 2}):
        local_cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    yield local_cluster
    local_cluster.close()


@pytest.fixture
def fault_dir(tmp_path):
    """Where the trial functions of tests/scale_faults.py mark their attempts."""
    directory = tmp_path / "attempts"
    directory.mkdir()
    return directory


def _request(store: Path, trials: int, datasets=("sonar",), strategies=("uniform",), **extra) -> RunRequest:
    return RunRequest("lu2023", list(datasets), list(strategies), trials=trials, store=store, progress=False, **extra)


def _stored(store: Path) -> dict[tuple[str, str, int], tuple]:
    """Every stored trial's outcome, with its rounds' accuracies (not its timings)."""
    with sqlite3.connect(store) as db:
        trials = db.execute("SELECT id, dataset, strategy, trial_seed, status, aubc, aubc_by_metric, query_hash,"
                            " error FROM trials").fetchall()
        rounds = {}
        for trial_id, *_ in trials:
            rounds[trial_id] = tuple(r[0] for r in db.execute(
                "SELECT accuracy FROM rounds WHERE trial_id=? ORDER BY round", (trial_id,)))
    return {(d, s, seed): (status, aubc, by_metric, query_hash, error, rounds[trial_id])
            for trial_id, d, s, seed, status, aubc, by_metric, query_hash, error in trials}


def test_local_and_dask_store_bit_identical_results(tmp_path, cluster, sonar):
    suite = dict(datasets=("sonar", "heart"), strategies=("uniform", "us-c"), trials=2)
    run(_request(tmp_path / "local.sqlite", **suite))  # the default: local, one process
    with DaskExecutor(cluster.scheduler_address) as on_dask:
        run(_request(tmp_path / "dask.sqlite", **suite), on_dask)
    local_trials, dask_trials = _stored(tmp_path / "local.sqlite"), _stored(tmp_path / "dask.sqlite")
    assert len(local_trials) == 8 and all(t[0] == "ok" for t in local_trials.values())
    assert dask_trials == local_trials  # floats compared exactly: bit-identical


def _kill_first_attempt(fault_dir: Path, killed: list[int]) -> threading.Thread:
    """SIGKILL the worker process of the first trial attempt to start (it is then mid-trial)."""
    def watch():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            found = attempts(fault_dir)
            if found:
                pid = found[0][3]
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                return
            time.sleep(0.05)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def _run_killing_first_attempt(executor, store: Path, trials: int, fault_dir: Path):
    """Run Uniform on sonar, SIGKILLing the worker of the first attempt to start:
    (outcome, [the killed pid], every attempt of the killed trial, oldest first)."""
    killed: list[int] = []
    watcher = _kill_first_attempt(fault_dir, killed)
    with executor:
        outcome = run(_request(store, trials=trials), executor)
    watcher.join(timeout=5)
    assert len(killed) == 1
    tried = attempts(fault_dir)
    return outcome, killed, [a for a in tried if a[:3] == tried[0][:3]]


def test_a_dask_worker_killed_mid_trial_is_retried_elsewhere_and_its_trial_stored_once(tmp_path, cluster,
                                                                                      fault_dir, lu2023, sonar):
    outcome, killed, retries = _run_killing_first_attempt(
        DaskExecutor(cluster.scheduler_address, trial_function=functools.partial(scale_faults.slow_trial, fault_dir)),
        tmp_path / "store.sqlite", 3, fault_dir)
    victim = retries[0]
    assert len(retries) >= 2 and retries[-1][3] != killed[0]  # run again, by another process
    stored = _stored(tmp_path / "store.sqlite")
    assert outcome.ran == 3 and len(stored) == 3  # each trial stored once
    seed = victim[2]
    reference = run_trial(lu2023, "sonar", sonar.X, sonar.y, "uniform", seed)
    assert stored["sonar", "uniform", seed][0] == "ok"
    assert stored["sonar", "uniform", seed][1] == reference.aubc
    assert stored["sonar", "uniform", seed][3] == reference.query_hash


def test_a_local_worker_killed_mid_trial_is_rerun_in_a_new_pool_and_its_trial_stored_once(tmp_path, fault_dir,
                                                                                           lu2023, sonar):
    outcome, killed, reruns = _run_killing_first_attempt(
        LocalExecutor(2, trial_function=functools.partial(scale_faults.slow_trial, fault_dir)),
        tmp_path / "store.sqlite", 4, fault_dir)
    victim = reruns[0]
    assert len(reruns) == 2 and reruns[1][3] != killed[0]  # run again, by a new process
    stored = _stored(tmp_path / "store.sqlite")
    assert outcome.ran == 4 and outcome.failed == 0 and len(stored) == 4  # each trial stored once
    assert all(v[0] == "ok" for v in stored.values())
    reference = run_trial(lu2023, "sonar", sonar.X, sonar.y, "uniform", victim[2])
    assert stored["sonar", "uniform", victim[2]][1] == reference.aubc
    assert stored["sonar", "uniform", victim[2]][3] == reference.query_hash


def test_a_local_executor_reuses_its_workers_for_a_second_run_on_the_same_data(tmp_path, fault_dir):
    marked = functools.partial(scale_faults.marked_trial, fault_dir)
    with LocalExecutor(2, trial_function=marked) as local:
        run(_request(tmp_path / "first.sqlite", trials=4), local)
        first = {a[3] for a in attempts(fault_dir)}
        run(_request(tmp_path / "second.sqlite", trials=4), local)
        every = {a[3] for a in attempts(fault_dir)}
        run(_request(tmp_path / "third.sqlite", trials=2, datasets=("heart",)), local)  # new data: new workers
        heart = {a[3] for a in attempts(fault_dir) if a[0] == "heart"}
    assert len(attempts(fault_dir)) == 10
    assert every == first and len(first) <= 2
    assert not heart & first
    assert _stored(tmp_path / "first.sqlite") == _stored(tmp_path / "second.sqlite")


def test_a_trial_that_kills_its_local_worker_every_time_is_an_error_and_only_it(tmp_path, fault_dir):
    dies = functools.partial(scale_faults.dies_on_poison_seed, fault_dir)
    with LocalExecutor(2, retries=2, trial_function=dies) as local:
        outcome = run(_request(tmp_path / "store.sqlite", trials=4), local)
    stored = _stored(tmp_path / "store.sqlite")
    assert outcome.ran == 4 and outcome.failed == 1 and len(stored) == 4
    poison = [k for k in stored if k[2] == POISON_SEED]
    assert len(poison) == 1
    status, *_, error, rounds = stored[poison[0]]
    assert (status, rounds) == ("error", ()) and error == "failed after 3 attempts: LostWorker: its worker process died"
    # counted only when it ran alone: at most one attempt with others in flight, then three alone
    assert 3 <= sum(a[2] == POISON_SEED for a in attempts(fault_dir)) <= 4
    assert all(v[0] == "ok" for k, v in stored.items() if k[2] != POISON_SEED)  # the others were never charged


@pytest.mark.parametrize("executor", ["local", "dask"])
def test_a_trial_that_raises_every_time_is_stored_as_error_after_its_retries(executor, tmp_path, cluster,
                                                                              fault_dir):
    raises = functools.partial(scale_faults.raises_on_poison_seed, fault_dir)
    if executor == "local":
        chosen = LocalExecutor(1, retries=2, trial_function=raises)
    else:
        chosen = DaskExecutor(cluster.scheduler_address, retries=2, trial_function=raises)
    with chosen:
        outcome = run(_request(tmp_path / "store.sqlite", trials=3), chosen)
    stored = _stored(tmp_path / "store.sqlite")
    assert outcome.ran == 3 and outcome.failed == 1
    poison = [k for k in stored if k[2] == POISON_SEED]
    assert len(poison) == 1
    status, *_, error, rounds = stored[poison[0]]
    assert status == "error" and rounds == ()
    assert error == "failed after 3 attempts: RuntimeError: deliberate failure outside the trial"
    assert sum(a[2] == POISON_SEED for a in attempts(fault_dir)) == 3
    assert all(v[0] == "ok" for k, v in stored.items() if k[2] != POISON_SEED)


def _driver(store: Path, trials: int) -> subprocess.Popen:
    """`audit run` as its own process (and process group, so a test can end all it started)."""
    return subprocess.Popen(
        [sys.executable, "-m", "audit.cli.main", "run", "--protocol", "lu2023", "--datasets", "sonar",
         "--strategies", "uniform,us-c", "--trials", str(trials), "--store", str(store), "--no-progress"],
        cwd=REPO, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _wait_for_trials(store: Path, at_least: int, driver: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert driver.poll() is None, driver.stderr.read().decode()
        if store.exists():
            try:
                with sqlite3.connect(store, timeout=5) as db:
                    if db.execute("SELECT COUNT(*) FROM trials").fetchone()[0] >= at_least:
                        return
            except sqlite3.OperationalError:  # the driver is still creating the schema
                pass
        time.sleep(0.1)
    raise AssertionError(f"fewer than {at_least} trials stored after {timeout} s")



def test_a_driver_killed_mid_run_resumes_without_repeating_or_losing_a_trial(tmp_path):
    store = tmp_path / "store.sqlite"
    driver = _driver(store, trials=12)
    try:
        _wait_for_trials(store, 5, driver)
        os.kill(driver.pid, signal.SIGKILL)  # the driver only; its group is ended below
        driver.wait(timeout=10)
    finally:
        end_process_group(driver)
    before = {k: v for k, v in _stored(store).items()}
    with sqlite3.connect(store) as db:
        ids_before = dict(((d, s, seed), i) for i, d, s, seed in db.execute(
            "SELECT id, dataset, strategy, trial_seed FROM trials"))
    assert 5 <= len(before) < 24
    lines: list[str] = []
    outcome = run(_request(store, trials=12, strategies=("uniform", "us-c")), log=lines.append)
    assert outcome.reused == len(before) and outcome.ran == 24 - len(before)  # none repeated
    after = _stored(store)
    assert len(after) == 24 and all(v[0] == "ok" for v in after.values())  # none lost
    assert {k: after[k] for k in before} == before
    with sqlite3.connect(store) as db:
        assert all(db.execute("SELECT id FROM trials WHERE dataset=? AND strategy=? AND trial_seed=?", k).fetchone()[0]
                   == i for k, i in ids_before.items())  # the stored rows themselves untouched
        # every stored trial is whole: initial model + one round per pool row
        assert {n for (n,) in db.execute("SELECT COUNT(*) FROM rounds GROUP BY trial_id")} == {105}


def test_a_second_driver_on_the_same_store_refuses_and_status_shows_the_first(tmp_path, capsys):
    store = tmp_path / "store.sqlite"
    first = _driver(store, trials=100)
    try:
        _wait_for_trials(store, 2, first)
        code = main(["run", "--protocol", "lu2023", "--datasets", "sonar", "--strategies", "uniform",
                     "--trials", "3", "--store", str(store), "--no-progress"])
        err = capsys.readouterr().err.strip()
        assert code == 2
        assert err == (f"audit: error: store {store} is in use by another `audit run` (pid {first.pid} on "
                       f"{os.uname().nodename}); wait for it to finish (`audit status` shows its progress) "
                       "or use another --store")
        assert main(["status", "--store", str(store)]) == 0
        shown = capsys.readouterr().out
        assert f"pid {first.pid}" in shown and ", running\n" in shown
        assert "trials done " in shown and "/200, running " in shown
    finally:
        end_process_group(first)
    assert main(["status", "--store", str(store)]) == 0
    assert "stopped (the driver died; rerun the same `audit run` to resume)" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["--executor", "local", "--scheduler", "tcp://127.0.0.1:1"], "--scheduler needs --executor dask"),
    (["--workers", "0"], "argument --workers: must be a positive integer, not '0'"),
    (["--max-trial-seconds", "0"], "argument --max-trial-seconds: must be a positive finite number of seconds"),
    (["--datasets", "nosuch"], "unknown data set"),
])
def test_bad_input_is_one_line_and_exit_2(argv, message, tmp_path, capsys):
    base = ["run", "--protocol", "lu2023", "--datasets", "sonar", "--store", str(tmp_path / "s.sqlite")]
    try:
        code = main(base + argv)
    except SystemExit as exc:  # an option's type refused its value while the command line was read
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("audit: error: ") and message in err and err.count("\n") == 1


def test_status_of_a_store_without_runs_is_an_error(tmp_path, capsys):
    ResultStore(tmp_path / "s.sqlite").close()
    assert main(["status", "--store", str(tmp_path / "s.sqlite")]) == 2
    assert capsys.readouterr().err == f"audit: error: store {tmp_path / 's.sqlite'} holds no `audit run`\n"


def test_a_time_limit_inside_a_library_that_wraps_its_errors_is_still_tle(lu2023, sonar, test_strategies):
    """A trial over its limit is TLE even where the library catches Exception and raises its own
    error (cvxpy's OSQP interface, BMDR and SPAL on lu2023's large sets)."""
    from audit.protocols import StrategySpec
    from tests.conftest import single_strategy

    protocol = single_strategy(lu2023, StrategySpec("slow", "test.sleeps-in-library", {"seconds": 0.2}, None), budget=50)
    result = run_trial(protocol, "sonar", sonar.X, sonar.y, "slow", 0, time_limit=0.5)
    assert result.status == "tle" and result.error == "time limit of 0.5 s per trial exceeded"
    assert result.seconds < 5


def test_one_time_preparation_is_neither_timed_with_a_trial_nor_under_its_limit(tmp_path, lu2023, sonar,
                                                                                test_strategies):
    """LAL generates its training data at first use on a machine (about 2 minutes): that is
    the machine's work, not the trial's, so it must not turn the trial into TLE or into a
    slow trial in the store's seconds (which order and estimate runs)."""
    from audit.protocols import StrategySpec
    from tests.conftest import single_strategy

    marker = tmp_path / "prepared"
    spec = StrategySpec("prep", "test.prepares-once", {"seconds": 1.0, "marker": str(marker)}, None)
    result = run_trial(single_strategy(lu2023, spec), "sonar", sonar.X, sonar.y, "prep", 0, time_limit=0.5)
    assert result.status == "ok", result.error
    assert marker.read_text() == "prepared" and result.seconds < 0.5


def test_a_run_announces_one_time_preparation_once_before_its_first_trial(tmp_path, lu2023, test_strategies):
    from audit.analysis.reproduce import ReproduceRequest, reproduce
    from audit.protocols import StrategySpec
    from tests.conftest import single_strategy

    spec = StrategySpec("prep", "test.prepares-once", {"marker": str(tmp_path / "prepared")}, None)
    lines: list[str] = []
    outcome = reproduce(ReproduceRequest(single_strategy(lu2023, spec), "sonar", trials=3, store=tmp_path / "s.sqlite",
                                         out=tmp_path / "out", progress=False, no_diagnose=True), log=lines.append)
    assert [line for line in lines if line.startswith("preparing")] == ["preparing prepared"]
    assert lines.index("preparing prepared") > next(i for i, line in enumerate(lines) if line.startswith("plan: "))
    cell = next(c for c in outcome.report["strategies"] if c["strategy"] == "prep")
    assert outcome.ran == 3 and cell["n_trials"] == 3


def test_a_preparation_that_fails_is_each_trials_error_not_a_crash(tmp_path, lu2023, test_strategies):
    from audit.analysis.reproduce import ReproduceRequest, reproduce
    from audit.protocols import StrategySpec
    from tests.conftest import single_strategy

    spec = StrategySpec("prep", "test.prepares-once", {"marker": str(tmp_path / "missing" / "prepared")}, None)
    outcome = reproduce(ReproduceRequest(single_strategy(lu2023, spec), "sonar", trials=2, store=tmp_path / "s.sqlite",
                                         out=tmp_path / "out", progress=False, no_diagnose=True), log=lambda line: None)
    cell = next(c for c in outcome.report["strategies"] if c["strategy"] == "prep")
    assert cell["n_errors"] == 2 and cell["n_trials"] == 0
    assert all(e["error"].startswith("FileNotFoundError") and "missing" in e["error"] for e in cell["errors"])


def test_the_time_limit_also_stops_a_trial_off_the_main_thread(lu2023, sonar, test_strategies):
    """Dask runs a trial in a worker thread, where SIGALRM cannot reach it."""
    from audit.protocols import StrategySpec
    from tests.conftest import single_strategy

    protocol = single_strategy(lu2023, StrategySpec("slow", "test.sleeps", {"seconds": 0.2}, None), budget=50)
    results = []
    worker = threading.Thread(target=lambda: results.append(
        run_trial(protocol, "sonar", sonar.X, sonar.y, "slow", 0, time_limit=0.5)))
    worker.start()
    worker.join(timeout=30)
    assert results[0].status == "tle" and results[0].error == "time limit of 0.5 s per trial exceeded"
    assert results[0].seconds < 5


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_local_workers_exit_when_their_driver_is_killed(tmp_path):
    """Workers are children of the forkserver, not of the driver: without a watch they would
    finish (here: never) trials nobody stores."""
    script = (
        "import functools, sys\n"
        "from audit.engine.executors import LocalExecutor\n"
        "from audit.protocols import load_protocol\n"
        "from audit.engine.runner import TrialTask\n"
        "from tests.scale_faults import hangs\n"
        "tasks = [TrialTask(load_protocol('lu2023'), 'sonar', None, 'uniform', s) for s in (0, 1)]\n"
        f"executor = LocalExecutor(2, trial_function=functools.partial(hangs, {str(tmp_path)!r}))\n"
        "list(executor.run(tasks))\n")
    driver = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, start_new_session=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while len(list(tmp_path.iterdir())) < 2:
            assert driver.poll() is None and time.monotonic() < deadline, driver.stderr.read().decode()
            time.sleep(0.1)
        workers = {pid for *_, pid in attempts(tmp_path)}
        assert len(workers) == 2 and all(_running(pid) for pid in workers)
        driver.kill()
        driver.wait(timeout=10)
        deadline = time.monotonic() + 15
        while any(_running(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not any(_running(pid) for pid in workers)
    finally:
        end_process_group(driver)


def test_the_dask_executors_own_cluster_hands_each_worker_its_next_trial_at_once():
    """Dask's default queuing holds root tasks on the scheduler until a worker slot frees,
    so each short trial would wait for a scheduler round trip; the executor's LocalCluster
    turns it off, and asks for the worker count at most every WORKERS_TTL seconds."""
    with DaskExecutor(workers=1) as executor:
        client = executor._client
        futures = [client.submit(time.sleep, 0.5, pure=False) for _ in range(3)]
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and client.run_on_scheduler(
                lambda dask_scheduler: sum(len(ws.processing) for ws in dask_scheduler.workers.values())) < 3:
            time.sleep(0.05)
        assert client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.queued)) == 0
        assert client.run_on_scheduler(
            lambda dask_scheduler: sum(len(ws.processing) for ws in dask_scheduler.workers.values())) == 3
        client.gather(futures)

        asked = []
        nthreads = client.nthreads
        client.nthreads = lambda: asked.append(1) or nthreads()
        executor._workers_asked = None
        assert [executor.workers for _ in range(5)] == [1] * 5 and len(asked) == 1
