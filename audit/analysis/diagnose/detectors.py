"""Static detectors: named checks of a protocol (and, optionally, a data set) that flag
the settings known to move published AUBCs (PROTOCOL-NOTES, lu2023 Appendix A.3)."""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np

from audit.analysis.references import load_references, paper_sd_ddof
from audit.engine.datasets import Dataset
from audit.engine.runner import budget_for
from audit.engine.splits import TrialSplit, plan_seeds, released_redraws, seed_split
from audit.protocols import Protocol

# Observed label runs below this fraction of the shuffled expectation: the pool is ordered.
RUNS_RATIO = 0.5
LINT_TRIALS = 20


@dataclass(frozen=True)
class Finding:
    name: str
    triggered: bool
    finding: str
    evidence: dict[str, Any] = field(default_factory=dict)

    def line(self) -> str:
        return f"{'!!' if self.triggered else 'ok'} {self.name}: {self.finding}"


def expected_runs(labels: np.ndarray) -> float:
    """Expected label runs of a uniformly random permutation: 1 + (n-1) P(neighbours differ)
    (for two classes 1 + 2 n1 n0 / n)."""
    n = labels.size
    if n < 2:
        return float(n)
    counts = np.bincount(labels)
    same = float(np.sum(counts * (counts - 1))) / (n * (n - 1))
    return 1 + (n - 1) * (1 - same)


def _runs(labels: np.ndarray) -> int:
    return 0 if labels.size == 0 else 1 + int(np.count_nonzero(labels[1:] != labels[:-1]))


def trial_splits(protocol: Protocol, data: Dataset, n_trials: int = LINT_TRIALS
                 ) -> tuple[list[tuple[np.ndarray, np.ndarray, TrialSplit]], list]:
    """(X, y, split) of the first planned trials: a generated set's rows are each trial's own draw."""
    seeds, skipped = plan_seeds(protocol, data.y, n_trials, data)
    return [seed_split(protocol, data, s) for s in seeds], skipped


def pool_order(protocol: Protocol, data: Dataset | None) -> Finding:
    followers = sorted(sid for sid, s in protocol.strategies.items()
                       if s.implementation == "native.uniform" and s.params.get("order", "pool") == "pool")
    if data is None:
        return Finding("pool-order", False, "needs --dataset", {"order_followers": followers})
    splits, _ = trial_splits(protocol, data)
    observed = float(np.mean([_runs(y[s.pool]) for _, y, s in splits]))
    expected = float(np.mean([expected_runs(y[s.pool]) for _, y, s in splits]))
    ordered = observed < RUNS_RATIO * expected
    evidence = {"pool_order": protocol.split.pool_order, "mean_label_runs": round(observed, 1),
                "expected_if_shuffled": round(expected, 1), "order_followers": followers}
    if ordered and followers:
        return Finding("pool-order", True, f"pool has {observed:.1f} label runs vs {expected:.1f} if shuffled, "
                       f"and {', '.join(followers)} queries in pool order", evidence)
    why = "the pool is not label-ordered" if not ordered else "no sampler follows pool order"
    return Finding("pool-order", False, f"{why} ({observed:.1f} label runs vs {expected:.1f} if shuffled)", evidence)


def query_task_mismatch(protocol: Protocol, data: Dataset | None = None) -> Finding:
    task = protocol.task_model
    differing = {sid: str(protocol.query_model_for(s)) for sid, s in protocol.strategies.items()
                 if s.query_model not in (None, "task") and protocol.query_model_for(s).key != task.key}
    if differing:
        return Finding("query-task-model", True, f"{len(differing)} strategies query with a model other than "
                       f"the task model {task}: {', '.join(differing)}", differing)
    return Finding("query-task-model", False, "every query model is the task model (or none)", {})


def scaling_scope(protocol: Protocol, data: Dataset | None = None) -> Finding:
    task, query = protocol.scaling["task"], protocol.scaling["query"]
    evidence = {"task": task, "query": query}
    if task != query:
        return Finding("scaling-scope", True, f"task model scaled on '{task}', query models on '{query}'", evidence)
    return Finding("scaling-scope", False, f"task and query models share scaling scope '{task}'", evidence)


def aubc_variant(protocol: Protocol, data: Dataset | None = None) -> Finding:
    refs = load_references(paper=protocol.reference_paper, dataset=data.info.name if data else None)
    variants = sorted({r.aubc_variant for r in refs})
    evidence = {"protocol": protocol.aubc_variant, "reference": variants}
    if variants and protocol.aubc_variant not in variants:
        return Finding("aubc-variant", True, f"protocol computes AUBC '{protocol.aubc_variant}', "
                       f"{protocol.reference_paper} reported '{', '.join(variants)}'", evidence)
    return Finding("aubc-variant", False, f"AUBC variant '{protocol.aubc_variant}' matches the reference", evidence)


def sd_convention(protocol: Protocol, data: Dataset | None = None) -> Finding:
    ref = paper_sd_ddof(protocol.reference_paper)
    evidence = {"protocol_ddof": protocol.sd_ddof, "reference_ddof": ref}
    if ref is not None and ref != protocol.sd_ddof:
        return Finding("sd-convention", True, f"SD with ddof={protocol.sd_ddof}, "
                       f"{protocol.reference_paper} used ddof={ref}", evidence)
    return Finding("sd-convention", False, f"SD ddof={protocol.sd_ddof} as the reference", evidence)


def ignored_library_args(protocol: Protocol, data: Dataset | None = None) -> Finding:
    import adapters

    ignored = {}
    for sid, s in protocol.strategies.items():
        if s.implementation.startswith("libact."):  # read from libact's source: works without its C extensions
            extra = adapters.strategy_class(s.implementation).ignored_params(s.params)
            if extra:
                ignored[sid] = extra
    if ignored:
        listed = "; ".join(f"{sid}: {', '.join(keys)}" for sid, keys in ignored.items())
        return Finding("ignored-library-args", True, f"libact would silently ignore {listed}", ignored)
    return Finding("ignored-library-args", False, "libact reads every bound parameter", {})


def initial_missing_class(protocol: Protocol, data: Dataset | None) -> Finding:
    if data is None:
        return Finding("initial-missing-class", False, "needs --dataset", {})
    seeds, skipped = plan_seeds(protocol, data.y, LINT_TRIALS, data)
    redraws = protocol.split.initial_rule == "redraw"
    evidence = {"trials": len(seeds), "skipped": len(skipped), "rule": protocol.split.initial_rule}
    if skipped:
        return Finding("initial-missing-class", True, f"{len(skipped)} planned seeds skipped "
                       f"(first: {skipped[0][1]})", evidence)
    if redraws:
        need = sum(not _first_draw_ok(protocol, data, s) for s in seeds)
        evidence["redrawn"] = need
        if need:
            return Finding("initial-missing-class", True, f"{need}/{len(seeds)} initial sets had to be "
                           f"redrawn to get {protocol.split.min_per_class} per class", evidence)
    return Finding("initial-missing-class", False, "every initial set has every class on its first draw", evidence)


def _first_draw_ok(protocol: Protocol, data: Dataset, seed: int) -> bool:
    """Would the first initial draw already satisfy the rule? The lu2023 split is replayed
    with skip-seed (its initial generator is independent of the split's), on the trial's own
    rows (a generated set's draw, a train/test set's files); the released sequence records
    its redraws."""
    if protocol.split.method == "zhan2021-released":
        return released_redraws(protocol.split, data.y, seed) == 0
    strict = replace(protocol, split=replace(protocol.split, initial_rule="skip-seed"))
    return not isinstance(seed_split(strict, data, seed)[2], str)


def train_test_duplicates(protocol: Protocol, data: Dataset | None) -> Finding:
    if data is None:
        return Finding("train-test-duplicates", False, "needs --dataset", {})
    splits, _ = trial_splits(protocol, data)
    shared = []
    for X, _, s in splits:
        inverse = np.unique(X, axis=0, return_inverse=True)[1].ravel()
        shared.append(int(np.isin(inverse[s.test], inverse[s.train]).sum()))
    evidence = {"trials": len(splits), "mean_test_rows_duplicated_in_train": float(np.mean(shared)),
                "max": max(shared)}
    if any(shared):
        return Finding("train-test-duplicates", True, f"on average {np.mean(shared):.1f} test rows "
                       f"have an exact duplicate in train", evidence)
    return Finding("train-test-duplicates", False, "no test row duplicates a train row", evidence)


def paper_vs_code(protocol: Protocol, data: Dataset | None = None) -> Finding:
    """Where the paper and its released code disagree (the protocol's [paper_vs_code]): which
    one the protocol follows, and what the other says. With a data set, only the entries that
    concern it (keys naming another data set are left out)."""
    from audit.engine.datasets import REGISTRY

    others = set(REGISTRY) - ({data.info.name} if data is not None else set())
    entries = {knob: stated for knob, stated in protocol.paper_vs_code.items()
               if data is None or not others & set(knob.split("."))}
    if not entries:
        return Finding("paper-vs-code", False, "the protocol records no disagreement between paper and code", {})
    said = "; ".join(f"{knob}: paper {v['paper']}, code {v['code']} (follows the {v.get('followed', 'paper')})"
                     for knob, v in entries.items())
    return Finding("paper-vs-code", True, f"{len(entries)} setting(s) differ between the paper and its released "
                   f"code: {said}", entries)


def test_scaler(protocol: Protocol, data: Dataset | None = None) -> Finding:
    """The test rows scaled by a scaler fitted on themselves (CDALBench's released min-max
    scaling): leakage-like, since the test set's own range shapes every test feature."""
    evidence = {"scaler": protocol.scaler, "test_fit": protocol.scaler_test_fit, "scope": protocol.scaling["task"]}
    if protocol.scaler_test_fit == "test" and protocol.scaling["task"] != "none":
        return Finding("test-scaler", True, f"the test rows get a {protocol.scaler} scaler fitted on the test rows "
                       "themselves (the released code's quirk; [scaling] test_fit = \"train\" is the fixed "
                       "behaviour)", evidence)
    return Finding("test-scaler", False, "the test rows are scaled with the train rows' scaler", evidence)


ALPBENCH_PAPER = Path(__file__).resolve().parents[1] / "alpbench_paper.toml"


def _paper_size(setting: dict[str, Any], key: str, n_classes: int) -> int | None:
    if key in setting:
        return int(setting[key])
    if f"{key}_per_class" in setting:
        return int(setting[f"{key}_per_class"]) * n_classes
    return None


def alpbench_paper_vs_code(protocol: Protocol, data: Dataset | None = None) -> Finding:
    """Where an alpbench-* protocol (the released package's settings) differs from what the paper
    says the setting is (alpbench_paper.toml): sizes, test share, preprocessing and, with a data set,
    what the code's preprocessing does to it."""
    paper = tomllib.loads(ALPBENCH_PAPER.read_text())
    setting = paper["settings"].get(protocol.name)
    if setting is None:
        return Finding("alpbench-paper-vs-code", False, "not an ALPBench setting", {})
    y = data.y if data is not None else None
    n_classes = int(y.max()) + 1 if y is not None else 2
    batch = protocol.batch_for(n_classes)
    code = {"initial labels": protocol.initial_for(n_classes), "batch": batch,
            "budget": budget_for(protocol, 10**9, n_classes), "test share": round(protocol.split.test_ratio, 4),
            "preprocessing": protocol.preprocess}
    paper_batch = _paper_size(setting, "batch", n_classes)
    said = {"initial labels": _paper_size(setting, "initial", n_classes), "batch": paper_batch,
            "budget": setting["rounds"] * paper_batch if "rounds" in setting else _paper_size(setting, "budget",
                                                                                               n_classes),
            "test share": round(paper["test_ratio"], 4), "preprocessing": paper["preprocess"]}
    differences = {key: {"code": code[key], "paper": said[key]} for key in code if code[key] != said[key]}
    if data is not None and protocol.preprocess == "alpbench-code":
        from audit.engine.preprocess import prepare

        X_code, _ = prepare(protocol.preprocess, data.X, data.y)
        differences["rows"] = {"code": int(X_code.shape[0]), "paper": int(data.X.shape[0])}
        ranked = int(sum(not np.array_equal(np.unique(data.X[:, j], return_inverse=True)[1], data.X[:, j])
                         for j in range(data.X.shape[1])))
        differences["columns replaced by ranks"] = {"code": ranked, "paper": 0}
    differences = {k: v for k, v in differences.items() if v["code"] != v["paper"]}
    where = f"|Y| = {n_classes}" + ("" if data is not None else " (no --dataset: two classes assumed)")
    if differences:
        listed = "; ".join(f"{k}: code {v['code']}, paper {v['paper']}" for k, v in differences.items())
        return Finding("alpbench-paper-vs-code", True, f"released code vs paper ({setting['source']}), {where}: "
                       f"{listed}", differences)
    return Finding("alpbench-paper-vs-code", False, f"code and paper ({setting['source']}) agree, {where}", {})


DETECTORS: tuple[Callable[[Protocol, Dataset | None], Finding], ...] = (
    pool_order, query_task_mismatch, scaling_scope, aubc_variant, sd_convention,
    ignored_library_args, initial_missing_class, train_test_duplicates, paper_vs_code, test_scaler,
    alpbench_paper_vs_code,
)


def lint(protocol: Protocol, data: Dataset | None = None) -> list[Finding]:
    """Every detector's finding, triggered ones first."""
    findings = [detector(protocol, data) for detector in DETECTORS]
    return sorted(findings, key=lambda f: not f.triggered)
