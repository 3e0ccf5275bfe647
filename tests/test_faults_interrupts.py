"""Issue 16, item 5 and its kin: Ctrl-C, a closed stdout pipe, more processes than cores.

Ctrl-C is tested as a terminal sends it: SIGINT to the whole process group of a command
started in its own session (the driver, `uv run` when used, the forkserver and every
worker), against real replays of uniform on heart into a temporary store. Every process
group a test starts is killed by the test.
"""
from __future__ import annotations

import http.server
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from audit.cli.main import main
from tests.scale_faults import end_process_group

REPO = Path(__file__).resolve().parent.parent
AUDIT = Path(sys.executable).parent / "audit"  # the console script `uv run audit` runs
TRIALS = 12
INTERRUPTED = "audit: interrupted; finished trials are saved, rerun the same command to resume\n"
pytestmark = pytest.mark.timeout(240)


def _replay_command(command: str, store: Path, tmp_path: Path) -> list[str]:
    """uniform on heart, TRIALS trials on 2 processes: `audit reproduce` or `audit run`."""
    if command == "reproduce":
        return ["reproduce", "lu2023", "--dataset", "heart", "--strategies", "uniform", "--trials", str(TRIALS),
                "--jobs", "2", "--store", str(store), "--out", str(tmp_path / "report"), "--no-diagnose",
                "--no-progress"]
    return ["run", "--protocol", "lu2023", "--datasets", "heart", "--strategies", "uniform", "--trials", str(TRIALS),
            "--workers", "2", "--store", str(store), "--no-progress"]


def _start(argv: list[str], stderr: Path, **popen) -> subprocess.Popen:
    with open(stderr, "w") as err:
        return subprocess.Popen(argv, cwd=REPO, start_new_session=True, stdout=subprocess.DEVNULL, stderr=err,
                                **popen)



def _group_alive(pgid: int) -> list[int]:
    """Processes still running (zombies aside) in process group ``pgid``."""
    alive = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):  # ended meanwhile
            continue
        if stat[0] != "Z" and int(stat[2]) == pgid:
            alive.append(int(entry.name))
    return alive


def _stored_trials(store: Path) -> int:
    if not store.exists():
        return 0
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
        try:
            return db.execute("SELECT count(*) FROM trials").fetchone()[0]
        except sqlite3.OperationalError:  # the tables are not there yet
            return 0


def _interrupt(process: subprocess.Popen, stderr: Path) -> tuple[float, str]:
    """Ctrl-C to the process group: (seconds until the command exited, what it wrote on stderr since)."""
    before = stderr.stat().st_size
    os.killpg(process.pid, signal.SIGINT)
    start = time.monotonic()
    process.wait(timeout=30)
    return time.monotonic() - start, stderr.read_bytes()[before:].decode()


def _trials(store: Path) -> dict[tuple[str, int], tuple]:
    """Every stored trial's outcome and its rounds' accuracies (not its timings); asserts no
    trial is stored twice."""
    with sqlite3.connect(store) as db:
        rows = db.execute("SELECT id, strategy, trial_seed, status, aubc, aubc_by_metric, query_hash FROM trials"
                          ).fetchall()
        trials = {(strategy, seed): (status, aubc, by_metric, query_hash, tuple(accuracy for (accuracy,) in db.execute(
            "SELECT accuracy FROM rounds WHERE trial_id=? ORDER BY round", (trial_id,))))
            for trial_id, strategy, seed, status, aubc, by_metric, query_hash in rows}
    assert len(trials) == len(rows)
    return trials


@pytest.fixture(scope="module")
def undisturbed(tmp_path_factory) -> dict[tuple[str, int], tuple]:
    """The trials of the replay run to its end without a signal."""
    tmp_path = tmp_path_factory.mktemp("undisturbed")
    store = tmp_path / "store.sqlite"
    subprocess.run([str(AUDIT), *_replay_command("run", store, tmp_path)], cwd=REPO, check=True,
                   capture_output=True, timeout=200)
    trials = _trials(store)
    assert len(trials) == TRIALS and all(t[0] == "ok" for t in trials.values())
    return trials


@pytest.mark.parametrize("command, launcher", [("reproduce", "uv"), ("run", "script")])
def test_ctrl_c_ends_a_parallel_replay_at_once_and_a_rerun_equals_an_undisturbed_run(
        tmp_path, undisturbed, command, launcher):
    """Workers ignore SIGINT and the driver ends them: before, a worker killed by the Ctrl-C
    while holding the pool's queue lock left the pool's shutdown waiting for ever (4 runs
    in 5), or the forkserver died with a traceback. Under `uv run` the driver gets each
    Ctrl-C twice (uv forwards the terminal's), still one Ctrl-C."""
    if launcher == "uv" and shutil.which("uv") is None:
        pytest.skip("uv is not on PATH")
    prefix = ["uv", "run", "--no-sync", "audit"] if launcher == "uv" else [str(AUDIT)]
    store, stderr = tmp_path / "store.sqlite", tmp_path / "stderr"
    argv = prefix + _replay_command(command, store, tmp_path)
    for attempt in range(2):  # the hang was 4 runs in 5; each attempt stops a run resumed from the last
        already = _stored_trials(store)
        driver = _start(argv, stderr)
        try:
            deadline = time.monotonic() + 300  # three processes importing scikit-learn without .pyc files on a loaded machine
            while _stored_trials(store) <= already:  # trials are running (and being stored)
                assert driver.poll() is None and time.monotonic() < deadline, stderr.read_text()
                time.sleep(0.05)
            seconds, said = _interrupt(driver, stderr)
            assert (driver.returncode, said) == (130, INTERRUPTED), stderr.read_text()
            assert seconds < 5
            assert "Traceback" not in stderr.read_text()
        finally:
            end_process_group(driver)
        stopped = _trials(store)
        assert 0 < len(stopped) < TRIALS, "the run must have been stopped mid-way"
        assert all(undisturbed[key] == trial for key, trial in stopped.items())  # every stored trial is whole
    rerun = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=200)
    assert rerun.returncode == 0, rerun.stderr
    assert _trials(store) == undisturbed


def _forkserver_importing(pgid: int) -> bool:
    """Whether the group's forkserver is importing its preloads (numpy loaded: scikit-learn's
    imports, seconds of them, are under way)."""
    for pid in _group_alive(pgid):
        try:
            if ("multiprocessing.forkserver" in Path(f"/proc/{pid}/cmdline").read_text()
                    and "_multiarray_umath" in Path(f"/proc/{pid}/maps").read_text()):
                return True
        except (FileNotFoundError, ProcessLookupError):  # ended meanwhile
            continue
    return False


@pytest.mark.parametrize("attempt", range(3))  # where in its imports the signal lands varies
def test_ctrl_c_while_the_forkserver_imports_leaves_no_traceback(tmp_path, attempt):
    """The forkserver imports scikit-learn for seconds before it would ignore SIGINT itself:
    a Ctrl-C then ended it with a traceback on the user's terminal."""
    stderr = tmp_path / "stderr"
    driver = _start([str(AUDIT), *_replay_command("reproduce", tmp_path / "store.sqlite", tmp_path)], stderr)
    try:
        deadline = time.monotonic() + 60
        while not _forkserver_importing(driver.pid):
            assert driver.poll() is None and time.monotonic() < deadline, stderr.read_text()
            time.sleep(0.02)
        time.sleep(0.1 * attempt)
        seconds, said = _interrupt(driver, stderr)
        time.sleep(1)  # what the forkserver would print comes after the driver exits
        assert driver.returncode == 130 and seconds < 5
        assert stderr.read_text() == INTERRUPTED
    finally:
        end_process_group(driver)


def test_a_second_ctrl_c_leaves_at_once_and_uvs_forwarded_copy_of_the_first_does_not(tmp_path):
    """A command whose clean-up after Ctrl-C would take a minute: a SIGINT moments after the
    first (`uv run` forwarding the terminal's) changes nothing; a later one leaves at once,
    with the one line and no traceback."""
    script = ("import sys, time\n"
              "import audit.cli.inventory as inventory\n"
              "import audit.cli.main as cli\n"
              "def slow_to_stop(args):\n"
              "    try:\n"
              "        time.sleep(60)\n"
              "    finally:\n"
              "        time.sleep(60)\n"
              "inventory._strategies = slow_to_stop  # the handler `audit strategies` is bound to\n"
              "sys.exit(cli.main(['strategies']))\n")
    stderr = tmp_path / "stderr"
    process = _start([sys.executable, "-c", script], stderr)
    try:
        time.sleep(3)  # imports done, sleeping in the command
        os.killpg(process.pid, signal.SIGINT)
        time.sleep(0.05)
        os.killpg(process.pid, signal.SIGINT)
        time.sleep(1.5)
        assert process.poll() is None  # stopping (its clean-up runs)
        seconds, _ = _interrupt(process, stderr)
        assert process.returncode == 130 and seconds < 2
        assert stderr.read_text() == "audit: interrupted\n"
    finally:
        end_process_group(process)


class _StallingMirror(http.server.BaseHTTPRequestHandler):
    """Sends the headers and a first chunk of any file, then nothing more."""

    started = threading.Event()
    release = threading.Event()

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "100000")
        self.end_headers()
        self.wfile.write(b"+1 1:0.5\n" * 100)
        self.wfile.flush()
        self.started.set()
        self.release.wait(60)

    def log_message(self, *args):
        pass


def test_ctrl_c_during_a_fetch_says_the_download_stopped(tmp_path):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _StallingMirror)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = {**os.environ, "AL_AUDIT_DATA_URL": f"http://127.0.0.1:{server.server_address[1]}/",
           "XDG_CACHE_HOME": str(tmp_path / "cache")}
    stderr = tmp_path / "stderr"
    process = _start([str(AUDIT), "datasets", "--fetch", "heart"], stderr, env=env)
    try:
        assert _StallingMirror.started.wait(60), stderr.read_text()
        time.sleep(0.5)  # receiving
        seconds, said = _interrupt(process, stderr)
        assert process.returncode == 130 and seconds < 5
        assert said == ("audit: interrupted; the download in progress was stopped and its partial file removed; "
                        "data sets fetched before it are kept\n")
        assert list((tmp_path / "cache").rglob("*")) == [tmp_path / "cache" / "al-audit",
                                                        tmp_path / "cache" / "al-audit" / "datasets"]
    finally:
        _StallingMirror.release.set()
        server.shutdown()
        end_process_group(process)


def test_a_closed_stdout_pipe_ends_the_command_quietly(tmp_path):
    """`audit datasets | head -1`: the reader is gone before the listing is written."""
    process = subprocess.Popen([str(AUDIT), "datasets"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process.stdout.close()  # as head does once it has its line
    _, err = process.communicate(timeout=60)
    assert (process.returncode, err.decode()) == (141, "")


def _cores() -> int:
    return len(os.sched_getaffinity(0))


@pytest.mark.parametrize("option", ["--jobs", "--workers"])
def test_more_processes_than_cores_are_capped_with_one_warning(tmp_path, capsys, option):
    cores = _cores()
    command = "run" if option == "--workers" else "reproduce"
    argv = _replay_command(command, tmp_path / "store.sqlite", tmp_path)
    argv[argv.index(option) + 1] = str(cores + 97)
    argv[argv.index("--trials") + 1] = "1"
    assert main(argv) == 0
    err = capsys.readouterr().err
    warning = (f"audit: warning: {option} {cores + 97} is more than the {cores} core{'s' * (cores != 1)} this "
               f"process can use; running {cores}\n")
    assert err.count("audit: warning:") == 1 and err.startswith(warning)
    if command == "reproduce":
        assert re.search(rf"^plan: .* --jobs {cores}$", err, re.M)
    else:
        with sqlite3.connect(tmp_path / "store.sqlite") as db:
            assert db.execute("SELECT workers FROM runs").fetchall() == [(cores,)]


def test_as_many_processes_as_cores_ask_for_no_warning(tmp_path, capsys):
    argv = _replay_command("run", tmp_path / "store.sqlite", tmp_path)
    argv[argv.index("--workers") + 1] = str(_cores())
    argv[argv.index("--trials") + 1] = "1"
    assert main(argv) == 0
    assert "warning" not in capsys.readouterr().err
