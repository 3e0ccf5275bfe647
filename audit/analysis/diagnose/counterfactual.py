"""Counterfactual replays: for a discrepant cell, flip one knob at a time from the audited
protocol toward its released-code protocol and see which flip brings the published value
inside the reproduced 95% interval. When no single flip does, every pair of the relevant
flips is replayed too (knobs of the released code act together: a file-order pool makes
the mean depend on which rows the split draws put in the pool). A flip of the AUBC variant
alone changes no query: it re-summarises the learning curves already stored instead.

A cell with fewer than MIN_DIAGNOSIS_TRIALS successful trials is not replayed: with so few,
the replays' intervals are wide enough to cover almost any value (at 2 trials, wider than
[0, 1]), and "explained by" would claim what the data cannot show."""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace
from typing import Any, Callable

import numpy as np

import adapters
from audit.analysis.compare import summarise
from audit.analysis.settled import schedule
from audit.analysis.stats import t_excludes
from audit.engine.datasets import Dataset, load_dataset
from audit.engine.metrics import get_variant
from audit.engine.replay import ReproduceRequest, execute_replay, plan_replay
from audit.engine.runner import (
    bound_strategy,
    conflicting_duplicates,
    file_label_values,
)
from audit.engine.splits import plan_seeds, seed_split
from audit.engine.store import ResultStore
from audit.protocols import Protocol, load_protocol

MIN_DIAGNOSIS_TRIALS = 10  # successful trials a discrepant cell needs before a replay may explain it
INTERIM_LEVEL = 0.9995
"""A replay stops at a look short of its full count when its t-interval at this level excludes
the published value: a group-sequential t-test over the schedule's planned looks (10, 20, 40,
70 of 100), Bonferroni-bounded at 4 x 0.05% = 0.2% for normal AUBCs, and set this far out so
that skewed and two-mode AUBC distributions stay under 1% too (docs/diagnosis.md, "Cheaper
replays"; tests/test_diagnose.py simulates it)."""


@dataclass(frozen=True)
class Hypothesis:
    key: str
    label: str  # what the flip means, e.g. "unshuffled pool"
    replay: str  # how its replay is named in a finding, e.g. "file-order replay"
    flip: Callable[[Protocol, Protocol, str], Protocol]


def _pool_order(audited: Protocol, released: Protocol, sid: str) -> Protocol:
    """The released pool order; a uniform sampler also takes the released order parameter."""
    derived = replace(audited, split=replace(audited.split, pool_order=released.split.pool_order))
    spec = audited.strategy(sid)
    if spec.implementation == "native.uniform" and sid in released.strategies:
        strategies = {**audited.strategies, sid: replace(spec, params=released.strategies[sid].params)}
        derived = replace(derived, strategies=strategies)
    return derived


def _query_model(audited: Protocol, released: Protocol, sid: str) -> Protocol:
    """The released query model only (the parameters belong to other knobs, e.g. uniform's order)."""
    if sid not in released.strategies:
        return audited
    spec = replace(audited.strategy(sid), query_model=released.strategies[sid].query_model)
    return replace(audited, strategies={**audited.strategies, sid: spec})


HYPOTHESES = (
    Hypothesis("pool-order", "unshuffled pool", "file-order replay", _pool_order),
    Hypothesis("split", "released split draws", "released-split replay",
               lambda a, r, sid: replace(a, split=replace(a.split, method=r.split.method))),
    Hypothesis("query-model", "released query model", "released-binding replay", _query_model),
    Hypothesis("scaling", "released scaling scope", "released-scaling replay",
               lambda a, r, sid: replace(a, scaling=dict(r.scaling))),
    Hypothesis("aubc-variant", "released AUBC variant", "released-AUBC replay",
               lambda a, r, sid: replace(a, aubc_variant=r.aubc_variant)),
    Hypothesis("initial-rule", "initial-set redraw", "redraw replay",
               lambda a, r, sid: replace(a, split=replace(a.split, initial_rule=r.split.initial_rule,
                                                          min_per_class=r.split.min_per_class))),
    Hypothesis("library-defaults", "released library defaults", "released-defaults replay",
               lambda a, r, sid: replace(a, query_model_defaults=r.query_model_defaults)),
    Hypothesis("label-lookup", "released label lookup", "label-lookup replay",
               lambda a, r, sid: replace(a, label_reveal=r.label_reveal,
                                         label_reveal_applies_to=r.label_reveal_applies_to)),
    Hypothesis("libact-labels", "released libact label values", "file-labels replay",
               lambda a, r, sid: replace(a, libact_binary=r.libact_binary)),
)

RELEASED_ALL = Hypothesis("released-all", "the released code (every knob)", "released replay",
                          lambda a, r, sid: r)
"""The last step of the search: the cell replayed under the released protocol itself (its own
name, so the trials of `audit reproduce <released>` are read, not rerun)."""


def _lookup_matters(data: Dataset | None) -> bool:
    """A first-equal-row label lookup gives other labels only where equal rows disagree
    (unknown data: it may)."""
    return data is None or conflicting_duplicates(data.X, data.y) > 0


def _libact_labels_matter(library: str, data: Dataset | None) -> bool:
    """libact sees the file's own label values only for its strategies, and they differ
    from -1/+1 only on a binary file spelled otherwise (unknown data: they may)."""
    return library == "libact" and (
        data is None or (data.info.n_classes == 2 and file_label_values(data.info.name) != {0: -1, 1: 1}))


def _same_trials(first: Protocol, second: Protocol, data: Dataset, n_trials: int | None) -> bool:
    """Do both protocols plan the same trial seeds on ``data`` and draw every one of them the
    same split (test rows, initial labels, pool in its order, validation rows)?"""
    seeds = plan_seeds(first, data.y, n_trials, data)[0]
    if seeds != plan_seeds(second, data.y, n_trials, data)[0]:
        return False
    for seed in seeds:
        one, other = seed_split(first, data, seed)[2], seed_split(second, data, seed)[2]
        if not all(np.array_equal(getattr(one, part), getattr(other, part))
                   for part in ("test", "labeled", "pool", "validation")):
            return False
    return True


def without_inert_initial_rule(audited: Protocol, protocol: Protocol, data: Dataset | None,
                               n_trials: int | None = None) -> Protocol:
    """``protocol`` with the audited initial-set rule put back where its own rule changes no
    trial on ``data``: the rules differ only when a first draw lacks a class (a skipped seed
    against a redraw), and on most data sets no planned trial's first draw does (sonar's 20
    initial labels of 124 rows always hold both classes twice), so the redraw replay would be
    the audited cell again. Unknown data, or a rule that does change a trial: unchanged."""
    reset = replace(protocol, split=replace(protocol.split, initial_rule=audited.split.initial_rule,
                                            min_per_class=audited.split.min_per_class))
    if data is None or reset.split == protocol.split or not _same_trials(protocol, reset, data, n_trials):
        return protocol
    return reset


def _changes(audited: Protocol, derived: Protocol, sid: str, data: Dataset | None = None,
             n_trials: int | None = None) -> bool:
    """Does the flip change anything this strategy's replay depends on (on this data set and
    its ``n_trials`` planned trials, when ``data`` is given)? The label knobs matter only where
    their lookup or encoding gives other labels: equal rows with different labels, a binary
    file not labelled -1/+1; the initial-set rule only where a planned trial's first draw
    lacks a class (:func:`without_inert_initial_rule`)."""
    derived = without_inert_initial_rule(audited, derived, data, n_trials)
    if any(getattr(audited, k) != getattr(derived, k) for k in ("split", "scaling", "aubc_variant")) \
            or audited.strategy(sid) != derived.strategy(sid):
        return True
    if bound_strategy(audited, audited.strategy(sid)) != bound_strategy(derived, derived.strategy(sid)):
        return True  # the query-model era changes a model the strategy builds
    library = adapters.strategy_class(audited.strategy(sid).implementation).library
    if audited.reveals_equal_row(library) != derived.reveals_equal_row(library) and _lookup_matters(data):
        return True
    return audited.libact_binary != derived.libact_binary and _libact_labels_matter(library, data)


def combine(first: Hypothesis, second: Hypothesis) -> Hypothesis:
    """Both flips at once (each flip changes only its own knob, so the order does not matter)."""
    return Hypothesis(f"{first.key}+{second.key}", f"{first.label} + {second.label}",
                      f"{first.replay.removesuffix(' replay')} + {second.replay}",
                      lambda a, r, sid: second.flip(first.flip(a, r, sid), r, sid))


def derived_protocols(audited: Protocol, released: Protocol, sid: str,
                      hypotheses: tuple[Hypothesis, ...] = HYPOTHESES,
                      data: Dataset | None = None, n_trials: int | None = None) -> list[tuple[Hypothesis, Protocol]]:
    """The relevant hypotheses for one strategy, each a protocol with its own name (store key)."""
    out = []
    for h in hypotheses:
        derived = h.flip(audited, released, sid)
        if _changes(audited, derived, sid, data, n_trials):
            out.append((h, replace(derived, name=f"{audited.name}~{h.key}")))
    return out


def pairs(relevant: list[Hypothesis]) -> tuple[Hypothesis, ...]:
    """Every pair of the relevant single flips, in HYPOTHESES order."""
    return tuple(combine(a, b) for a, b in itertools.combinations(relevant, 2))


def _distance(value: float, interval: list[float]) -> float:
    lo, hi = interval
    if math.isnan(lo):
        return math.inf
    return 0.0 if lo <= value <= hi else min(abs(value - lo), abs(value - hi))


def curve_source(audited: Protocol, derived: Protocol, hypothesis: Hypothesis) -> Protocol | None:
    """The protocol whose trials hold this replay's learning curves, when only the AUBC
    variant tells them apart: the variant re-summarises each trial's curve and changes no
    query, so those trials (the audited cell's, or another flip's replay) are re-summarised
    instead of replayed. None when the AUBC variant is not flipped."""
    if derived.aubc_variant == audited.aubc_variant:
        return None
    keys = [k for k in hypothesis.key.split("+") if k != "aubc-variant"]
    return replace(derived, aubc_variant=audited.aubc_variant,
                   name=f"{audited.name}~{'+'.join(keys)}" if keys else audited.name)


def effective_key(audited: Protocol, protocol: Protocol, sid: str, data: Dataset | None = None,
                  n_trials: int | None = None) -> str:
    """The spec hash of ``protocol`` restricted to what strategy ``sid``'s trials read on
    ``data`` (``n_trials`` of them): its name, the other strategies and the AUBC variant (a
    trial's curve is the same under any variant) left out, and every knob that
    :func:`_changes` finds inert for this strategy reset to the audited value. Two replays
    with one key run the same trials."""
    protocol = without_inert_initial_rule(audited, protocol, data, n_trials)
    spec = protocol.strategy(sid)
    library = adapters.strategy_class(spec.implementation).library
    p = replace(protocol, name=audited.name, title=audited.title, released=audited.released,
                strategies={sid: spec}, aubc_variant=audited.aubc_variant, aubc_metric=audited.aubc_metric)
    if bound_strategy(p, spec) == bound_strategy(replace(p, query_model_defaults=audited.query_model_defaults), spec):
        p = replace(p, query_model_defaults=audited.query_model_defaults)
    if p.reveals_equal_row(library) == audited.reveals_equal_row(library) or not _lookup_matters(data):
        p = replace(p, label_reveal=audited.label_reveal, label_reveal_applies_to=audited.label_reveal_applies_to)
    if not _libact_labels_matter(library, data):
        p = replace(p, libact_binary=audited.libact_binary)
    return p.spec_hash


def stopping_rule(n_trials: int) -> str:
    """How :func:`_replay` stops a replay of ``n_trials``, said before the diagnosis starts."""
    looks = schedule(n_trials)[:-1]
    if not looks:
        return f"A replay runs up to {n_trials} trials"
    return (f"A replay runs up to {n_trials} trials and stops at a look (n = {', '.join(map(str, looks))}) once its "
            f"{INTERIM_LEVEL:.2%} t-interval excludes the published value")


def _replay(audited: Protocol, derived: Protocol, hypothesis: Hypothesis, dataset: str, sid: str, published: float,
            request: ReproduceRequest, store: ResultStore, shared: dict[str, Protocol] | None = None,
            data: Dataset | None = None) -> dict[str, Any]:
    """Run (or read from the store) the cell under one derived protocol; its 95% interval.

    In rounds (audit/analysis/settled.py's schedule: n = 10, 20, 40, ...): once the
    :data:`INTERIM_LEVEL` t-interval of the replay's AUBCs excludes the published value at a
    look short of the cell's count, the replay stops there, its row ``inside`` false
    (``stopped_at``: that n); else it runs to the cell's count and the 95% t-interval
    decides, as a full replay would. ``shared`` ({effective key: the
    protocol whose trials hold it}): a replay whose trials another replay of this cell
    already ran (:func:`effective_key`) reads those instead of running its own."""
    source = None if hypothesis is RELEASED_ALL else curve_source(audited, derived, hypothesis)
    runs = source or derived
    if shared is not None:
        runs = shared.setdefault(effective_key(audited, runs, sid, data, request.trials), runs)
    sub = ReproduceRequest(protocol=runs, dataset=dataset, strategies=[sid], trials=request.trials,
                           jobs=request.jobs, data_dir=request.data_dir, store=request.store,
                           progress=False, trial_timeout=request.trial_timeout, batch_size=request.batch_size)
    plan = plan_replay(sub)
    resummarise = (runs.aubc_variant, runs.aubc_metric) != (derived.aubc_variant, derived.aubc_metric)
    variant = get_variant(derived.aubc_variant)
    stopped_at = None
    for end in schedule(len(plan.seeds)):
        part = replace(plan, seeds=plan.seeds[:end])
        fingerprint, _, _, _ = execute_replay(part, sub, store)
        trials = [r for r in store.trials(plan.protocol.name, dataset, sid, fingerprint, part.seeds) if r.status == "ok"]
        ok = [variant([getattr(x, derived.aubc_metric) for x in r.rounds], [x.n_labeled for x in r.rounds])
              if resummarise else r.aubc for r in trials]
        if end < len(plan.seeds) and t_excludes(ok, published, INTERIM_LEVEL):
            stopped_at = end
            break
    summary = summarise(ok, derived.sd_ddof)
    ci95 = [float(v) for v in summary.ci95]
    distance = _distance(published, ci95)
    return {"hypothesis": hypothesis.key, "label": hypothesis.label, "replay": hypothesis.replay,
            "protocol": derived.name, "curves_from": plan.protocol.name, "n": summary.n, "mean": summary.mean,
            "ci95": ci95, "inside": stopped_at is None and distance == 0.0, "distance": distance,
            "stopped_at": stopped_at,
            # per trial seed, for the cross-cell test (audit/analysis/diagnose/shared.py); dropped from the report
            "per_seed": {r.trial_seed: float(a) for r, a in zip(trials, ok)}}


def most_replays(audited: Protocol, dataset: str, sid: str, request: Any) -> int:
    """The most replays :func:`diagnose_cell` can run trials for on this cell: the distinct
    trial sets (:func:`effective_key`) of its single flips, their pairs and the released
    protocol, less the audited cell's own. Said before the diagnosis starts, so a user can
    weigh its cost (a bound: the pairs run only when no single flip explains the cell)."""
    released = load_protocol(audited.released)
    data = load_dataset(dataset, request.data_dir)
    singles = derived_protocols(audited, released, sid, data=data, n_trials=request.trials)
    doubles = derived_protocols(audited, released, sid, pairs([h for h, _ in singles]), data, request.trials)
    candidates = [derived for _, derived in singles + doubles]
    candidates += [released] if sid in released.strategies else []
    keys = {effective_key(audited, derived, sid, data, request.trials) for derived in candidates}
    return len(keys - {effective_key(audited, audited, sid, data, request.trials)})


def diagnose_cell(audited: Protocol, dataset: str, cell: dict[str, Any], request: Any, store: ResultStore,
                  log=lambda line: None) -> dict[str, Any]:
    """Replay the cell under every relevant single flip, then (if none explains it) every
    pair of them; say which bring the published value inside the 95% interval. An
    underpowered cell (fewer than MIN_DIAGNOSIS_TRIALS successful trials) is not replayed."""
    published, sid = cell["published_mean"], cell["strategy"]
    if cell["n_trials"] < MIN_DIAGNOSIS_TRIALS:
        summary_line = (f"underpowered: {cell['n_trials']} successful trials, and a diagnosis needs at least "
                        f"{MIN_DIAGNOSIS_TRIALS} (--trials {MIN_DIAGNOSIS_TRIALS} or more); no replay run, "
                        "no explanation claimed")
        log(f"diagnosis {sid} on {dataset}: {summary_line}")
        return not_diagnosed(audited, summary_line, "underpowered")
    released = load_protocol(audited.released)
    data = load_dataset(dataset, request.data_dir)
    singles = derived_protocols(audited, released, sid, data=data, n_trials=request.trials)
    shared = {effective_key(audited, audited, sid, data, request.trials): audited}  # the audited cell's trials

    def replay(h: Hypothesis, derived: Protocol) -> dict[str, Any]:
        return _replay(audited, derived, h, dataset, sid, published, request, store, shared, data)

    rows = [replay(h, derived) for h, derived in singles]
    if not any(r["inside"] for r in rows):
        rows += [replay(h, derived) for h, derived in
                 derived_protocols(audited, released, sid, pairs([h for h, _ in singles]), data, request.trials)]
    whole = None
    if not any(r["inside"] for r in rows) and sid in released.strategies:
        whole = replay(RELEASED_ALL, released)
        rows.append(whole)
    explained = [r for r in rows if r["inside"]]
    if explained:
        summary_line = "explained by: " + "; ".join(f"{r['label']} ({_describe(r, published)} inside)" for r in explained)
    elif whole is not None:
        summary_line = f"not explained by the released code ({_describe(whole, published)} outside)"
    elif rows:
        closest = min(rows, key=lambda r: closeness(r, published))
        summary_line = f"unexplained; closest: {closest['label']} ({_describe(closest, published)} outside)"
    else:
        summary_line = "unexplained; no knob of the released protocol changes this cell"
    log(f"diagnosis {sid} on {dataset}: {summary_line}")
    return {"released": audited.released, "status": "explained" if explained else "unexplained",
            "explained_by": [r["hypothesis"] for r in explained], "summary": summary_line, "hypotheses": rows}


def not_diagnosed(audited: Protocol, summary_line: str, status: str) -> dict[str, Any]:
    """The diagnosis of a discrepant cell that was not replayed, saying why (``status``:
    "underpowered", "not run")."""
    return {"released": audited.released, "status": status, "explained_by": [], "summary": summary_line,
            "hypotheses": []}


def closeness(row: dict[str, Any], published: float) -> tuple[float, float]:
    """How near a replay that leaves the published value outside came to it: the gap from
    its mean, then from its 95% interval. Not the interval alone: a replay stopped at n = 10
    has an interval about three times as wide as one run to 100, and would look closer for
    that reason only."""
    gap = abs(row["mean"] - published) if math.isfinite(row["mean"]) else math.inf
    return gap, row["distance"]


def _describe(row: dict[str, Any], published: float) -> str:
    lo, hi = row["ci95"]
    stopped = f", stopped at n={row['stopped_at']}" if row["stopped_at"] else ""
    return f"{row['replay']} {row['mean']:.3f} [{lo:.3f}, {hi:.3f}]{stopped}, published {published:.3f}"


def is_discrepant(cell: dict[str, Any]) -> bool:
    return cell.get("status") == "ok" and str(cell.get("verdict", "")).startswith("discrepant")
