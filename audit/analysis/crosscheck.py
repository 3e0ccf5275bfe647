"""`audit crosscheck`: the same strategy through every library that offers it.

Each group (crosscheck.toml) lists implementations of one strategy. All members are
replayed on identical splits under a base protocol; the report says, against the
group's first available member, how many trials queried the identical sequence, the
first round where the sequences diverge, and a paired t-test of the AUBCs.
"""
from __future__ import annotations

import dataclasses
import json
import math
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from audit.analysis.stats import paired_difference_test
from audit.engine.destinations import check_report_dir, write_directory
from audit.engine.models import ModelSpec
from audit.engine.replay import ReproduceRequest, execute_replay, plan_replay
from audit.engine.runner import TrialResult
from audit.engine.store import ResultStore
from audit.protocols import StrategySpec, load_protocol

GROUPS_FILE = Path(__file__).resolve().parent / "crosscheck.toml"


@dataclass(frozen=True)
class Member:
    group: str
    spec: StrategySpec

    @property
    def library(self) -> str:
        return self.spec.implementation.split(".")[0]


def load_groups(path: Path = GROUPS_FILE) -> tuple[str, dict[str, list[Member]], dict[str, str]]:
    """(base protocol, {group: members}, {group: note}) from the groups file."""
    data = tomllib.loads(path.read_text())
    groups, notes = {}, {}
    for group in data["group"]:
        members = []
        for m in group["member"]:
            query_model = m.get("query_model")
            if query_model not in (None, "task"):
                query_model = ModelSpec.from_data(query_model)
            sid = f"{group['name']}@{m['implementation']}"
            if any(x.spec.id == sid for x in members):  # one implementation twice, with other settings
                sid += f"#{len(members) + 1}"
            members.append(Member(group["name"], StrategySpec(sid, m["implementation"], dict(m.get("params", {})),
                                                              query_model)))
        groups[group["name"]] = members
        notes[group["name"]] = group.get("note", "")
    return data["base_protocol"], groups, notes


def first_divergence(a: TrialResult, b: TrialResult) -> int | None:
    """First round whose queried rows differ (None when the sequences are identical)."""
    for ra, rb in zip(a.rounds, b.rounds):
        if ra.queried != rb.queried:
            return ra.round
    return None if len(a.rounds) == len(b.rounds) else min(len(a.rounds), len(b.rounds))


def compare_members(reference: list[TrialResult], other: list[TrialResult]) -> dict[str, Any]:
    """Identity, divergence and a paired t-test of `other` against `reference`, on shared ok seeds."""
    ref = {r.trial_seed: r for r in reference if r.status == "ok"}
    pairs = [(ref[o.trial_seed], o) for o in other if o.status == "ok" and o.trial_seed in ref]
    if not pairs:
        return {"paired_trials": 0}
    divergence = [first_divergence(a, b) for a, b in pairs]
    diverged = [d for d in divergence if d is not None]
    diffs = np.array([b.aubc - a.aubc for a, b in pairs])
    t, p = paired_difference_test([b.aubc for _, b in pairs], [a.aubc for a, _ in pairs])
    return {
        "paired_trials": len(pairs),
        "identical": len(pairs) - len(diverged),
        "identical_fraction": (len(pairs) - len(diverged)) / len(pairs),
        "first_divergence_min": min(diverged) if diverged else None,
        "first_divergence_median": float(np.median(diverged)) if diverged else None,
        "mean_difference": float(diffs.mean()),
        "t": t,
        "p": p,
    }


def crosscheck(dataset: str, trials: int = 5, jobs: int = 1, data_dir: str | None = None,
               store_path: str | Path = ".audit-store.sqlite", out: str | Path | None = None,
               groups_file: Path = GROUPS_FILE, progress: bool = True,
               log=lambda line: print(line, file=sys.stderr)) -> dict[str, Any]:
    base_name, groups, notes = load_groups(groups_file)
    base = load_protocol(base_name)
    members = [m for ms in groups.values() for m in ms]
    protocol = dataclasses.replace(base, name=f"{base.name}-crosscheck",
                                   strategies={m.spec.id: m.spec for m in members})
    request = ReproduceRequest(protocol, dataset, None, trials=trials, jobs=jobs, data_dir=data_dir,
                               store=store_path, progress=progress)
    plan = plan_replay(request, log)
    out_dir = Path(out) if out else Path("reports") / f"crosscheck-{plan.dataset}"
    check_report_dir(out_dir, create_parents=out is None)  # before any trial: al-audit replaces only its own
    store = ResultStore(store_path)
    try:
        fingerprint, details, _, _ = execute_replay(plan, request, store, log)
        results = {sid: store.trials(protocol.name, plan.dataset, sid, fingerprint, plan.seeds)
                   for sid in plan.strategies}
    finally:
        store.close()
    report_groups = []
    for name, group_members in groups.items():
        available = [m for m in group_members if m.spec.id in results]
        rows = []
        for m in group_members:
            if m.spec.id not in results:
                rows.append({"implementation": m.spec.implementation, "status": "unavailable",
                             "reason": plan.unavailable.get(m.spec.id, "")})
                continue
            ok = [r.aubc for r in results[m.spec.id] if r.status == "ok"]
            row = {"implementation": m.spec.implementation, "status": "ok", "n": len(ok),
                   "errors": len(results[m.spec.id]) - len(ok),
                   "mean": float(np.mean(ok)) if ok else None}
            if available and m is not available[0]:
                row["vs_reference"] = compare_members(results[available[0].spec.id], results[m.spec.id])
            rows.append(row)
        report_groups.append({"group": name, "note": notes[name],
                              "reference": available[0].spec.implementation if available else None,
                              "members": rows})
    report = {"dataset": plan.dataset, "base_protocol": base.name, "aubc_variant": base.aubc_variant,
              "trial_seeds": plan.seeds, "environment": details["versions"], "fingerprint": fingerprint,
              "groups": report_groups}
    write_directory(out_dir, {"crosscheck.json": json.dumps(report, indent=2) + "\n",
                              "crosscheck.md": f"# Cross-implementation check on {plan.dataset}\n\n```\n"
                                               f"{format_crosscheck(report)}\n```\n"},
                    {"command": "crosscheck", "protocol": base.name, "dataset": plan.dataset,
                     "strategies": plan.strategies, "trials": len(plan.seeds)}, create_parents=out is None)
    report["out_dir"] = str(out_dir)
    return report


def format_crosscheck(report: dict[str, Any]) -> str:
    lines = [f"crosscheck on {report['dataset']}: base protocol {report['base_protocol']}, "
             f"AUBC {report['aubc_variant']}, trial seeds {report['trial_seeds'][0]}-{report['trial_seeds'][-1]}, "
             f"fingerprint {report['fingerprint']}",
             "versions: " + ", ".join(f"{k} {v}" for k, v in report["environment"].items() if v != "absent"), ""]
    header = ("group", "implementation", "n", "mean AUBC", "identical", "first diverging round", "mean diff", "paired p")
    table = [header]
    for g in report["groups"]:
        for row in g["members"]:
            if row["status"] != "ok":
                table.append((g["group"], row["implementation"], "-", "-", "-", "-", "-",
                              f"unavailable: {row['reason'][:60]}"))
                continue
            vs = row.get("vs_reference")
            mean = "-" if row["mean"] is None else f"{row['mean']:.4f}"
            if vs is None:
                table.append((g["group"], row["implementation"], str(row["n"]), mean, "reference", "-", "-", "-"))
            elif not vs["paired_trials"]:
                table.append((g["group"], row["implementation"], str(row["n"]), mean, "no paired trials", "-", "-", "-"))
            else:
                div = "never" if vs["first_divergence_min"] is None else \
                    f"min {vs['first_divergence_min']}, median {vs['first_divergence_median']:g}"
                p = "-" if math.isnan(vs["p"]) else f"{vs['p']:.3g}"
                table.append((g["group"], row["implementation"], str(row["n"]), mean,
                              f"{vs['identical']}/{vs['paired_trials']}", div, f"{vs['mean_difference']:+.4f}", p))
    widths = [max(len(str(r[i])) for r in table) for i in range(len(header))]
    lines += ["  ".join(str(v).ljust(w) for v, w in zip(r, widths)).rstrip() for r in table]
    lines.insert(4, "-" * len(lines[3]))
    notes = [f"{g['group']}: {g['note']}" for g in report["groups"] if g["note"]]
    return "\n".join(lines + ([""] + notes if notes else []))
