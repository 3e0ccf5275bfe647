"""`audit reproduce --until-settled`: run each cell's trials in rounds and stop a cell once its
verdict cannot change, by a confidence sequence valid however often it is looked at.

The rule (docs/reports.md, "Anytime-valid verdicts"):
- rounds end at n = 10, 20, 40, 70, 110, ... trials (batches of 10, 10, 20, 30, 40, ...),
  capped at the maximum (the protocol's trial count, or ``--trials``); every unsettled cell's
  trials of a round go to the pool together, so ``--jobs 2`` keeps both processes busy until
  the round's last trial;
- after each round, a cell with a published value is **settled** when the 99% betting CS of
  its successful AUBCs (trial seeds in order; :func:`audit.analysis.stats.betting_excludes`
  reads every n up to the round's end) excludes that value: verdict **discrepant at 1%**,
  no more trials for it;
- a cell with no published value has no verdict to settle ("no reference" at any n): it
  stops after the first round, so the report still shows its mean over those trials;
- the 95% CS excluding it does not stop a cell: more trials may still raise the grade to
  "at 1%", which the fixed-n run would then report. Such a cell and a consistent one run
  to the maximum, and a cell at the maximum has exactly the fixed run's trials and gets its
  verdict, the t-intervals of lu2023 Table 9.

So a cell's verdict differs from the fixed-n one only when the 99% CS excluded the published
value early and the 99% t-interval over all the maximum's trials would not have: when the
published value is the true mean, that first event has probability at most 1% however many
looks (Ville's inequality).

Trials are stored under the keys of a fixed run, and a cell's trial seeds are the first k of
the plan's, so a later fixed-n run reuses them and a rerun resumes.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

from audit.analysis.compare import DISCREPANT_1
from audit.analysis.stats import (
    BETTING_CS,
    BETTING_CS_SOURCE,
    betting_cs,
    betting_first_exclusion,
)
from audit.engine.replay import ReplayPlan, ReproduceRequest, missing_tasks, run_and_store
from audit.engine.store import ResultStore

FIRST_ROUND = 10
STOP_ALPHA = 0.01  # the CS level that stops a cell: discrepant at 1%
ALPHAS = (0.05, 0.01)  # the CS levels reported


def schedule(maximum: int, first: int = FIRST_ROUND) -> list[int]:
    """The trial counts at which the rounds end: 10, 20, 40, 70, 110, ... capped at ``maximum``."""
    ends, n, batch = [], 0, first
    while n < maximum:
        n = min(n + batch, maximum)
        ends.append(n)
        batch = first if len(ends) == 1 else batch + first
    return ends


@dataclasses.dataclass
class Rounds:
    """What the rounds ran: per strategy the trial seeds it reached and the n it settled at."""

    fingerprint: str
    details: dict[str, Any]
    seeds: dict[str, list[int]]
    settled_at: dict[str, int]  # only the cells settled before the maximum
    ends: list[int]
    ran: int
    reused: int
    active: list[str] = dataclasses.field(default_factory=list)  # cells still running (after a round)


def _ok_values(store: ResultStore, plan: ReplayPlan, sid: str, fingerprint: str, seeds: list[int]) -> list[float]:
    return [r.aubc for r in store.trials(plan.protocol.name, plan.dataset, sid, fingerprint, seeds)
            if r.status == "ok"]


def run_rounds(plan: ReplayPlan, request: ReproduceRequest, store: ResultStore,
               published: dict[str, float | None], log=lambda line: None,
               on_round: Callable[[Rounds], None] = lambda rounds: None) -> Rounds:
    """Run the plan's trials round by round, stopping each cell when the 99% CS settles it;
    ``on_round`` gets what the rounds ran so far after each round (the partial report)."""
    maximum = len(plan.seeds)
    ends = schedule(maximum)
    reached = {sid: 0 for sid in plan.strategies}
    settled: dict[str, int] = {}
    active = list(plan.strategies)
    without = [sid for sid in active if published.get(sid) is None]
    log(f"until settled: rounds end at n = {', '.join(map(str, ends))}; a cell stops when the "
        f"{1 - STOP_ALPHA:.0%} {BETTING_CS} excludes its published value")
    if without:
        log(f"until settled: no published value for {', '.join(without)}: nothing to settle, "
            f"{'it stops' if len(without) == 1 else 'they stop'} after the first round (n={ends[0]})")
    ran, fingerprint, details = 0, "", {}

    def so_far() -> Rounds:
        return Rounds(fingerprint, details, {sid: plan.seeds[:reached[sid]] for sid in plan.strategies},
                      dict(settled), ends, ran, sum(reached.values()) - ran, list(active))

    for number, end in enumerate(ends, 1):
        if not active:
            break
        sub = dataclasses.replace(plan, strategies=active, seeds=plan.seeds[:end])
        fingerprint, details, tasks, _ = missing_tasks(sub, request, store)
        start = reached[active[0]] + 1
        log(f"round {number}: trials {start}-{end} of {', '.join(active)}, {len(tasks)} to run")
        run_and_store(tasks, request, store, {plan.protocol.name: fingerprint}, log)
        ran += len(tasks)
        for sid in list(active):
            reached[sid] = end
            if published.get(sid) is None:  # its verdict is "no reference" whatever n
                active.remove(sid)
                continue
            if end == maximum:
                continue
            values = _ok_values(store, plan, sid, fingerprint, plan.seeds[:end])
            if betting_first_exclusion(values, published[sid], STOP_ALPHA) is not None:
                settled[sid] = end
                active.remove(sid)
                log(f"settled: {sid} at n={end}, {DISCREPANT_1} by the {1 - STOP_ALPHA:.0%} {BETTING_CS}")
        if end == maximum:
            active.clear()
        on_round(so_far())
    return so_far()


def _interval(values: list[float], alpha: float) -> list[float | None]:
    if not values:
        return [None, None]
    lower, upper = betting_cs(values, alpha)
    return [None if math.isnan(lower[-1]) else round(float(lower[-1]), 4),
            None if math.isnan(upper[-1]) else round(float(upper[-1]), 4)]


def settle_cell(cell: dict[str, Any], values: list[float], rounds: Rounds, maximum: int) -> None:
    """Add the cell's ``settle`` entry and, if it settled early, its settled verdict."""
    sid = cell["strategy"]
    n_run = len(rounds.seeds[sid])
    at = rounds.settled_at.get(sid)
    entry = {"trials_run": n_run, "max_trials": maximum, "settled_at": at,
             "alpha": STOP_ALPHA if at else None, "boundary": BETTING_CS,
             "cs95": _interval(values, 0.05), "cs99": _interval(values, 0.01),
             "fixed_n_verdict_at_stop": cell["verdict"]}
    if at:
        entry["stop"] = f"settled at n={at} by {BETTING_CS} (alpha {STOP_ALPHA:g})"
    elif cell.get("published_mean") is None and n_run < maximum:
        entry["stop"] = f"no published value: stopped at n={n_run}"
    else:
        entry["stop"] = f"ran to n={n_run}"
    cell["settle"] = entry
    if at:
        cell["verdict"] = DISCREPANT_1
        cell["low_power"] = False


def report_entry(rounds: Rounds, maximum: int) -> dict[str, Any]:
    """The report's ``settled`` entry: the boundary, its source and levels, the rounds."""
    return {"boundary": BETTING_CS, "source": BETTING_CS_SOURCE, "alphas": list(ALPHAS),
            "stop_alpha": STOP_ALPHA, "rounds": rounds.ends, "max_trials": maximum}
