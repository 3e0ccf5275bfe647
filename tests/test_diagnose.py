"""The zhan2021-released split, the static detectors and the counterfactual replays."""
from __future__ import annotations

import dataclasses
import json
import random

import numpy as np
import pytest

from audit.analysis.compare import summarise
from audit.analysis.diagnose import detectors as d
from audit.analysis.diagnose.counterfactual import (
    HYPOTHESES,
    INTERIM_LEVEL,
    MIN_DIAGNOSIS_TRIALS,
    _replay,
    closeness,
    combine,
    derived_protocols,
    diagnose_cell,
    effective_key,
)
from audit.analysis.reproduce import ReproduceRequest, reproduce
from audit.analysis.settled import schedule
from audit.analysis.stats import t_excludes
from audit.cli.main import main
from audit.engine.datasets import DataError, load_dataset
from audit.engine.runner import run_trial
from audit.engine.splits import make_split, plan_seeds
from audit.engine.store import ResultStore, fingerprint_details
from audit.protocols import load_protocol


def _data(name):
    try:
        return load_dataset(name)
    except DataError as exc:
        pytest.skip(f"{name} data absent: {exc}")


@pytest.fixture(scope="module")
def released():
    return load_protocol("zhan2021-released")


@pytest.fixture(scope="module")
def zhan():
    return load_protocol("zhan2021")


def _reference_released_splits(y, trials):
    """Our reading of the released code, written out literally: one global seed, in sequence."""
    random.seed(4666)
    out = []
    for _ in range(trials):
        test = random.sample(range(len(y)), int(0.4 * len(y)))
        train = [i for i in range(len(y)) if i not in test]
        while True:
            init = random.sample(train, 20)
            if min(np.bincount(y[init], minlength=2)) >= 2:
                break
        out.append((test, init, [i for i in train if i not in init]))
    return out


def test_released_split_follows_the_global_random_sequence(released):
    y = _data("sonar").y
    for k, (test, init, pool) in enumerate(_reference_released_splits(y, 5)):
        split = make_split(released, y, k)
        assert split.test.tolist() == test and split.labeled.tolist() == init and split.pool.tolist() == pool
    assert plan_seeds(released, y)[0] == list(range(100))


def test_released_split_is_a_partition_with_a_file_order_pool(released):
    y = _data("sonar").y
    split = make_split(released, y, 7)
    assert sorted(np.concatenate([split.test, split.train]).tolist()) == list(range(y.size))
    assert np.all(np.diff(split.pool) > 0)


def test_pool_order_fires_on_sorted_sonar_only(released, lu2023):
    assert d.pool_order(released, _data("sonar")).triggered
    assert not d.pool_order(released, _data("breast")).triggered  # labels alternate in file order
    assert not d.pool_order(lu2023, _data("sonar")).triggered  # shuffled pool


def test_query_task_model(zhan, released):
    assert d.query_task_mismatch(zhan).triggered
    only_uniform = dataclasses.replace(released, strategies={"uniform": released.strategy("uniform")})
    assert not d.query_task_mismatch(only_uniform).triggered


def test_scaling_scope(zhan, released):
    assert d.scaling_scope(released).triggered
    assert not d.scaling_scope(zhan).triggered


def test_aubc_variant(zhan, released):
    assert d.aubc_variant(zhan).triggered
    assert not d.aubc_variant(released).triggered


def test_sd_convention(zhan, released, lu2023):
    assert d.sd_convention(zhan).triggered
    assert not d.sd_convention(released).triggered
    assert not d.sd_convention(lu2023).triggered


def test_ignored_library_args(zhan):
    hint = zhan.strategy("hintsvm")
    as_called = dataclasses.replace(hint, params={**hint.params, "cl": 1.0, "ch": 1.0})
    bad = dataclasses.replace(zhan, strategies={**zhan.strategies, "hintsvm": as_called})
    finding = d.ignored_library_args(bad)
    assert finding.triggered and finding.evidence == {"hintsvm": ["ch", "cl"]}
    assert not d.ignored_library_args(zhan).triggered


def test_initial_missing_class(zhan, released):
    sonar = _data("sonar")
    strict = dataclasses.replace(zhan, split=dataclasses.replace(zhan.split, min_per_class=9))
    assert d.initial_missing_class(strict, sonar).triggered  # seeds skipped
    redraw = dataclasses.replace(strict, split=dataclasses.replace(strict.split, initial_rule="redraw"))
    assert "redrawn" in d.initial_missing_class(redraw, sonar).finding
    assert not d.initial_missing_class(released, sonar).triggered


def test_initial_draws_of_a_generated_set_are_checked_on_its_own_draws():
    # a redraw rule on Honeypot: 10 initial rows almost never miss one of its two classes; the
    # check needs each trial's draw (its given test rows), without which every seed would look redrawn
    cdalbench = load_protocol("cdalbench")
    redraw = dataclasses.replace(cdalbench, split=dataclasses.replace(
        cdalbench.split, initial_rule="redraw", initial_labels=10, min_per_class=1))
    finding = d.initial_missing_class(redraw, load_dataset("threeclust"))
    assert finding.evidence["redrawn"] == 0 and not finding.triggered


def test_train_test_duplicates(lu2023):
    assert d.train_test_duplicates(lu2023, _data("breast")).triggered
    assert not d.train_test_duplicates(lu2023, _data("sonar")).triggered


def test_paper_vs_code_flags_cdalbench_budget_60_against_the_configs_80_and_the_training_settings(lu2023):
    """The authors' commit with Honeypot's budget 60 agrees with the paper there; Diverging Sine's
    config says 80; both sets' released training stops after 50 epochs without improvement."""
    cdalbench = load_protocol("cdalbench")
    finding = d.paper_vs_code(cdalbench, load_dataset("threeclust"))
    assert finding.triggered
    assert "budget.threeclust" not in finding.evidence and "budget.divergingsin" not in finding.evidence
    patience = finding.evidence["task_model_by_dataset.threeclust.patience"]
    assert (patience["paper"], patience["code"]) == (2, 50)
    assert "task_model_by_dataset.divergingsin.patience" not in finding.evidence  # another data set's entry
    sine = d.paper_vs_code(cdalbench, load_dataset("divergingsin")).evidence
    assert (sine["budget.divergingsin"]["paper"], sine["budget.divergingsin"]["code"]) == (60, 80)
    assert "budget.divergingsin: paper 60, code 80 (follows the paper)" in \
        d.paper_vs_code(cdalbench, load_dataset("divergingsin")).finding
    assert cdalbench.for_dataset("divergingsin").budget_size == 60  # the protocol follows the paper there
    assert not d.paper_vs_code(lu2023).triggered


def test_test_scaler_flags_the_released_quirk_only(lu2023):
    cdalbench = load_protocol("cdalbench")
    assert d.test_scaler(cdalbench).triggered and d.test_scaler(cdalbench).evidence["test_fit"] == "test"
    assert not d.test_scaler(dataclasses.replace(cdalbench, scaler_test_fit="train")).triggered
    assert not d.test_scaler(lu2023).triggered


def test_expected_runs_of_two_classes():
    labels = np.array([0] * 3 + [1] * 5)
    assert d.expected_runs(labels) == pytest.approx(1 + 2 * 3 * 5 / 8)


def test_lint_prints_triggered_first(capsys):
    _data("sonar")
    assert main(["lint", "zhan2021-released", "--dataset", "sonar"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("!! pool-order") and len(lines) == len(d.DETECTORS)
    assert [line[:2] for line in lines] == sorted((line[:2] for line in lines), key=lambda m: m != "!!")


def test_hypotheses_flip_one_relevant_knob_each(zhan, released):
    derived = derived_protocols(zhan, released, "uniform")
    keys = [h.key for h, _ in derived]
    assert "pool-order" in keys and "query-model" not in keys  # uniform has no query model
    assert len({p.name for _, p in derived}) == len(derived) and zhan.name not in {p.name for _, p in derived}
    pool = dict(derived)[next(h for h, _ in derived if h.key == "pool-order")]
    assert pool.split.pool_order == "file" and pool.strategy("uniform").params == {"order": "pool"}
    assert pool.scaling == zhan.scaling


def test_diagnose_cell_replays_singles_then_pairs(zhan, tmp_path):
    _data("sonar")
    small = dataclasses.replace(zhan, budget_size=10)
    trials = MIN_DIAGNOSIS_TRIALS
    request = ReproduceRequest(protocol=small, dataset="sonar", trials=trials, store=tmp_path / "s.sqlite")
    store = ResultStore(request.store)
    cell = {"strategy": "uniform", "n_trials": trials}
    try:
        nowhere = diagnose_cell(small, "sonar", {**cell, "published_mean": -1.0}, request, store)
        singles = [h for h in nowhere["hypotheses"] if "+" not in h["hypothesis"] and h["hypothesis"] != "released-all"]
        pool = next(h for h in singles if h["hypothesis"] == "pool-order")
        inside = diagnose_cell(small, "sonar", {**cell, "published_mean": pool["mean"]}, request, store)
    finally:
        store.close()
    assert pool["n"] == trials and pool["protocol"] == "zhan2021~pool-order"
    # no single flip explains -1: every pair of the relevant flips is replayed too
    pairs = {h["hypothesis"]: h for h in nowhere["hypotheses"] if "+" in h["hypothesis"]}
    assert len(pairs) == len(singles) * (len(singles) - 1) // 2
    # ... and last the released protocol itself; outside too, the line says so
    whole = nowhere["hypotheses"][-1]
    assert (whole["hypothesis"], whole["protocol"], whole["n"]) == ("released-all", "zhan2021-released", trials)
    assert nowhere["summary"] == (f"not explained by the released code (released replay {whole['mean']:.3f} "
                                  f"[{whole['ci95'][0]:.3f}, {whole['ci95'][1]:.3f}], published -1.000 outside)")
    assert "released-all" not in {h["hypothesis"] for h in inside["hypotheses"]}
    both = pairs["pool-order+split"]
    assert both["label"] == "unshuffled pool + released split draws" and both["n"] == trials
    assert both["mean"] != pool["mean"]  # the released draws put other rows in the pool
    # a single flip explains the pool-order mean: no pairs, and the line names it
    assert "pool-order" in inside["explained_by"] and all("+" not in h["hypothesis"] for h in inside["hypotheses"])
    assert inside["summary"].startswith("explained by: unshuffled pool (file-order replay")
    # An AUBC-variant flip re-summarises stored curves; a real replay gives the same numbers.
    rows = {h["hypothesis"]: h for h in nowhere["hypotheses"]}
    assert rows["aubc-variant"]["curves_from"] == "zhan2021"
    assert rows["pool-order+aubc-variant"]["curves_from"] == "zhan2021~pool-order"
    assert rows["pool-order"]["curves_from"] == "zhan2021~pool-order"
    released = load_protocol(small.released)
    keyed = {h.key: h for h in HYPOTHESES}
    sonar = load_dataset("sonar")
    seeds, _ = plan_seeds(small, sonar.y, trials)
    for hypothesis in (keyed["aubc-variant"], combine(keyed["pool-order"], keyed["aubc-variant"])):
        derived = hypothesis.flip(small, released, "uniform")
        assert derived.aubc_variant != small.aubc_variant
        replayed = summarise([run_trial(derived, "sonar", sonar.X, sonar.y, "uniform", seed).aubc for seed in seeds],
                             derived.sd_ddof)
        assert (replayed.mean, [float(v) for v in replayed.ci95]) == \
            (rows[hypothesis.key]["mean"], rows[hypothesis.key]["ci95"])


def test_pair_flip_applies_both_knobs(zhan, released):
    keyed = {h.key: h for h in HYPOTHESES}
    both = combine(keyed["pool-order"], keyed["split"]).flip(zhan, released, "uniform")
    assert both.split.pool_order == "file" and both.split.method == "zhan2021-released"
    assert both.strategy("uniform").params == {"order": "pool"} and both.scaling == zhan.scaling


def test_released_code_knobs_are_hypotheses_only_where_they_can_change_the_cell(zhan, released):
    def keys(sid, name):
        return {h.key for h, _ in derived_protocols(zhan, released, sid, data=_data(name))}

    assert "library-defaults" in keys("us-nc", "sonar") and "library-defaults" in keys("qbc", "sonar")
    assert "library-defaults" not in keys("quire", "sonar") | keys("dwus", "sonar") | keys("hintsvm", "sonar")
    # sonar has no equal rows with different labels, haberman has; the lookup is libact's only
    assert "label-lookup" not in keys("us-nc", "sonar") and "label-lookup" in keys("us-nc", "haberman")
    assert "label-lookup" not in keys("margin", "haberman")
    # the file's labels reach libact: different only where the file is not labelled -1/+1
    assert "libact-labels" not in keys("hintsvm", "sonar") and "libact-labels" in keys("hintsvm", "parkinsons")
    assert "libact-labels" not in keys("margin", "parkinsons")


def test_reproduce_says_which_cells_it_diagnoses_and_how_before_it_starts(tmp_path):
    _data("sonar")
    lines = []
    reproduce(ReproduceRequest(protocol="zhan2021", dataset="sonar", strategies=["uniform", "coreset"], trials=10,
                               batch_size=10, store=tmp_path / "s.sqlite", out=tmp_path / "report", progress=False),
              log=lines.append)
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    diagnosed = [c["strategy"] for c in report["strategies"] if c.get("diagnosis")]
    assert diagnosed == ["uniform"]  # published 0.621 against about 0.76; coreset is consistent
    plan = [line for line in lines if line.startswith("diagnosis: ")]
    assert len(plan) == 2 and plan[:1] == ["diagnosis: 1 discrepant cell (uniform), one after another: each replayed under every single flip "
                    "toward zhan2021-released that changes it; if none explains it, under their pairs; if none of those "
                    "does, under zhan2021-released itself. A replay runs up to 10 trials"]  # 10: no look before the end
    assert lines.index(plan[0]) < min(i for i, line in enumerate(lines) if line.startswith("diagnosis uniform"))
    # then its worst case: every single flip that ran trials, their pairs and the released code
    rows = next(c for c in report["strategies"] if c["strategy"] == "uniform")["diagnosis"]["hypotheses"]
    k = len({row["curves_from"] for row in rows} - {"zhan2021"})  # the AUBC-variant flip re-reads the audited trials
    bound = plan[1]
    assert lines.index(bound) == lines.index(plan[0]) + 1
    assert k == 3 and bound.startswith(f"diagnosis: at most {k + k * (k - 1) // 2 + 1} replays (uniform 7) of up to "
                                       "10 trials each: up to about ")
    assert "--no-diagnose skips it" in bound


def test_an_initial_set_rule_that_changes_no_trial_is_not_replayed(zhan, released):
    """zhan2021 skips a seed whose first draw lacks a class; its released code redraws until two
    of each. On sonar no planned first draw lacks one, so the redraw replay is the audited cell
    itself: not a hypothesis, and a pair with it is the other flip alone. On haberman it is."""
    sonar, haberman = _data("sonar"), _data("haberman")
    keyed = {h.key: h for h in HYPOTHESES}
    assert "initial-rule" not in {h.key for h, _ in derived_protocols(zhan, released, "margin", data=sonar)}
    assert "initial-rule" in {h.key for h, _ in derived_protocols(zhan, released, "margin", data=haberman)}
    assert "initial-rule" in {h.key for h, _ in derived_protocols(zhan, released, "margin")}  # data unknown
    redraw = keyed["initial-rule"].flip(zhan, released, "uniform")
    assert redraw.split.initial_rule != zhan.split.initial_rule
    small = dataclasses.replace(zhan, budget_size=5)
    for seed in plan_seeds(zhan, sonar.y, 3, sonar)[0]:  # really the same trials
        one = run_trial(small, "sonar", sonar.X, sonar.y, "uniform", seed)
        other = run_trial(dataclasses.replace(redraw, budget_size=5), "sonar", sonar.X, sonar.y, "uniform", seed)
        assert (one.query_hash, one.aubc) == (other.query_hash, other.aubc)
    both = combine(keyed["pool-order"], keyed["initial-rule"]).flip(zhan, released, "uniform")
    pool = keyed["pool-order"].flip(zhan, released, "uniform")
    assert effective_key(zhan, both, "uniform", sonar) == effective_key(zhan, pool, "uniform", sonar)
    assert effective_key(zhan, both, "uniform", haberman) != effective_key(zhan, pool, "uniform", haberman)


def _stops_early(values: np.ndarray, published: float) -> int | None:
    """The look (n) at which a replay of these AUBCs stops, as _replay decides; None: the full count."""
    for end in schedule(len(values))[:-1]:
        if t_excludes(values[:end], published, INTERIM_LEVEL):
            return end
    return None


@pytest.mark.parametrize("name, draw, mean, most", [
    ("normal", lambda rng, n: rng.normal(0.75, 0.035, n), 0.75, 0.004),  # Bonferroni: 4 looks x 0.05%
    ("skewed", lambda rng, n: rng.beta(30, 10, n), 0.75, 0.01),
    ("two modes", lambda rng, n: np.where(rng.random(n) < 0.6, rng.normal(0.70, 0.02, n), rng.normal(0.80, 0.02, n)),
     0.74, 0.01),  # DWUS-like: degenerate trials around one value, the others around another
])
def test_a_replay_whose_mean_is_the_published_value_rarely_stops_early(name, draw, mean, most):
    """10,000 simulated replays of 100 trials whose true mean is the published value: the share
    that stops at a look (10, 20, 40, 70) and so cannot explain the cell stays at most 1%."""
    rng = np.random.default_rng(20)
    stops = sum(_stops_early(draw(rng, 100), mean) is not None for _ in range(10_000))
    assert stops / 10_000 <= most


def test_a_replay_far_from_the_published_value_stops_at_an_early_look():
    """BSO's replays sit about two SDs from the published value: they stop by the second look."""
    rng = np.random.default_rng(21)
    looks = [_stops_early(rng.normal(0.75 + 2 * 0.035, 0.035, 100), 0.75) for _ in range(1_000)]
    assert all(n is not None and n <= 20 for n in looks)


def test_the_closest_replay_is_the_nearest_mean_not_the_widest_interval():
    """BSO on sonar (2026-12-07): the split-draws replay stopped at n = 10 (interval 0.051 wide)
    reaches nearer the published 0.830 than the pool-order + split pair stopped at 20, whose
    mean is nearer; the pair is the closer replay."""
    rows = [{"key": "split", "mean": 0.8894, "ci95": [0.864, 0.915], "distance": 0.864 - 0.830},
            {"key": "pool-order+split", "mean": 0.8866, "ci95": [0.872, 0.901], "distance": 0.872 - 0.830},
            {"key": "failed", "mean": float("nan"), "ci95": [float("nan")] * 2, "distance": float("inf")}]
    assert min(rows, key=lambda r: r["distance"])["key"] == "split"  # the interval alone favours the short replay
    assert min(rows, key=lambda r: closeness(r, 0.830))["key"] == "pool-order+split"
    assert max(rows, key=lambda r: closeness(r, 0.830))["key"] == "failed"


def test_a_replay_stops_once_its_interim_interval_excludes_the_published_value(zhan, released, tmp_path):
    _data("sonar")
    small = dataclasses.replace(zhan, budget_size=10)
    request = ReproduceRequest(protocol=small, dataset="sonar", trials=20, store=tmp_path / "s.sqlite")
    [(hypothesis, derived)] = [(h, p) for h, p in derived_protocols(small, released, "uniform")
                               if h.key == "pool-order"]
    store = ResultStore(request.store)
    try:
        far = _replay(small, derived, hypothesis, "sonar", "uniform", 0.0, request, store)
        assert (far["n"], far["stopped_at"], far["inside"]) == (10, 10, False)  # schedule: 10, then 20
        assert len(store.finished_seeds(derived.name, "sonar", "uniform", store.register(
            fingerprint_details(derived)))) == 10  # the other 10 never ran
        near = _replay(small, derived, hypothesis, "sonar", "uniform", far["mean"], request, store)
    finally:
        store.close()
    assert (near["n"], near["stopped_at"]) == (20, None)  # not excluded: the full count, the t-interval decides
    assert near["per_seed"] and near["inside"] == (near["ci95"][0] <= far["mean"] <= near["ci95"][1])


def test_replays_with_one_effective_protocol_share_trials(zhan, released, tmp_path):
    _data("sonar")
    small = dataclasses.replace(zhan, budget_size=10)
    # libact's label values: inert for a native strategy, so the same trials as the audited cell's
    inert = dataclasses.replace(small, name="zhan2021~inert", libact_binary=not small.libact_binary)
    assert effective_key(small, inert, "uniform") == effective_key(small, small, "uniform")
    assert effective_key(small, inert, "hintsvm") != effective_key(small, small, "hintsvm")
    request = ReproduceRequest(protocol=small, dataset="sonar", trials=2, store=tmp_path / "s.sqlite")
    hypothesis = next(h for h in HYPOTHESES if h.key == "libact-labels")
    store = ResultStore(request.store)
    try:
        shared = {effective_key(small, small, "uniform"): small}
        row = _replay(small, inert, hypothesis, "sonar", "uniform", 0.5, request, store, shared)
        assert row["curves_from"] == "zhan2021" and row["protocol"] == "zhan2021~inert" and row["n"] == 2
        assert store.trials("zhan2021~inert", "sonar", "uniform", store.register(fingerprint_details(inert))) == []
        alone = _replay(small, inert, hypothesis, "sonar", "uniform", 0.5, request, store)  # no sharing: its own
    finally:
        store.close()
    assert (alone["curves_from"], alone["mean"], alone["ci95"]) == ("zhan2021~inert", row["mean"], row["ci95"])
