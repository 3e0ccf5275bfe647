"""Shared fixtures: the shipped protocols, the real sonar data, protocol files to edit."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import adapters
from audit.datasets import DataError, load_dataset
from audit.protocols import PROTOCOL_DIR, load_protocol


@pytest.fixture(scope="session")
def lu2023():
    return load_protocol("lu2023")


@pytest.fixture(scope="session")
def sonar():
    try:
        return load_dataset("sonar")
    except DataError as exc:
        pytest.skip(f"sonar data not available: {exc}")


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
