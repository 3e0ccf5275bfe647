"""The run's scratch directory: made fresh in the temporary directory, seen by the trials of
the run through their tasks, removed with all it holds when the run ends."""
import os
import tempfile

import pytest

from audit.analysis.reproduce import ReproduceRequest, reproduce
from audit.engine import replay as engine_replay
from audit.engine import scratch


@pytest.fixture
def temporary(tmp_path, monkeypatch):
    """tempfile's directory moved to an empty one of this test's."""
    directory = tmp_path / "tmp"
    directory.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(directory))
    return directory


def test_a_run_has_a_new_directory_of_its_own_until_it_ends(temporary):
    (temporary / "users-file").write_text("kept")
    assert scratch.current() is None
    with scratch.run_scratch() as path:
        assert os.path.dirname(path) == str(temporary) and os.path.basename(path).startswith("al-audit-run-")
        assert scratch.current() == path and os.listdir(path) == []
        open(os.path.join(path, "entry"), "w").close()
    assert scratch.current() is None and not os.path.exists(path)
    assert sorted(os.listdir(temporary)) == ["users-file"]


def test_the_directory_goes_when_the_run_fails_or_is_interrupted(temporary):
    for stop in (RuntimeError, KeyboardInterrupt):
        with pytest.raises(stop):
            with scratch.run_scratch() as path:
                raise stop()
        assert not os.path.exists(path) and scratch.current() is None
    assert os.listdir(temporary) == []


def test_a_run_inside_a_run_shares_the_outer_directory(temporary):
    with scratch.run_scratch() as outer:
        with scratch.run_scratch() as inner:
            assert inner == outer
        assert os.path.isdir(outer) and scratch.current() == outer
    assert not os.path.exists(outer)


def test_a_trial_sees_its_tasks_directory_and_none_that_is_not_there(run_dir, tmp_path):
    with scratch.using(str(run_dir)):
        assert scratch.current() == str(run_dir)
        with scratch.using(None):
            assert scratch.current() is None
    with scratch.using(str(tmp_path / f"{scratch.PREFIX}on-another-machine")):
        assert scratch.current() is None


def test_a_directory_not_named_as_a_runs_is_never_used(tmp_path):
    """A task naming a user's directory: nothing is read from or written into it."""
    with scratch.using(str(tmp_path)):
        assert scratch.current() is None


def test_reproduce_gives_its_tasks_the_directory_and_removes_it(temporary, tmp_path, monkeypatch):
    seen = []
    missing = engine_replay.missing_tasks

    def spy(*args, **kwargs):
        fingerprint, details, tasks, reused = missing(*args, **kwargs)
        seen.extend((t.scratch, os.path.isdir(t.scratch)) for t in tasks)
        return fingerprint, details, tasks, reused

    monkeypatch.setattr(engine_replay, "missing_tasks", spy)
    reproduce(ReproduceRequest("zhan2021", "sonar", strategies=["uniform"], trials=2, store=tmp_path / "s.sqlite",
                               out=tmp_path / "report", progress=False, no_diagnose=True), log=lambda line: None)
    assert len(seen) == 2 and all(isdir for _, isdir in seen) and len({path for path, _ in seen}) == 1
    assert os.path.dirname(seen[0][0]) == str(temporary) and os.listdir(temporary) == []
