"""Data-file faults (issue 16, items 6 and 11): files that are not what their name says,
and downloads that are too large, cut short, interrupted or killed.

Every case runs the real CLI on real files: a FIFO, a link to /dev/zero, a sparse file,
and a loopback HTTP mirror (``Mirror``) that can stream without end, die mid-transfer
or stall until a test interrupts or kills the fetching process.
"""
from __future__ import annotations

import hashlib
import http.server
import os
import resource
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from audit.cli.main import main
from audit.engine import datasets as D
from audit.paths import PROJECT_ROOT

pytestmark = pytest.mark.skipif(not D.REPO_DATA_DIR.is_dir(), reason="shared data directory absent")

SONAR = D.REGISTRY["sonar"]
CLI_TIMEOUT = 120  # seconds; the CLI's imports alone take ~10 s on a loaded machine
MEMORY_LIMIT = 1 << 30  # address space of a CLI subprocess: an unbounded read fails, not the machine


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch, tmp_path):
    monkeypatch.delenv(D.DATA_DIR_ENV, raising=False)
    monkeypatch.delenv(D.DATA_URL_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))


@pytest.fixture(scope="module")
def sonar_bytes() -> bytes:
    return (D.REPO_DATA_DIR / SONAR.file).read_bytes()


@pytest.fixture
def cache(tmp_path) -> Path:
    """The user cache `audit datasets --fetch` writes to (XDG_CACHE_HOME is set above)."""
    return tmp_path / "xdg" / "al-audit" / "datasets"


def run_audit(*args: str, timeout: float = CLI_TIMEOUT) -> subprocess.CompletedProcess:
    """The CLI in its own process with bounded memory; a hang fails the test."""
    try:
        return subprocess.run([sys.executable, "-m", "audit.cli.main", *args], capture_output=True, text=True,
                              timeout=timeout, cwd=PROJECT_ROOT, preexec_fn=_limit_memory)
    except subprocess.TimeoutExpired:
        pytest.fail(f"`audit {' '.join(args)}` still running after {timeout} s")


def start_audit(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "audit.cli.main", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=PROJECT_ROOT, preexec_fn=_limit_memory)


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def one_error_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("audit: error: "), stderr
    return lines[0]


def lint_sonar(data_dir: Path) -> subprocess.CompletedProcess:
    """The cheapest command that loads a data set."""
    return run_audit("lint", "lu2023", "--dataset", "sonar", "--data-dir", str(data_dir))


# --- the data directory -------------------------------------------------------------------

def test_fifo_under_a_data_name_is_refused_without_hanging(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    os.mkfifo(data / SONAR.file)
    done = lint_sonar(data)
    assert done.returncode == 2
    assert one_error_line(done.stderr) == f"audit: error: cannot read {data / SONAR.file}: it is a FIFO, not a regular file"
    status = D.dataset_status("sonar", data)
    assert status["status"] == "unreadable" and "FIFO" in status["problem"]


def test_link_to_dev_zero_is_refused_without_reading_it(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / SONAR.file).symlink_to("/dev/zero")
    done = lint_sonar(data)
    assert done.returncode == 2
    assert one_error_line(done.stderr).endswith(": it is a device, not a regular file")


def test_link_to_the_published_file_loads(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / SONAR.file).symlink_to(D.REPO_DATA_DIR / SONAR.file)
    assert D.load_dataset("sonar", data).X.shape == (SONAR.n, SONAR.d)
    assert D.dataset_status("sonar", data)["status"] == "ok"


def test_file_larger_than_registered_is_refused_from_its_size(tmp_path, sonar_bytes):
    data = tmp_path / "data"
    data.mkdir()
    big = data / SONAR.file
    big.write_bytes(sonar_bytes)
    os.truncate(big, 1 << 40)  # sparse: 1 TiB that reading would take hours (or all memory)
    started = time.monotonic()
    done = lint_sonar(data)
    assert done.returncode == 2
    assert one_error_line(done.stderr) == (
        f"audit: error: {big} is larger than the published file ({SONAR.n_bytes} bytes); "
        "it is corrupt or not the published version")
    assert time.monotonic() - started < CLI_TIMEOUT / 2


# --- a loopback mirror --------------------------------------------------------------------

@dataclass(frozen=True)
class Response:
    """What the mirror sends for one request: ``body``, a Content-Length (None: none, the
    end of the body is the end of the connection), then ``after``: "close", "stall" (hold
    the connection until released) or "endless" (zeros until the client stops reading)."""

    body: bytes
    length: int | None = None
    after: str = "close"


class Mirror:
    """An HTTP server on 127.0.0.1 serving queued responses per file name, bounded: a stall
    ends after STALL_LIMIT seconds and an endless body after ENDLESS_LIMIT bytes."""

    STALL_LIMIT = 60
    ENDLESS_LIMIT = 64 << 20

    def __init__(self):
        self.responses: dict[str, list[Response]] = {}
        self.requests: list[str] = []
        self.stalled = threading.Event()
        self.release = threading.Event()
        self.finished = threading.Event()
        self.sent = 0
        self.cut_off = False
        mirror = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                mirror.handle(self)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_port}/"

    def serve(self, name: str, *responses: Response) -> None:
        """Answer requests for ``name`` with ``responses`` in turn, the last one for good."""
        self.responses[name] = list(responses)

    def handle(self, request: http.server.BaseHTTPRequestHandler) -> None:
        name = request.path.lstrip("/")
        self.requests.append(name)
        queue = self.responses.get(name)
        if not queue:
            request.send_error(404)
            return
        response = queue.pop(0) if len(queue) > 1 else queue[0]
        try:
            request.send_response(200)
            if response.length is not None:
                request.send_header("Content-Length", str(response.length))
            request.end_headers()
            request.wfile.write(response.body)
            request.wfile.flush()
            self.sent = len(response.body)
            if response.after == "stall":
                self.stalled.set()
                self.release.wait(self.STALL_LIMIT)
            elif response.after == "endless":
                zeros = bytes(1 << 16)
                while self.sent < self.ENDLESS_LIMIT:
                    request.wfile.write(zeros)
                    self.sent += len(zeros)
        except (BrokenPipeError, ConnectionResetError):
            self.cut_off = True
        finally:
            self.finished.set()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def mirror(monkeypatch):
    m = Mirror()
    monkeypatch.setenv(D.DATA_URL_ENV, m.url)
    yield m
    m.close()


def fetch_sonar(capsys) -> tuple[int, str]:
    """`audit datasets --fetch sonar` in this process: exit code and stderr."""
    code = main(["datasets", "--fetch", "sonar"])
    return code, capsys.readouterr().err


def wait_for_partial(cache: Path, proc: subprocess.Popen, mirror: Mirror) -> list[str]:
    """Wait until the fetching process has written part of the file; return the cache's names."""
    assert mirror.stalled.wait(CLI_TIMEOUT), "the fetch never reached the mirror"
    deadline = time.monotonic() + CLI_TIMEOUT
    while time.monotonic() < deadline:
        names = sorted(p.name for p in cache.iterdir() if p.stat().st_size > 0)
        if names:
            return names
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    pytest.fail("no partial download appeared")


# --- fetching -------------------------------------------------------------------------------

def test_fetch_cuts_an_endless_response_off_past_the_registered_size(mirror, cache, capsys, sonar_bytes):
    mirror.serve(SONAR.file, Response(sonar_bytes, after="endless"))
    code, err = fetch_sonar(capsys)
    assert code == 2
    assert one_error_line(err) == (f"audit: error: {mirror.url}{SONAR.file} is larger than the published "
                                   f"file ({SONAR.n_bytes} bytes); it is corrupt or not the published version")
    assert list(cache.iterdir()) == []
    assert mirror.finished.wait(30)
    assert mirror.cut_off and mirror.sent < Mirror.ENDLESS_LIMIT  # the client stopped reading


def test_fetch_from_a_mirror_that_dies_mid_transfer_leaves_nothing(mirror, cache, capsys, sonar_bytes):
    half = len(sonar_bytes) // 2
    mirror.serve(SONAR.file, Response(sonar_bytes[:half], length=len(sonar_bytes)))
    code, err = fetch_sonar(capsys)
    assert code == 2
    assert one_error_line(err) == (f"audit: error: download of {mirror.url}{SONAR.file} failed: "
                                   f"the connection closed after {half} of {len(sonar_bytes)} bytes")
    assert list(cache.iterdir()) == []


def test_ctrl_c_during_fetch_removes_the_partial_file(mirror, cache, sonar_bytes):
    mirror.serve(SONAR.file, Response(sonar_bytes[:100_000], after="stall"))
    proc = start_audit("datasets", "--fetch", "sonar")
    try:
        wait_for_partial(cache, proc, mirror)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=CLI_TIMEOUT)
    finally:
        proc.kill()
    assert proc.returncode == 130 and err.startswith("audit: interrupted"), err
    assert list(cache.iterdir()) == []


def test_partial_file_of_a_killed_fetch_is_not_data_and_is_reclaimed(mirror, cache, capsys, sonar_bytes):
    mirror.serve(SONAR.file, Response(sonar_bytes[:100_000], after="stall"), Response(sonar_bytes))
    proc = start_audit("datasets", "--fetch", "sonar")
    try:
        left = wait_for_partial(cache, proc, mirror)
    finally:
        proc.kill()
        proc.wait()
    assert SONAR.file not in left
    assert "not found" in str(pytest.raises(D.DataError, D.load_dataset, "sonar", cache).value)
    mirror.release.set()
    code, err = fetch_sonar(capsys)
    assert (code, err) == (0, "")
    assert [p.name for p in cache.iterdir()] == [SONAR.file]
    assert hashlib.sha256((cache / SONAR.file).read_bytes()).hexdigest() == SONAR.sha256


def test_fetch_leaves_a_live_fetch_alone(mirror, cache, capsys, sonar_bytes):
    mirror.serve(SONAR.file, Response(sonar_bytes[:100_000], length=len(sonar_bytes), after="stall"),
                 Response(sonar_bytes[100_000:]))  # the second request must not happen
    proc = start_audit("datasets", "--fetch", "sonar")
    try:
        [partial] = wait_for_partial(cache, proc, mirror)
        before = os.stat(cache / partial)
        code, err = fetch_sonar(capsys)
        assert code == 2
        assert one_error_line(err) == (f"audit: error: {cache / partial} is being written by another "
                                       "`audit datasets --fetch`; wait for it to finish")
        assert os.path.samestat(os.stat(cache / partial), before) and mirror.requests == [SONAR.file]
    finally:
        mirror.release.set()
        proc.kill()
        proc.wait()


def test_fetch_keeps_the_published_file_already_in_the_cache(mirror, cache, capsys, sonar_bytes):
    cache.mkdir(parents=True)
    shutil.copyfile(D.REPO_DATA_DIR / SONAR.file, cache / SONAR.file)
    os.chmod(cache / SONAR.file, 0o444)
    before = os.stat(cache / SONAR.file)
    mirror.serve(SONAR.file, Response(sonar_bytes))
    code, _ = fetch_sonar(capsys)
    assert code == 0 and mirror.requests == []
    after = os.stat(cache / SONAR.file)
    assert os.path.samestat(before, after) and before.st_mtime_ns == after.st_mtime_ns


@pytest.mark.parametrize("kind", ["wrong file", "fifo"])
def test_fetch_never_replaces_another_file_under_the_data_name(mirror, cache, capsys, sonar_bytes, kind):
    cache.mkdir(parents=True)
    dest = cache / SONAR.file
    if kind == "fifo":
        os.mkfifo(dest)
    else:
        dest.write_bytes(b"my own notes, not sonar\n")
    mirror.serve(SONAR.file, Response(sonar_bytes))
    code, err = fetch_sonar(capsys)
    assert code == 2
    line = one_error_line(err)
    assert str(dest) in line and line.endswith("; al-audit does not replace it: move it away to fetch sonar")
    assert mirror.requests == []  # refused before any work
    assert [p.name for p in cache.iterdir()] == [SONAR.file]
    if kind == "fifo":
        assert stat.S_ISFIFO(os.lstat(dest).st_mode)
    else:
        assert dest.read_bytes() == b"my own notes, not sonar\n"
