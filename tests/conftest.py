"""Shared fixtures: the shipped protocols, the real sonar data, protocol files to edit."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import adapters
from adapters.testing import toy_pool  # noqa: F401  (tests import it from here)
from audit.engine.datasets import DataError, load_dataset
from audit.protocols import PROTOCOL_DIR, load_protocol


@pytest.fixture(scope="session")
def lu2023():
    return load_protocol("lu2023")


def one_line_error(fn, *args, **kw) -> str:
    """The message of the DataError ``fn`` raises, checked to be one line."""
    with pytest.raises(DataError) as exc:
        fn(*args, **kw)
    msg = str(exc.value)
    assert msg and "\n" not in msg
    return msg


def dataset_or_skip(name: str):
    """The real data set, or a skip saying why it cannot be loaded here."""
    try:
        return load_dataset(name)
    except DataError as exc:
        pytest.skip(f"{name} data not available: {exc}")


@pytest.fixture(scope="session")
def sonar():
    return dataset_or_skip("sonar")


@pytest.fixture(scope="session")
def heart():
    return dataset_or_skip("heart")


@pytest.fixture
def protocol_file(tmp_path):
    """Write a copy of a shipped protocol with text replacements; returns its path."""

    def make(name: str = "lu2023", replace: dict[str, str] | None = None, append: str = "") -> Path:
        text = (PROTOCOL_DIR / f"{name}.toml").read_text()
        for old, new in (replace or {}).items():
            assert old in text, old
            text = text.replace(old, new)
        path = tmp_path / f"{name}-edited.toml"
        path.write_text(text + append)
        return path

    return make


@pytest.fixture
def test_strategies(monkeypatch):
    """Register the misbehaving strategies of tests/strategies_for_tests.py as library "test"."""
    monkeypatch.setitem(adapters.LIBRARIES, "test", "tests.strategies_for_tests")


def with_split(protocol, **changes):
    return dataclasses.replace(protocol, split=dataclasses.replace(protocol.split, **changes))


def single_strategy(protocol, spec, budget: int = 5):
    """A protocol replaying only `spec`, with a short budget: a few rounds through the real runner."""
    return dataclasses.replace(protocol, budget_size=budget, strategies={spec.id: spec})


def assert_same_replay(fast, library, fast_path: str, library_path: str) -> None:
    """A trial with a fast path on and the same trial with it off: the same queries, AUBCs,
    per-round scores and warnings; only the recorded fit path (and the timings) differ."""
    assert fast.status == library.status == "ok"
    assert fast.fast_path == fast_path and library.fast_path == library_path
    assert fast.query_hash == library.query_hash
    assert fast.aubc_by_metric == library.aubc_by_metric
    assert [dataclasses.replace(r, fit_seconds=0, query_seconds=0) for r in fast.rounds] == \
        [dataclasses.replace(r, fit_seconds=0, query_seconds=0) for r in library.rounds]
    assert fast.warnings == library.warnings


@pytest.fixture(autouse=True)
def subprocess_temporary_directory(monkeypatch, tmp_path_factory):
    """Every test: a process it starts has its temporary directory (TMPDIR) in pytest's own
    temporary tree, so what a run killed on purpose leaves there (its scratch directory,
    audit/engine/scratch.py) never reaches the system's."""
    directory = tmp_path_factory.getbasetemp() / "subprocess-tmp"
    directory.mkdir(exist_ok=True)
    monkeypatch.setenv("TMPDIR", str(directory))


@pytest.fixture
def run_dir(tmp_path):
    """An empty directory named as a run's scratch directory (audit/engine/scratch.py)."""
    from audit.engine.scratch import PREFIX

    directory = tmp_path / f"{PREFIX}test"
    directory.mkdir()
    return directory


TINY_LAL = dict(episodes=1, sizes=(2, 3, 4), candidates=4, train_size=60, n_trees=10, selector_trees=5)
"""A LAL data generation of seconds (adapters/lal_data.py): tests never generate the real one."""


@pytest.fixture(autouse=True)
def tiny_lal_data(monkeypatch, tmp_path_factory):
    """Every test: LAL's regenerated training data is a tiny generation in a session
    directory (never the user cache), and ALiPy's LAL regressor has 20 trees, not 2000."""
    import sys

    from adapters import lal_data

    monkeypatch.setenv(lal_data.CACHE_ENV, str(tmp_path_factory.getbasetemp() / "lal-cache"))
    monkeypatch.delenv("AL_AUDIT_LAL_DATA", raising=False)
    monkeypatch.setattr(lal_data, "DEFAULT_CONFIG", dataclasses.replace(lal_data.DEFAULT_CONFIG, **TINY_LAL))
    alipy_adapter = sys.modules.get("adapters.alipy")
    if alipy_adapter is not None:  # reg_est's default (the adapter trains through a copy of the function)
        train = alipy_adapter._ql.QueryInstanceLAL.train_selector_from_file
        file_path, _, depth, feat = train.__defaults__
        monkeypatch.setattr(train, "__defaults__", (file_path, 20, depth, feat))
