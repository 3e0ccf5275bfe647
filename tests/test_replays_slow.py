"""Full published replays (minutes each): `uv run pytest -m slow`."""
from __future__ import annotations

import pytest

from audit.analysis.reproduce import ReproduceRequest, reproduce

pytestmark = pytest.mark.slow


def cells(tmp_path, protocol, dataset, strategies, jobs=2):
    outcome = reproduce(ReproduceRequest(protocol, dataset, strategies, jobs=jobs, store=tmp_path / "s.sqlite",
                                         out=tmp_path / "r", progress=False), log=lambda _: None)
    return {c["strategy"]: c for c in outcome.report["strategies"]}


def test_lu2023_sonar_uniform_and_us_c_reproduce(tmp_path, sonar):
    got = cells(tmp_path, "lu2023", "sonar", ["uniform", "us-c"])
    assert got["uniform"]["n_trials"] == 100 and got["uniform"]["published_mean"] == pytest.approx(0.7463)
    assert got["uniform"]["verdict"] == "consistent"
    assert got["us-c"]["published_mean"] == pytest.approx(0.7762)
    assert got["us-c"]["verdict"] == "consistent"


def test_zhan2021_sonar_uniform_is_discrepant_at_1_percent(tmp_path, sonar):
    got = cells(tmp_path, "zhan2021", "sonar", ["uniform"])
    assert got["uniform"]["published_mean"] == pytest.approx(0.617)
    assert got["uniform"]["verdict"] == "discrepant at 1%"
    assert got["uniform"]["ci99"][0] > 0.70
