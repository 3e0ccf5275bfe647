"""adapters/reuse.py: an entry is computed once per run and read back equal; without a scratch
directory, or from a damaged file, it is computed; a write that cannot be made leaves nothing."""
import os
import pickle

import numpy as np
import pytest

from adapters import reuse
from audit.engine import scratch


class Computations:
    def __init__(self):
        self.calls = 0

    def __call__(self):
        self.calls += 1
        return {"values": np.arange(5.0) * self.calls}


def _probe(entry):
    return entry["values"]


def test_without_a_scratch_directory_every_call_computes():
    compute = Computations()
    assert reuse.reused("thing", ("k",), compute, _probe)[1] is False
    assert reuse.reused("thing", ("k",), compute, _probe)[1] is False
    assert compute.calls == 2


def test_the_second_call_with_a_key_reads_the_first_ones_object(run_dir):
    compute = Computations()
    with scratch.using(str(run_dir)):
        first, stored_first = reuse.reused("thing", ("k", 1), compute, _probe)
        second, stored_second = reuse.reused("thing", ("k", 1), compute, _probe)
        other, stored_other = reuse.reused("thing", ("k", 2), compute, _probe)
    assert (stored_first, stored_second, stored_other) == (False, True, False) and compute.calls == 2
    assert np.array_equal(second["values"], first["values"]) and not np.array_equal(other["values"], first["values"])
    assert sorted(p.suffix for p in run_dir.iterdir()) == [".pickle", ".pickle"]


@pytest.mark.parametrize("damage", ["truncated", "other probe", "other key"])
def test_a_damaged_or_foreign_entry_is_computed_again(run_dir, damage):
    compute = Computations()
    with scratch.using(str(run_dir)):
        reuse.reused("thing", ("k",), compute, _probe)
        (path,) = run_dir.iterdir()
        key, probe, obj = pickle.loads(path.read_bytes())
        if damage == "truncated":
            path.write_bytes(path.read_bytes()[:20])
        elif damage == "other probe":
            path.write_bytes(pickle.dumps((key, probe + 1, obj)))
        else:
            path.write_bytes(pickle.dumps((("another",), probe, obj)))
        again, stored = reuse.reused("thing", ("k",), compute, _probe)
        assert not stored and compute.calls == 2 and np.array_equal(again["values"], np.arange(5.0) * 2)
        assert reuse.reused("thing", ("k",), compute, _probe)[1]  # rewritten whole


def test_nothing_is_written_when_space_is_short_or_the_write_fails(run_dir, monkeypatch):
    compute = Computations()
    with scratch.using(str(run_dir)):
        monkeypatch.setattr(reuse, "MIN_FREE_BYTES", 2**62)
        assert reuse.reused("thing", ("k",), compute, _probe)[1] is False
        assert list(run_dir.iterdir()) == []
        monkeypatch.setattr(reuse, "MIN_FREE_BYTES", 0)

        def full(*args, **kwargs):
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(reuse.pickle, "dump", full)
        obj, stored = reuse.reused("thing", ("k",), compute, _probe)
        assert not stored and np.array_equal(obj["values"], np.arange(5.0) * 2)
        assert list(run_dir.iterdir()) == [] and compute.calls == 2  # no ".part" file left either


def test_a_part_file_this_call_did_not_create_is_left_alone(run_dir):
    compute = Computations()
    other = run_dir / (os.path.basename(reuse._entry_path(str(run_dir), "thing", ("k",))) + f".{os.getpid()}.part")
    other.write_bytes(b"another writer's")
    with scratch.using(str(run_dir)):
        assert reuse.reused("thing", ("k",), compute, _probe)[1] is False
    assert sorted(p.name for p in run_dir.iterdir()) == [other.name] and other.read_bytes() == b"another writer's"
