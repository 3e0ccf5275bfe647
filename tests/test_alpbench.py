"""ALPBench through its package: the split and preprocessing as alpbench 0.1.2 does them, the
settings, the paper-vs-code detector, the missing-extra line, OpenML IDs and the adapter's calls.
Tests that need the package skip without the extra (uv run --extra alpbench pytest ...)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from audit.analysis.diagnose.detectors import alpbench_paper_vs_code
from audit.cli.main import main
from audit.engine import openml_data
from audit.engine.datasets import REGISTRY
from audit.engine.preprocess import prepare
from audit.engine.runner import budget_for
from audit.engine.splits import make_split
from audit.errors import AuditError
from audit.protocols import load_protocol
from tests.conftest import dataset_or_skip


@pytest.fixture(scope="module")
def small():
    return load_protocol("alpbench-small")


@pytest.mark.parametrize("name, seed", [("wdbc", 0), ("wdbc", 7), ("vehicle", 3)])
def test_split_equals_alpbench_create_dataset_split(small, name, seed):
    scenario = pytest.importorskip("alpbench.benchmark.ActiveLearningScenario")
    data = dataset_or_skip(name)
    X, y = prepare(small.preprocess, data.X, data.y)
    labeled, test = scenario.create_dataset_split(X, y, seed, 0.33, seed, 30, "absolute", -1)
    split = make_split(small, y, seed)
    assert split.labeled.tolist() == labeled and split.test.tolist() == test
    assert split.pool.tolist() == sorted(set(range(y.size)) - set(labeled) - set(test))


def test_missing_classes_are_topped_up_as_alpbench_does():
    scenario = pytest.importorskip("alpbench.benchmark.ActiveLearningScenario")
    protocol = load_protocol("alpbench-small")
    y = np.array([0] * 300 + [1] * 300 + [2] * 6)  # 30 stratified labels rarely hold class 2
    X = np.arange(y.size, dtype=float)[:, None]
    topped = 0
    for seed in range(10):
        labeled, _ = scenario.create_dataset_split(X, y, seed, 0.33, seed, 30, "absolute", -1)
        split = make_split(protocol, y, seed)
        assert split.labeled.tolist() == labeled
        topped += len(labeled) > 30
    assert topped > 0  # the top-up was exercised


def test_dynamic_sizes_follow_the_classes(small):
    dynamic, study = load_protocol("alpbench-large-dynamic"), load_protocol("alpbench-study-small")
    assert (dynamic.initial_for(4), dynamic.batch_for(4), budget_for(dynamic, 10**6, 4)) == (80, 10, 200)
    assert (study.initial_for(4), study.batch_for(4), budget_for(study, 10**6, 4)) == (20, 20, 400)
    assert budget_for(study, 150, 4) == 150  # capped at the pool, as ALPBench stops when it is used up
    assert budget_for(small, 10**6, 7) == 200


def test_alpbench_code_preprocessing_ranks_dedups_and_sorts():
    X = np.array([[0.5, 10.0], [0.1, 10.0], [0.5, 10.0], [0.9, np.nan]])
    y = np.array([1, 0, 2, 1])
    Xp, yp = prepare("alpbench-code", X, y)
    assert Xp.tolist() == [[0.0, 0.0], [1.0, 0.0], [2.0, 0.0]]  # ranks; NaN mean-imputed; duplicate dropped
    assert yp.tolist() == [0, 1, 1]  # the first of the duplicates keeps its label
    assert prepare("alpbench-paper", X, y)[0] is X


def test_a_stand_in_loses_the_columns_its_openml_table_does_not_have():
    """breast's LIBSVM feature 1 is the sample code number, an ID breast-w drops: both ALPBench
    preprocessings read the file without it; lu2023's ("none") and another file keep every column."""
    X = np.arange(12, dtype=float).reshape(3, 4)
    y = np.array([0, 1, 0])
    for method in ("alpbench-code", "alpbench-paper"):
        assert prepare(method, X, y, "breast")[0].shape == (3, 3)
    assert prepare("alpbench-paper", X, y, "breast")[0].tolist() == X[:, 1:].tolist()
    assert prepare("none", X, y, "breast")[0] is X and prepare("alpbench-paper", X, y, "wdbc")[0] is X
    data = dataset_or_skip("breast")
    assert prepare("alpbench-code", data.X, data.y, "breast")[0].shape[1] == data.X.shape[1] - 1 == 9


def test_detector_names_the_code_paper_differences():
    large = load_protocol("alpbench-large")
    finding = alpbench_paper_vs_code(large)
    assert finding.triggered and finding.evidence["budget"] == {"code": 4000, "paper": 10000}
    assert finding.evidence["preprocessing"] == {"code": "alpbench-code", "paper": "alpbench-paper"}
    as_paper = dataclasses.replace(load_protocol("alpbench-small"), preprocess="alpbench-paper",
                                   split=dataclasses.replace(large.split, test_ratio=1 / 3, initial_labels=30))
    assert not alpbench_paper_vs_code(as_paper).triggered
    assert not alpbench_paper_vs_code(load_protocol("lu2023")).triggered


def test_detector_counts_ranked_columns_on_a_data_set():
    finding = alpbench_paper_vs_code(load_protocol("alpbench-small"), dataset_or_skip("wdbc"))
    assert finding.evidence["columns replaced by ranks"] == {"code": 30, "paper": 0}


def test_without_the_extra_one_line_and_exit_2_before_any_work(monkeypatch, capsys, tmp_path):
    import audit.extras

    real = audit.extras.importlib.util.find_spec
    monkeypatch.setattr(audit.extras.importlib.util, "find_spec",
                        lambda name, *a: None if name == "alpbench" else real(name, *a))
    store = tmp_path / "store.sqlite"
    assert main(["reproduce", "alpbench-small", "--dataset", "wdbc", "--store", str(store),
                 "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    head = "audit: error: protocol 'alpbench-small' needs the optional extra 'alpbench' (ALPBench's package; "
    assert len(err) == 1 and err[0].startswith(head)
    assert "alpbench" in err[0][len(head):].split(" not installed")[0].split(", ")  # with or without the others
    assert "uv run --extra alpbench" in err[0] and not store.exists() and not (tmp_path / "out").exists()


def test_alpbench_ids_and_their_local_copies():
    ids = openml_data.alpbench_ids()
    assert len(ids) == 86 and not {1567, 1169, 41147, 1493} & set(ids)
    for openml_id in ids:
        copy = openml_data.local_copy(openml_id)
        assert copy is None or copy.dataset in REGISTRY
    assert openml_data.local_copy(1510).dataset == "wdbc" and openml_data.local_copy(334) is None
    with pytest.raises(AuditError, match="openml:ID"):
        openml_data.parse_id("openml:x31")


def test_adapter_hands_alpbench_the_labeled_rows_in_labeled_order():
    pytest.importorskip("alpbench")
    from adapters import alpbench as adapter
    seen = []

    class Spy:
        def sample(self, learner, X_l, y_l, X_u, num_queries):
            seen.append(X_l[:, 0].tolist())
            return np.arange(num_queries)[::-1]

    strategy = adapter.STRATEGIES["random"](random_state=0)
    strategy._strategy = Spy()
    X = np.arange(10, dtype=float)[:, None]
    y = np.array([1, -1, 0, -1, -1, -1, -1, -1, -1, -1])
    first = strategy.query(X, y, None, 2, np.flatnonzero(y == -1), np.random.default_rng(0))
    assert first.tolist() == [3, 1]  # ALPBench's indices into X_u, mapped back to rows
    y[first] = 0
    strategy.query(X, y, None, 2, np.flatnonzero(y == -1), np.random.default_rng(0))
    assert seen == [[0.0, 2.0], [0.0, 2.0, 3.0, 1.0]]


@pytest.mark.parametrize("strategy", ["margin", "power_bald"])
def test_alpbench_pipelines_query_the_same_with_the_lean_forest(monkeypatch, strategy):
    """ALPBench's RF pipeline (a smaller forest, to be quick): the lean forest, handed to ALPBench
    as a RandomForestClassifier, gives the queries and AUBC of scikit-learn's own forest, also
    where ALPBench reads the trees one by one (PowerBALD)."""
    pytest.importorskip("alpbench")
    from audit.engine.models import ModelSpec
    from audit.engine.runner import run_trial
    from audit.fast.forest import LeanForest

    data = dataset_or_skip("wdbc")
    base = load_protocol("alpbench-study-small")
    forest = ModelSpec("sklearn.ensemble.RandomForestClassifier",
                       {"n_estimators": 20, "max_depth": 10, "criterion": "entropy"})
    protocol = dataclasses.replace(base, name="rf20", task_model=forest)
    lean = run_trial(protocol, "wdbc", data.X, data.y, strategy, 3)
    monkeypatch.setattr(LeanForest, "_fast_options", lambda self, X, y, sample_weight: False)
    library = run_trial(protocol, "wdbc", data.X, data.y, strategy, 3)
    assert (lean.status, lean.fast_path, library.fast_path) == ("ok", "lean-forest", "library")
    assert lean.query_hash == library.query_hash and lean.aubc == library.aubc
    assert [r.accuracy for r in lean.rounds] == [r.accuracy for r in library.rounds]


def test_alpbench_ensembles_fit_a_learner_once_on_the_same_rows(monkeypatch):
    """PowerBALD with SVC: ALPBench's Ensemble fits the one SVC ensemble_size (10) times on the
    same rows; the adapter's copy fits it once, and the queries and AUBC are the same."""
    pytest.importorskip("alpbench")
    from sklearn.svm import SVC

    from adapters import alpbench as adapter
    from audit.engine.runner import run_trial
    from audit.fast.policy import public_view

    data = dataset_or_skip("wdbc")
    base = load_protocol("alpbench-study-small")
    protocol = dataclasses.replace(base, name="svm", task_model=base.learners["svm_rbf"])
    fits = []
    fit = SVC.fit
    monkeypatch.setattr(SVC, "fit", lambda self, X, y, **kw: fits.append(len(y)) or fit(self, X, y, **kw))
    once = run_trial(protocol, "wdbc", data.X, data.y, "power_bald", 2)
    fits_once, fits[:] = len(fits), []
    monkeypatch.setattr(adapter, "learner_for_alpbench", public_view)  # ALPBench refits the runner's model
    every = run_trial(protocol, "wdbc", data.X, data.y, "power_bald", 2)
    assert once.status == every.status == "ok"
    assert once.query_hash == every.query_hash and once.aubc == every.aubc
    rounds = len(once.rounds)
    assert (fits_once, len(fits)) == (rounds + (rounds - 1), rounds + 10 * (rounds - 1))
