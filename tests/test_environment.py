"""One environment fingerprint: the store keys trials by it and the gate records it.

A solver upgrade (cvxpy, OSQP) changes what BMDR and SPAL answer, so it must make the store
recompute their trials, and a baseline must show it.
"""
from __future__ import annotations

from importlib import metadata

import pytest

import adapters
from audit.engine.replay import (
    ReproduceRequest,
    execute_replay,
    missing_tasks,
    plan_replay,
)
from audit.engine.store import ResultStore, fingerprint_details
from audit.gate import baseline as gate


def test_the_fingerprint_covers_the_numeric_stack_and_what_each_adapter_declares():
    from audit.engine.environment import NUMERIC_STACK, environment_versions

    versions = environment_versions()
    assert versions["python"] and versions["platform"]
    for name in (*NUMERIC_STACK, "alipy", "libact", "scikit-activeml", "cvxpy", "osqp"):
        assert versions[name] == metadata.version(name)
    bmdr = adapters.strategy_class("alipy.bmdr")
    assert {"cvxpy", "osqp"} <= set(bmdr.distributions)  # declared by the adapter, not listed by hand


def test_the_store_and_the_gate_record_the_same_environment(lu2023):
    stored = fingerprint_details(lu2023)["versions"]
    recorded = gate.environment()
    assert recorded.pop("al-audit")  # the gate adds this tool's version; the store keys its code separately
    assert recorded == stored


@pytest.fixture
def one_stored_trial(tmp_path):
    request = ReproduceRequest("lu2023", "heart", strategies=["uniform"], trials=1, store=tmp_path / "store.sqlite",
                               progress=False)
    plan = plan_replay(request)
    store = ResultStore(request.store)
    _, _, ran, _ = execute_replay(plan, request, store)
    assert ran == 1
    return plan, request, store


def test_a_stored_trial_is_reused_in_the_same_environment(one_stored_trial):
    plan, request, store = one_stored_trial
    _, _, tasks, reused = missing_tasks(plan, request, store)
    assert tasks == [] and reused == 1


@pytest.mark.parametrize("upgraded", ["cvxpy", "osqp", "threadpoolctl"])
def test_another_solver_version_makes_the_store_recompute(upgraded, one_stored_trial, monkeypatch):
    plan, request, store = one_stored_trial
    installed = metadata.version
    monkeypatch.setattr(metadata, "version", lambda name: "99.0" if name == upgraded else installed(name))
    _, details, tasks, reused = missing_tasks(plan, request, store)
    assert details["versions"][upgraded] == "99.0"
    assert reused == 0 and [(t.strategy, t.trial_seed) for t in tasks] == [("uniform", plan.seeds[0])]
