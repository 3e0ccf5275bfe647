"""The schedule of a replay (longest trials first) and the progressive report of `audit
reproduce` (issue 20 item 3)."""
from __future__ import annotations

import dataclasses
import json

import pytest

import audit.analysis.reproduce as reproduce_module
from audit.analysis.reproduce import PARTIAL_INTERVAL, PartialReports, reproduce
from audit.engine.destinations import MANIFEST
from audit.engine.executors import run_tasks
from audit.engine.replay import ReproduceRequest, expected_seconds, longest_first, missing_tasks, plan_replay
from audit.engine.runner import TrialTask
from audit.engine.store import ResultStore
from audit.errors import AuditError
from audit.protocols import load_protocol


@pytest.fixture(scope="module")
def small():
    return dataclasses.replace(load_protocol("zhan2021"), budget_size=10)  # cheap trials


def test_longest_first_orders_by_expected_seconds_then_strategy_then_seed():
    tasks = [TrialTask(None, "d", None, sid, seed) for seed in (2, 0, 1) for sid in ("a", "b", "c")]
    cost = {("d", "a"): 1.0, ("d", "b"): 30.0, ("d", "c"): 1.0}
    ordered = [(t.strategy, t.trial_seed) for t in longest_first(tasks, cost)]
    assert ordered == [("b", 0), ("b", 1), ("b", 2), ("a", 0), ("a", 1), ("a", 2), ("c", 0), ("c", 1), ("c", 2)]
    assert [(t.strategy, t.trial_seed) for t in longest_first(list(reversed(tasks)), cost)] == ordered


class _Store:
    def __init__(self, measured):
        self.measured = measured

    def seconds_per_trial(self, protocol, dataset, strategy):
        return self.measured.get(strategy)


def test_expected_seconds_from_the_store_else_the_prior(lu2023, sonar):
    plan = plan_replay(ReproduceRequest("lu2023", "sonar", ["uniform", "eer", "hintsvm"], trials=2))
    prior = expected_seconds(plan, _Store({}))
    assert prior["eer"] > prior["hintsvm"] > prior["uniform"] > 0
    assert expected_seconds(plan, _Store({"uniform": 99.0}))["uniform"] == 99.0


def test_a_protocol_with_its_own_figures_uses_them_in_its_replays_and_their_knob_flips(sonar):
    """zhan2021's grid-searched LR makes margin costlier than lu2023's priors say: the headline
    run from an empty store starts with the costly cells, and its diagnosis replays do too."""
    plan = plan_replay(ReproduceRequest("zhan2021", "sonar", ["uniform", "margin", "vr", "hintsvm"], trials=2))
    prior = expected_seconds(plan, _Store({}))
    assert prior["vr"] > prior["margin"] > 10 * prior["hintsvm"] > 10 * prior["uniform"] > 0
    flipped = plan_replay(ReproduceRequest(dataclasses.replace(plan.protocol, name="zhan2021~split"), "sonar", ["margin"], trials=2))
    assert expected_seconds(flipped, _Store({}))["margin"] == prior["margin"]


def test_the_order_changes_no_result(small, sonar, tmp_path):
    request = ReproduceRequest(small, "sonar", ["uniform", "hintsvm"], trials=2, store=tmp_path / "s.sqlite")
    plan = plan_replay(request)
    store = ResultStore(request.store)
    try:
        _, _, tasks, _ = missing_tasks(plan, request, store)
    finally:
        store.close()
    assert len(tasks) == 4

    def outcome(order):
        return {(r.strategy, r.trial_seed): (r.aubc, r.query_hash) for r in run_tasks(order)}

    assert outcome(tasks) == outcome(list(reversed(tasks)))


@pytest.fixture
def partial_writes(monkeypatch):
    """Every partial report written: (report.md, report.json, manifest) just after the write."""
    seen = []
    original = reproduce_module.write_partial_report

    def spy(report, per_trial, out_dir, holds, create_parents=False):
        files = original(report, per_trial, out_dir, holds, create_parents=create_parents)
        seen.append(((out_dir / "report.md").read_text(), json.loads((out_dir / "report.json").read_text()),
                     json.loads((out_dir / MANIFEST).read_text()), sorted(p.name for p in out_dir.iterdir())))
        return files

    monkeypatch.setattr(reproduce_module, "write_partial_report", spy)
    return seen


def test_partial_reports_while_the_run_goes_on_then_the_final_one(small, sonar, tmp_path, partial_writes):
    out = tmp_path / "rep"
    request = ReproduceRequest(small, "sonar", ["uniform", "hintsvm"], trials=2, store=tmp_path / "s.sqlite",
                               out=out, progress=False, no_diagnose=True)
    outcome = reproduce(request, log=lambda line: None)
    # the first strategy done, then (the interval not passed) the last one, always
    assert len(partial_writes) == 2
    md, report, manifest, names = partial_writes[0]
    assert "**partial: 1 of 2 strategies finished**" in md and report["partial"]["finished"] == 1
    assert manifest["partial"] == "partial: 1 of 2 strategies finished" and len(manifest["strategies"]) == 1
    statuses = sorted(c["status"] for c in report["strategies"])
    assert statuses[0] == "ok" and statuses[1] in ("running", "pending")
    assert names == sorted([MANIFEST, "per_trial.csv", "report.json", "report.md"])  # no figures yet
    assert "2 of 2 strategies finished; diagnosis running" in partial_writes[1][0]
    # the final report replaces it: nothing says partial any more
    final = json.loads((out / "report.json").read_text())
    assert "partial" not in final and "partial" not in json.loads((out / MANIFEST).read_text())
    assert "partial" not in (out / "report.md").read_text()
    assert {c["status"] for c in final["strategies"]} == {"ok"} and "report.html" in outcome.files


def test_until_settled_writes_a_partial_report_after_each_round(small, sonar, tmp_path, partial_writes):
    """Rounds end at n = 10 and 20: uniform (published far below, a user's table) settles at 10
    and is shown finished with its settle entry while hintsvm (published near its mean: no
    bound excludes it after 10 trials) runs on."""
    table = tmp_path / "mine.csv"
    table.write_text("paper,table,dataset,strategy,metric,mean,scale,aubc_variant\n"
                     "mine,Table 1,sonar,uniform,accuracy,0.05,fraction,zhan2021_code\n"
                     "mine,Table 1,sonar,hintsvm,accuracy,0.75,fraction,zhan2021_code\n")
    out = tmp_path / "rep"
    request = ReproduceRequest(small, "sonar", ["uniform", "hintsvm"], trials=20, store=tmp_path / "s.sqlite",
                               out=out, progress=False, no_diagnose=True, until_settled=True, references=table)
    reproduce(request, log=lambda line: None)
    assert len(partial_writes) == 2  # after each round (the last one always)
    md, report, manifest, names = partial_writes[0]
    assert report["partial"]["line"] == "partial: 1 of 2 strategies finished" and "**partial: 1 of 2" in md
    cells = {c["strategy"]: c for c in report["strategies"]}
    assert cells["uniform"]["status"] == "ok" and cells["uniform"]["n_trials"] == 10
    assert cells["uniform"]["settle"]["settled_at"] == 10 and cells["uniform"]["verdict"] == "discrepant at 1%"
    assert cells["hintsvm"]["status"] == "running" and cells["hintsvm"]["reason"] == "10 of 20 trials stored"
    assert "2 of 2 strategies finished; diagnosis running" in partial_writes[1][0]
    final = json.loads((out / "report.json").read_text())
    assert "partial" not in final and {c["strategy"]: c["n_trials"] for c in final["strategies"]} == {
        "uniform": 10, "hintsvm": 20}


def test_no_partial_report_over_a_finished_one(small, sonar, tmp_path, partial_writes):
    out = tmp_path / "rep"
    args = dict(store=tmp_path / "s.sqlite", out=out, progress=False, no_diagnose=True)
    reproduce(ReproduceRequest(small, "sonar", ["uniform"], trials=1, **args), log=lambda line: None)
    partial_writes.clear()
    reproduce(ReproduceRequest(small, "sonar", ["uniform"], trials=2, **args), log=lambda line: None)
    assert partial_writes == []  # the finished report stays whole until the final one replaces it
    assert json.loads((out / "report.json").read_text())["strategies"][0]["n_trials"] == 2


def test_a_users_directory_is_refused_before_any_trial(small, sonar, tmp_path, partial_writes):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    store = tmp_path / "s.sqlite"
    with pytest.raises(AuditError, match="did not write"):
        reproduce(ReproduceRequest(small, "sonar", ["uniform"], trials=1, store=store, out=out, progress=False),
                  log=lambda line: None)
    assert partial_writes == [] and (out / "notes.txt").read_text() == "mine" and sorted(out.iterdir()) == [
        out / "notes.txt"]
    assert not store.exists() or ResultStore(store).finished_seeds("zhan2021", "sonar", "uniform", "x") == set()


def test_partial_reports_are_throttled(small, sonar, tmp_path, monkeypatch):
    request = ReproduceRequest(small, "sonar", ["uniform", "hintsvm", "quire"], trials=1, out=tmp_path / "rep")
    plan = plan_replay(request)
    now = [0.0]
    partial = PartialReports(plan, request, None, tmp_path / "rep", {}, None, lambda line: None, clock=lambda: now[0])
    written = []
    monkeypatch.setattr(partial, "write", lambda rounds=None: written.append(list(partial.finished))
                        or partial.__setattr__("last", now[0]))
    partial.done("uniform")
    now[0] = PARTIAL_INTERVAL / 2
    partial.done("hintsvm")  # too soon after the first
    now[0] = PARTIAL_INTERVAL / 2 + 1
    partial.done("quire")  # the last: always
    assert written == [["uniform"], ["uniform", "hintsvm", "quire"]]
