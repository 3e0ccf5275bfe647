"""Data-set registry and loader: checksums, label encodings, file order, failure messages."""
from __future__ import annotations

import hashlib
import shutil

import numpy as np
import pytest

from audit.engine import datasets as D
from audit.engine.datasets import DatasetInfo
from tests.conftest import one_line_error

BINARY = ("appendicitis sonar parkinsons ex8b heart haberman ionosphere clean1 breast wdbc "
          "australian diabetes mammographic ex8a tic german splice gcloudb gcloudub checkerboard "
          "spambase banana phoneme ringnorm twonorm phishing").split()
MULTICLASS = "iris wine thyroid vehicle glass seeds d31 r15".split()

needs_data = pytest.mark.skipif(not D.REPO_DATA_DIR.is_dir(), reason="shared data directory absent")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    monkeypatch.delenv(D.DATA_DIR_ENV, raising=False)
    monkeypatch.delenv(D.DATA_URL_ENV, raising=False)


@pytest.fixture
def sonar_copy(tmp_path):
    """A private copy of sonar that a test may damage."""
    if not D.REPO_DATA_DIR.is_dir():
        pytest.skip("shared data directory absent")
    d = tmp_path / "data"
    d.mkdir()
    shutil.copyfile(D.REPO_DATA_DIR / "sonar-svmstyle.txt", d / "sonar-svmstyle.txt")
    return d / "sonar-svmstyle.txt"


def register(monkeypatch, tmp_path, lines, task, n_classes=2, d=3):
    """Write a tiny LIBSVM file and register it as 'tiny' (checksum not pinned)."""
    text = "".join(line + "\n" for line in lines)
    (tmp_path / "tiny-svmstyle.txt").write_text(text)
    info = DatasetInfo("tiny", "tiny-svmstyle.txt", len(lines), d, n_classes, (), 1.0, "0" * 64, len(text),
                       task, "small")
    monkeypatch.setitem(D.REGISTRY, "tiny", info)
    return info


# --- registry -------------------------------------------------------------------------------

FILES = {name: info for name, info in D.REGISTRY.items() if not info.generator and not info.parts}


def test_registry_composition():
    assert len(FILES) == 34
    assert D.names(task="synthetic") == ["threeclust", "divergingsin"]  # tests/test_synthetic.py
    assert D.names(task="train-test") == ["splice-full", "dna", "usps"]  # tests/test_train_test_data.py
    assert D.names(task="binary") == BINARY
    assert D.names(task="multiclass") == MULTICLASS
    for name, info in FILES.items():
        counts = [c for _, c in info.class_counts]
        assert info.name == name and info.file.endswith("-svmstyle.txt")
        assert sum(counts) == info.n and len(counts) == info.n_classes
        assert info.imbalance_ratio == round(max(counts) / min(counts), 2)
        assert info.size == ("small" if info.n < 2000 else "large")
        assert len(info.sha256) == 64
    assert D.names(task="binary", size="large") == BINARY[20:]
    assert D.REGISTRY["tic"].file == "tictactoe-svmstyle.txt" and D.REGISTRY["tic"].d == 18
    assert D.REGISTRY["sonar"].class_counts == (("1", 97), ("-1", 111))


def test_get_info_unknown_lists_names_and_alias():
    msg = one_line_error(D.get_info, "foo")
    assert msg == f"unknown data set 'foo'; known: {', '.join(sorted(D.REGISTRY))}"
    assert msg.index("appendicitis") < msg.index("australian")
    assert D.get_info("tictactoe") is D.REGISTRY["tic"]


@needs_data
def test_sha256_literals_match_sha256sums():
    sums = {}
    for line in (D.REPO_DATA_DIR / "SHA256SUMS").read_text().splitlines():
        digest, fname = line.split()
        sums[fname.lstrip("*")] = digest
    assert {i.file: i.sha256 for i in FILES.values()} == sums


@needs_data
def test_registered_sizes_are_the_files_sizes():
    assert {i.file: i.n_bytes for i in FILES.values()} == {
        i.file: (D.REPO_DATA_DIR / i.file).stat().st_size for i in FILES.values()}


@needs_data
def test_every_registered_file_loads_as_registered():
    for info in FILES.values():
        ds = D.load_dataset(info.name)
        assert ds.X.shape == (info.n, info.d)
        assert ds.classes == tuple(sorted((lab for lab, _ in info.class_counts), key=float))
        counts = dict(info.class_counts)
        assert [int(np.sum(ds.y == k)) for k in range(info.n_classes)] == [counts[c] for c in ds.classes]


# --- loading --------------------------------------------------------------------------------

@needs_data
def test_sonar_loads_in_file_order():
    ds = D.load_dataset("sonar")
    assert ds.X.shape == (208, 60) and ds.X.dtype == np.float64 and ds.X.flags.c_contiguous
    assert ds.y.dtype == np.int64 and set(np.unique(ds.y)) == {0, 1}
    assert ds.classes == ("-1", "1") and int(ds.y.sum()) == 97
    assert ds.X[0, 0] == -0.727139 and ds.y[0] == 1 and ds.y[-1] == 0  # first line of the file
    assert D.label_runs(ds.y) == 2
    assert not ds.X.flags.writeable and not ds.y.flags.writeable
    assert D.load_dataset("sonar") is ds  # in-process cache


@needs_data
@pytest.mark.parametrize("name", ["sonar", "clean1", "spambase", "tic", "appendicitis", "breast", "ex8a", "ex8b"])
def test_label_runs_match_protocol_notes(name):
    ds = D.load_dataset(name)
    assert D.label_runs(ds.y) == (ds.info.n if name in ("breast", "ex8a", "ex8b") else 2)


def test_label_runs():
    assert D.label_runs(np.array([0, 0, 1, 1])) == 2
    assert D.label_runs(np.array([1, 0, 1])) == 3
    assert D.label_runs(np.array([], dtype=np.int64)) == 0


@pytest.mark.parametrize("pos,neg", [("+1", "-1"), ("1", "-1"), ("1", "0")])
def test_binary_label_encodings(monkeypatch, tmp_path, pos, neg):
    register(monkeypatch, tmp_path, [f"{neg} 1:0.5 3:2", f"{pos} 2:1", f"{pos} 1:-1", f"{neg} 3:4"], "binary")
    ds = D.load_dataset("tiny", tmp_path, verify=False)
    assert ds.y.tolist() == [0, 1, 1, 0] and ds.classes == (neg, pos)
    assert ds.X.tolist() == [[0.5, 0, 2], [0, 1, 0], [-1, 0, 0], [0, 0, 4]]


def test_multiclass_labels_sort_numerically(monkeypatch, tmp_path):
    register(monkeypatch, tmp_path, ["3 1:1 3:1", "10 2:1", "1 1:2", "2 3:3"], "multiclass", n_classes=4)
    ds = D.load_dataset("tiny", tmp_path, verify=False)
    assert ds.y.tolist() == [2, 3, 0, 1] and ds.classes == ("1", "2", "3", "10")


def test_parser_tolerates_crlf_comments_blank_lines(tmp_path):
    p = tmp_path / "x.txt"
    p.write_bytes(b"# header\r\n+1 1:1 2:2 # tail\r\n\r\n-1 2:3\r\n")
    X, labels = D.parse_libsvm(p)
    assert labels == ["+1", "-1"] and X.tolist() == [[1, 2], [0, 3]]
    y, classes = D.encode_labels(labels)
    assert y.tolist() == [1, 0] and classes == ("-1", "+1")


def test_binary_task_rejects_other_labels(monkeypatch, tmp_path):
    register(monkeypatch, tmp_path, ["1 1:1 3:1", "2 1:1"], "binary")
    msg = one_line_error(D.load_dataset, "tiny", tmp_path, verify=False)
    assert "tiny-svmstyle.txt" in msg and "+1/-1" in msg


# --- data directory resolution ----------------------------------------------------------------

def test_resolution_order(monkeypatch, tmp_path):
    arg, env, repo = (tmp_path / s for s in ("arg", "env", "repo"))
    for d in (arg, env, repo):
        d.mkdir()
    monkeypatch.setattr(D, "REPO_DATA_DIR", repo)
    monkeypatch.setenv(D.DATA_DIR_ENV, str(env))
    assert D.resolve_data_dir(arg) == arg.resolve()
    assert D.resolve_data_dir() == env.resolve()
    monkeypatch.delenv(D.DATA_DIR_ENV)
    assert D.resolve_data_dir() == repo
    monkeypatch.setattr(D, "REPO_DATA_DIR", tmp_path / "absent")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert D.resolve_data_dir() == tmp_path / "xdg" / "al-audit" / "datasets"


def test_named_directory_must_exist(monkeypatch, tmp_path):
    missing = tmp_path / "nope"
    assert str(missing) in one_line_error(D.resolve_data_dir, missing)
    monkeypatch.setenv(D.DATA_DIR_ENV, str(missing))
    msg = one_line_error(D.resolve_data_dir)
    assert str(missing) in msg and D.DATA_DIR_ENV in msg


# --- failures -------------------------------------------------------------------------------

def test_missing_file(tmp_path):
    msg = one_line_error(D.load_dataset, "sonar", tmp_path)
    assert msg.startswith("data file for 'sonar' not found: ")
    assert str(tmp_path / "sonar-svmstyle.txt") in msg and "AL_AUDIT_DATA_DIR" in msg


def test_checksum_mismatch(sonar_copy):
    data = bytearray(sonar_copy.read_bytes())
    data[10] = ord("9") if data[10] != ord("9") else ord("8")
    sonar_copy.write_bytes(bytes(data))
    msg = one_line_error(D.load_dataset, "sonar", sonar_copy.parent)
    assert msg.startswith(f"checksum mismatch for {sonar_copy}: expected 5d820b62d987...")
    D.load_dataset("sonar", sonar_copy.parent, verify=False)  # still parses: only a digit changed


@pytest.mark.parametrize("damage", [
    lambda t: t.replace(" 7:", " x:", 1),           # bad index
    lambda t: t.replace(" 7:", " 7;", 1),           # missing colon
    lambda t: t.replace(" 8:", " 6:", 1),           # indices not increasing
    lambda t: "x" + t[1:],                          # bad label (same size: a larger file is refused first)
    lambda t: t.replace(" 7:-0.185065", " 7:inf", 1),  # non-finite value
    lambda t: "\n".join(t.splitlines()[:-1]),       # a row short
    lambda t: t.replace(" 60:", " 61:", 1),         # wider than registered
])
def test_corrupt_content(sonar_copy, damage):
    sonar_copy.write_text(damage(sonar_copy.read_text()))
    msg = one_line_error(D.load_dataset, "sonar", sonar_copy.parent, verify=False)
    assert str(sonar_copy) in msg
    assert "checksum mismatch" in one_line_error(D.load_dataset, "sonar", sonar_copy.parent)


def test_binary_garbage(sonar_copy):
    sonar_copy.write_bytes(b"\x00\xff\xfe" * 100)
    assert str(sonar_copy) in one_line_error(D.load_dataset, "sonar", sonar_copy.parent, verify=False)


# --- status and table -----------------------------------------------------------------------

@needs_data
def test_status_and_table(tmp_path, sonar_copy):
    ok = D.dataset_status("sonar")
    assert ok["present"] and ok["verified"] is True and ok["label_runs"] == 2 and ok["status"] == "ok"
    assert ok["n"] == 208 and ok["task"] == "binary" and ok["problem"] is None
    empty = tmp_path / "empty"
    empty.mkdir()
    missing = D.dataset_status("d31", empty)
    assert not missing["present"] and missing["verified"] is None and missing["label_runs"] is None
    assert missing["status"] == "missing" and "not found" in missing["problem"]
    assert D.dataset_status("iris", tmp_path / "nope")["problem"].startswith("data directory not found")
    sonar_copy.write_text(sonar_copy.read_text().replace("0.1", "0.2", 1))
    bad = D.dataset_status("sonar", sonar_copy.parent)
    assert bad["present"] and bad["verified"] is False and bad["status"] == "checksum mismatch"

    lines = D.format_registry_table([ok, missing, bad]).splitlines()
    assert lines[0].split() == ["name", "task", "n", "d", "classes", "IR", "size", "status", "label", "runs",
                                "dup", "rows", "test", "in", "train", "vs", "papers"]
    assert lines[2].split() == ["sonar", "binary", "208", "60", "97/111", "1.14", "small", "ok", "2", "0", "-",
                                "differs"]
    assert lines[3].split() == ["d31", "multiclass", "3100", "2", "31x100", "1.00", "large", "missing", "-", "-",
                                "-", "ok"]
    assert lines[4].split()[-6:] == ["checksum", "mismatch", "-", "-", "-", "differs"]
    assert lines[-1] == "sonar: n is 208 in the file; 108 in zhan2021 Table 2 and zhan2021 as quoted in " \
        "lu2023 Table 5; 208 in lu2023 Table 5"


# --- properties against the papers, duplicates ----------------------------------------------

def test_tic_differs_from_every_paper_and_sonar_agrees_with_lu2023s_revision():
    tic = D.property_differences(D.get_info("tic"))
    assert tic[0] == "d is 18 in the file; 9 in lu2023 Table 5 and zhan2021 as quoted in lu2023 Table 5 " \
        "(no paper agrees)"
    assert D.incomparable(D.get_info("tic")) and not D.incomparable(D.get_info("sonar"))
    assert D.property_differences(D.get_info("heart")) == []  # IR 1.25 printed as 1: one unit of the last digit
    assert D.property_differences(D.get_info("thyroid")) == ["classes is 3 in the file; 4 in zhan2021 Table 2 (no paper agrees)"]


def test_duplicate_counts():
    X = np.array([[0.0, 1.0], [0.0, 1.0], [0.0, 1.0], [2.0, 3.0], [4.0, 5.0]])
    assert D.duplicate_rows(X, np.array([1, 1, 0, 0, 0])) == 1  # the same features with another label is no copy
    assert D.test_rows_seen_in_training(X, test=np.array([2, 4]), train=np.array([0, 3])) == 1


@needs_data
def test_datasets_command_flags_tic_and_counts_duplicates(capsys):
    from audit.cli.main import main

    assert main(["datasets", "--split", "lu2023"]) == 0
    out = capsys.readouterr().out.splitlines()
    row = {line.split()[0]: line.split() for line in out if line.split() and line.split()[0] in D.REGISTRY}
    assert row["tic"][-4:] == ["0", "0", "differs", "(!)"] and row["tic"][3] == "18"
    assert row["mammographic"][9:11] == ["266", "152"] and row["heart"][-1] == "ok"
    assert ("tic: d is 18 in the file; 9 in lu2023 Table 5 and zhan2021 as quoted in lu2023 Table 5 "
            "(no paper agrees)") in out


def test_a_report_says_when_its_file_matches_no_paper():
    from audit.report.sections import data_property_lines

    [line] = data_property_lines("tic")
    assert line.startswith("data set tic differs from the papers: d is 18 in the file; 9 in") and "trial by trial" in line
    assert data_property_lines("heart") == []


# --- fetch ----------------------------------------------------------------------------------

def test_fetch_needs_a_source(tmp_path):
    msg = one_line_error(D.fetch, "sonar", tmp_path / "cache")
    assert msg == "no download source configured: set AL_AUDIT_DATA_URL to a mirror of the LIBSVM files"


def test_fetch_from_file_mirror(monkeypatch, tmp_path, sonar_copy):
    monkeypatch.setenv(D.DATA_URL_ENV, sonar_copy.parent.as_uri() + "/")
    cache = tmp_path / "cache"
    path = D.fetch("sonar", cache)
    assert path == cache / "sonar-svmstyle.txt"
    assert hashlib.sha256(path.read_bytes()).hexdigest() == D.REGISTRY["sonar"].sha256
    assert sorted(p.name for p in cache.iterdir()) == ["sonar-svmstyle.txt"]
    assert D.load_dataset("sonar", cache).info.n == 208
    monkeypatch.delenv(D.DATA_URL_ENV)
    assert D.fetch("sonar", cache) == path  # already there and verified: no source needed


def test_fetch_rejects_corrupt_or_absent_mirror_file(monkeypatch, tmp_path, sonar_copy):
    sonar_copy.write_text(sonar_copy.read_text().replace("0.1", "0.2", 1))
    monkeypatch.setenv(D.DATA_URL_ENV, sonar_copy.parent.as_uri())
    cache = tmp_path / "cache"
    assert "checksum mismatch" in one_line_error(D.fetch, "sonar", cache)
    assert list(cache.iterdir()) == []
    assert "failed" in one_line_error(D.fetch, "iris", cache)
    assert list(cache.iterdir()) == []
