"""Data-file faults (issue 16, item 6): files that are not what their name says.

Every case runs the real CLI on real files: a FIFO, a link to /dev/zero, a sparse file.
"""
from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from audit import datasets as D

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
        return subprocess.run([sys.executable, "-m", "audit.cli", *args], capture_output=True, text=True,
                              timeout=timeout, cwd=D.REPO_ROOT, preexec_fn=_limit_memory)
    except subprocess.TimeoutExpired:
        pytest.fail(f"`audit {' '.join(args)}` still running after {timeout} s")


def start_audit(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "audit.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=D.REPO_ROOT, preexec_fn=_limit_memory)


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
