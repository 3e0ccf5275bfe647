"""Issue 16, items 1-4, 9 (--out) and the umask: al-audit replaces only what it wrote,
refuses every other destination with one line before any trial runs, and never lets a
name from a file become a path."""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from audit.analysis.reproduce import ReproduceRequest, reproduce
from audit.cli.main import main
from audit.engine.destinations import MANIFEST, PROJECT_ROOT, check_report_dir
from audit.errors import AuditError

SMOKE_BASELINE = PROJECT_ROOT / "reference_results" / "baselines" / "smoke.json"
REPRODUCE = ("reproduce", "lu2023", "--dataset", "heart", "--strategies", "uniform", "--trials", "2",
             "--no-progress", "--no-diagnose")
TINY_SUITE = """name = "tiny"
protocol = "lu2023"
datasets = ["heart"]
strategies = ["uniform"]
trials = 2
"""


def cli(capsys, *argv):
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def one_error_line(code, err, *fragments) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("audit: error: "), err
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def tree(root: Path) -> dict[str, tuple]:
    """Every entry below root: links by target, files by content and mode, directories by mode."""
    found = {}
    for path in sorted(root.rglob("*")):
        key = str(path.relative_to(root))
        if path.is_symlink():
            found[key] = ("link", os.readlink(path))
        elif path.is_dir():
            found[key] = ("dir", path.stat().st_mode)
        else:
            found[key] = ("file", path.read_bytes(), path.stat().st_mode)
    return found


def precious(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "notes.txt").write_text("precious\n")
    return directory


@pytest.fixture
def tiny(lu2023):
    """lu2023 with a three-query budget: a real replay in a second."""
    return dataclasses.replace(lu2023, budget_size=3)


def replay(tiny, tmp_path, out, strategies=("uniform", "us-c"), trials=2, **options):
    return reproduce(ReproduceRequest(tiny, "heart", list(strategies), trials=trials, store=tmp_path / "s.sqlite",
                                      out=out, progress=False, no_diagnose=True, **options), log=lambda _: None)


# --- item 1: --out on anything al-audit did not write ----------------------------------

def _user_directory(tmp_path, monkeypatch):
    return precious(tmp_path / "keep"), "holds files al-audit did not write (notes.txt)"


def _user_file(tmp_path, monkeypatch):
    (tmp_path / "notes.txt").write_text("precious\n")
    return tmp_path / "notes.txt", "is a file"


def _symlink(tmp_path, monkeypatch):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere")
    return tmp_path / "link", "is a symbolic link"


def _current_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(precious(tmp_path / "work"))
    return ".", "it is the current directory"


def _parent_of_current_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(precious(tmp_path / "work"))
    return "..", "it is a parent of the current directory"


def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(precious(tmp_path / "home")))
    return tmp_path / "home", "it is your home directory"


@pytest.mark.parametrize("make", [_user_directory, _user_file, _symlink, _current_directory,
                                  _parent_of_current_directory, _home],
                         ids=["user-directory", "user-file", "symlink", "dot", "dot-dot", "home"])
def test_reproduce_refuses_an_out_it_did_not_write_before_any_trial(capsys, tmp_path, monkeypatch, make):
    out, says = make(tmp_path, monkeypatch)
    store = tmp_path / "s.sqlite"
    before = tree(tmp_path)
    code, _, err = cli(capsys, *REPRODUCE, "--store", store, "--out", out)
    one_error_line(code, err, says)
    assert tree(tmp_path) == before  # notes.txt intact, nothing hidden or added
    assert not store.exists()  # refused before the store was opened: no trial ran


@pytest.mark.parametrize("where", [PROJECT_ROOT, PROJECT_ROOT.parent, Path("/")], ids=["project", "parent", "root"])
def test_the_project_its_parents_and_the_root_are_never_report_directories(where):
    with pytest.raises(AuditError, match="will not write a report into"):
        check_report_dir(where)


# --- item 9 (--out): a destination that cannot be written, found before the trials -------

def test_out_in_a_missing_directory_or_below_a_file_is_refused_before_any_trial(capsys, tmp_path):
    (tmp_path / "notes.txt").write_text("precious\n")
    for out in (tmp_path / "missing" / "report", tmp_path / "notes.txt" / "report"):
        code, _, err = cli(capsys, *REPRODUCE, "--store", tmp_path / "s.sqlite", "--out", out)
        one_error_line(code, err, f"cannot write {out}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only directory")
def test_out_in_an_unwritable_directory_is_refused_before_any_trial(capsys, tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    code, _, err = cli(capsys, *REPRODUCE, "--store", tmp_path / "s.sqlite", "--out", locked / "report")
    one_error_line(code, err, f"cannot write in {locked}")
    assert not (tmp_path / "s.sqlite").exists()


# --- item 1: what al-audit wrote it may replace, with the user's umask ------------------

def test_a_report_directory_gets_the_umask_and_a_manifest_and_is_replaced_by_the_next_run(tmp_path, tiny):
    previous = os.umask(0o027)
    try:
        out = replay(tiny, tmp_path, tmp_path / "r").out_dir
    finally:
        os.umask(previous)
    assert out.stat().st_mode & 0o777 == 0o750  # as mkdir would make it, not mkdtemp's 0700
    manifest = json.loads((out / MANIFEST).read_text())
    assert manifest["tool"] == "al-audit" and manifest["protocol"] == "lu2023" and manifest["dataset"] == "heart"
    assert manifest["strategies"] == ["uniform", "us-c"] and manifest["trials"] == 2
    assert set(manifest["files"]) | {MANIFEST} == {p.name for p in out.iterdir()}
    first = (out / "report.json").read_text()
    replay(tiny, tmp_path, out)  # its own report: replaced
    assert json.loads((out / "report.json").read_text())["generated_at"] >= json.loads(first)["generated_at"]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary left beside it


def test_an_existing_empty_directory_receives_the_report(tmp_path, tiny):
    (tmp_path / "r").mkdir()
    replay(tiny, tmp_path, tmp_path / "r")
    assert (tmp_path / "r" / "report.md").exists()


def test_a_file_the_user_put_into_a_report_directory_is_never_deleted(tmp_path, tiny):
    out = replay(tiny, tmp_path, tmp_path / "r").out_dir
    (out / "my-notes.txt").write_text("precious\n")
    with pytest.raises(AuditError, match=r"also holds files it did not write \(my-notes.txt\)"):
        replay(tiny, tmp_path, out)
    assert (out / "my-notes.txt").read_text() == "precious\n" and (out / "report.md").exists()


# --- item 2: a report is never silently replaced by one with less in it ------------------

def test_fewer_strategies_or_trials_do_not_silently_replace_a_fuller_report(tmp_path, tiny):
    out = replay(tiny, tmp_path, tmp_path / "r").out_dir
    full = (out / "report.json").read_text()
    with pytest.raises(AuditError, match="this one lacks us-c: give --out another directory"):
        replay(tiny, tmp_path, out, strategies=["uniform"])
    with pytest.raises(AuditError, match="this one has 1 trials, not 2"):
        replay(tiny, tmp_path, out, trials=1)
    assert (out / "report.json").read_text() == full
    replay(tiny, tmp_path, out, strategies=["uniform"], force=True)
    assert [c["strategy"] for c in json.loads((out / "report.json").read_text())["strategies"]] == ["uniform"]


def test_reproduce_says_which_files_it_wrote_where(capsys, tmp_path):
    out = tmp_path / "r"
    code, stdout, _ = cli(capsys, *REPRODUCE, "--store", tmp_path / "s.sqlite", "--out", out)
    assert code == 0
    line = next(line for line in stdout.splitlines() if line.startswith("report: "))
    assert line.startswith(f"report: {out}/ ")
    assert all(p.name in line for p in out.iterdir() if p.name != MANIFEST)


# --- every other command that writes a report directory -----------------------------------

def _empty_baseline(tmp_path: Path, suite_name: str = "smoke") -> Path:
    """The smoke baseline with no data set left: a gate against it replays nothing."""
    baseline = json.loads(SMOKE_BASELINE.read_text())
    baseline.update(datasets={}, cells=[])
    baseline["suite"]["name"] = suite_name
    path = tmp_path / "empty-baseline.json"
    path.write_text(json.dumps(baseline))
    return path


@pytest.mark.parametrize("command", ["compat", "usefulness", "crosscheck", "gate"])
def test_every_command_refuses_an_out_it_did_not_write_before_any_trial(capsys, tmp_path, command):
    keep = precious(tmp_path / "keep")
    store = tmp_path / "s.sqlite"
    common = ("--out", keep, "--no-progress")
    argv = {"compat": ("compat", "--protocol", "lu2023", "--dataset", "heart", "--models", "lr,svm-rbf",
                       "--trials", "2", "--store", store),
            "usefulness": ("usefulness", "--protocol", "lu2023", "--datasets", "heart", "--strategies",
                           "uniform", "--trials", "2", "--store", store),
            "crosscheck": ("crosscheck", "--dataset", "heart", "--trials", "1", "--store", store),
            "gate": ("gate", "--baseline", _empty_baseline(tmp_path))}[command]
    code, _, err = cli(capsys, *argv, *common)
    one_error_line(code, err, "holds files al-audit did not write (notes.txt)")
    assert tree(keep) == {"notes.txt": ("file", b"precious\n", (keep / "notes.txt").stat().st_mode)}
    assert not store.exists()


def test_gate_replaces_its_own_report_directory(capsys, tmp_path):
    out = tmp_path / "g"
    for _ in range(2):
        code, stdout, _ = cli(capsys, "gate", "--baseline", _empty_baseline(tmp_path), "--out", out, "--no-progress")
        assert code == 0 and f"reports: {out}/summary.md" in stdout
    assert {p.name for p in out.iterdir()} == {"summary.md", "junit.xml", "gate.json", MANIFEST}


# --- item 3: baselines ---------------------------------------------------------------------

def test_baseline_create_writes_below_the_current_directory_not_into_the_project(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tiny.toml").write_text(TINY_SUITE)
    code, stdout, _ = cli(capsys, "baseline", "create", "--suite", "tiny.toml", "--no-progress")
    assert code == 0
    assert json.loads((tmp_path / "al-audit-baselines" / "tiny.json").read_text())["suite"]["name"] == "tiny"
    assert "baseline al-audit-baselines/tiny.json" in stdout
    assert not (tmp_path / "reference_results").exists()


def test_baseline_create_never_overwrites_a_file_it_did_not_write(capsys, tmp_path):
    (tmp_path / "tiny.toml").write_text(TINY_SUITE)
    mine = tmp_path / "mine.json"
    mine.write_text('{"my": "data"}\n')
    code, _, err = cli(capsys, "baseline", "create", "--suite", tmp_path / "tiny.toml", "--out", mine,
                       "--no-progress", "--force")
    one_error_line(code, err, "is a file al-audit did not write")
    assert mine.read_text() == '{"my": "data"}\n'


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_baseline_create_replaces_a_baseline_git_tracks_only_with_force(capsys, tmp_path):
    (tmp_path / "tiny.toml").write_text(TINY_SUITE)
    repo = tmp_path / "project"
    repo.mkdir()
    tracked = repo / "smoke.json"
    shutil.copy(SMOKE_BASELINE, tracked)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    for args in (["init", "-q"], ["add", "smoke.json"], ["commit", "-qm", "baseline"]):
        subprocess.run(git + args, check=True, capture_output=True)
    code, _, err = cli(capsys, "baseline", "create", "--suite", tmp_path / "tiny.toml", "--out", tracked,
                       "--no-progress")
    one_error_line(code, err, "is tracked by git; give --force to replace it")
    assert tracked.read_bytes() == SMOKE_BASELINE.read_bytes()
    assert cli(capsys, "baseline", "create", "--suite", tmp_path / "tiny.toml", "--out", tracked,
               "--no-progress", "--force")[0] == 0
    assert json.loads(tracked.read_text())["suite"]["name"] == "tiny"


# --- item 4: names from files never become paths ------------------------------------------

def test_a_protocol_named_like_a_path_is_refused_and_nothing_written(capsys, tmp_path, monkeypatch, protocol_file):
    escaping = protocol_file(replace={'name = "lu2023"': 'name = "../../escape"'})
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    before = tree(tmp_path)
    code, _, err = cli(capsys, "reproduce", escaping, "--dataset", "heart", "--strategies", "uniform", "--trials", "2",
                       "--no-progress", "--no-diagnose")
    one_error_line(code, err, "protocol name '../../escape' is not a short identifier")
    assert tree(tmp_path) == before


@pytest.mark.parametrize("name", ["../../x", "A/b", "..", "x" * 65])
def test_a_suite_named_like_a_path_is_refused_and_nothing_written(capsys, tmp_path, monkeypatch, name):
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    (work / "suite.toml").write_text(TINY_SUITE.replace('name = "tiny"', f"name = {json.dumps(name)}"))
    before = tree(tmp_path)
    code, _, err = cli(capsys, "baseline", "create", "--suite", "suite.toml", "--no-progress")
    one_error_line(code, err, "is not a short identifier")
    assert tree(tmp_path) == before


def test_a_baseline_whose_suite_name_is_a_path_is_refused_by_the_gate(capsys, tmp_path, monkeypatch):
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    baseline = _empty_baseline(tmp_path, suite_name="../../x")
    before = tree(tmp_path)
    code, _, err = cli(capsys, "gate", "--baseline", baseline, "--no-progress")
    one_error_line(code, err, "suite name '../../x' is not a short identifier")
    assert tree(tmp_path) == before


def test_an_empty_directory_of_the_users_is_filled_not_replaced(tmp_path):
    from audit.engine.destinations import write_directory

    target = tmp_path / "mine"
    target.mkdir()
    inode = target.stat().st_ino
    write_directory(target, {"a.txt": "x"}, {"command": "test"})
    assert target.stat().st_ino == inode and (target / "a.txt").read_text() == "x"


def test_replacing_a_report_removes_only_what_its_manifest_lists(tmp_path, capsys):
    from audit.engine.destinations import _remove_report

    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    report = tmp_path / "old"
    (report / "sub").mkdir(parents=True)
    (report / "sub" / "a.txt").write_text("ours")
    (report / "late.txt").write_text("the user's, put there after the check")
    _remove_report(report, ["sub/a.txt", "../outside.txt"])
    assert outside.read_text() == "keep" and (report / "late.txt").exists()
    assert not (report / "sub").exists() and "keeps files al-audit did not write" in capsys.readouterr().err
    (report / "late.txt").unlink()
    _remove_report(report, [])
    assert not report.exists()
