"""The Python API (audit/api.py): tables that match the store and the CLI's verdicts,
read-only stores, validation up front, and an import that does no work."""
import hashlib
import math
import sqlite3
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import audit
from audit import api


@pytest.fixture(scope="module")
def replay(tmp_path_factory, heart):
    where = tmp_path_factory.mktemp("api")
    result = audit.reproduce("lu2023", "heart", strategies=["uniform", "us-c"], trials=3,
                             store=where / "store.sqlite", out=where / "report")
    return result, where / "store.sqlite"


def test_import_does_no_work():
    code = "import sys, audit; print(sorted(m for m in ('pandas', 'sklearn', 'numpy') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_api_names_stay_functions_once_every_module_is_loaded(replay):
    import audit.cli.main  # noqa: F401  (loads every command's modules)

    for name in audit.API:
        assert callable(getattr(audit, name)), name
    assert audit.reproduce is api.reproduce and audit.compare is api.compare


def test_cells_match_the_report_and_carry_provenance(replay):
    result, _ = replay
    cells = result.cells
    assert list(cells.strategy) == ["uniform", "us-c"]
    assert set(api.CELL_COLUMNS) <= set(cells.columns)
    for row, cell in zip(cells.itertuples(), result.report["strategies"]):
        assert row.mean == pytest.approx(cell["mean"]) and row.verdict == cell["verdict"]
        assert (row.ci95_low, row.ci95_high) == pytest.approx(tuple(cell["ci95"]))
    assert cells.attrs["aubc_variant"] == result.report["protocol"]["aubc_variant"] == "lu2023_code"
    assert cells.attrs["environment"]["scikit-learn"] == result.report["environment"]["scikit-learn"]
    assert cells.attrs["trial_seeds"] == [0, 1, 2]
    uniform = cells.set_index("strategy").loc["uniform"]
    assert uniform.published_mean == pytest.approx(0.8051) and "lu2023" in uniform.reference


def test_trials_and_rounds_are_the_stored_rows(replay):
    result, store = replay
    db = sqlite3.connect(store)
    stored = db.execute("SELECT strategy, trial_seed, aubc, query_hash FROM trials ORDER BY strategy, trial_seed").fetchall()
    n_rounds = db.execute("SELECT COUNT(*) FROM rounds").fetchone()[0]
    db.close()
    frame = audit.trials(store)
    assert list(frame[["strategy", "trial_seed", "aubc", "query_hash"]].itertuples(index=False, name=None)) == stored
    assert frame["scikit-learn"].nunique() == 1 and frame.code.notna().all()
    assert frame.protocol_spec.eq(result.cells.attrs["spec_hash"]).all()
    assert len(result.trials) == 6 and set(result.trials.strategy) == {"uniform", "us-c"}
    assert audit.trials(store, strategy="us-c").strategy.eq("us-c").all()
    assert audit.trials(store, dataset="sonar").empty
    rounds = audit.rounds(store)
    assert len(rounds) == n_rounds
    one = rounds[(rounds.strategy == "uniform") & (rounds.trial_seed == 0)]
    assert one["round"].is_monotonic_increasing and np.all(np.diff(one.n_labeled) == 1)  # lu2023: batch 1
    means = frame.groupby("strategy").aubc.mean()
    assert means["uniform"] == pytest.approx(result.cells.set_index("strategy").loc["uniform", "mean"])


def test_reading_never_changes_the_store(replay):
    _, store = replay
    files = lambda: {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in store.parent.iterdir()  # noqa: E731
                     if p.is_file()}
    before = files()
    audit.trials(store), audit.rounds(store)
    assert files() == before  # the store, its -wal and -shm files: none written, none added


def test_unreadable_stores_are_one_line_errors(tmp_path):
    with pytest.raises(audit.AuditError, match="no result store"):
        audit.trials(tmp_path / "absent.sqlite")
    foreign = tmp_path / "foreign.sqlite"
    sqlite3.connect(foreign).execute("CREATE TABLE t (x)").connection.commit()
    with pytest.raises(audit.AuditError, match="cannot read the result store"):
        audit.rounds(foreign)


@pytest.mark.parametrize("kwargs, message", [
    ({"strategies": "uniform"}, "list of strategy ids"),
    ({"jobs": 0}, "jobs must be a positive integer"),
    ({"trials": 2.5}, "trials must be a positive integer"),
    ({"strategies": ["magic"]}, "no strategy 'magic'"),
])
def test_bad_arguments_raise_before_any_work(tmp_path, heart, kwargs, message):
    store = tmp_path / "store.sqlite"
    with pytest.raises(audit.AuditError, match=message):
        audit.reproduce("lu2023", "heart", store=store, out=tmp_path / "out", **kwargs)
    assert not store.exists() and not (tmp_path / "out").exists()


def test_compare_gives_hand_computed_intervals_and_verdicts():
    aubc = [0.80, 0.82, 0.84]
    trials = pd.DataFrame({"dataset": "d", "strategy": ["a"] * 3 + ["b"] * 3 + ["c"] * 3, "status": "ok",
                           "aubc": aubc * 3})
    # 95% half-width t(.975, 2) * 0.02 / sqrt(3) = 0.0497, 99%: t(.995, 2) * 0.02 / sqrt(3) = 0.1146
    refs = pd.DataFrame({"dataset": "d", "strategy": ["a", "b", "c"], "mean_fraction": [0.83, 0.90, 0.95]})
    out = audit.compare(trials, refs).set_index("strategy")
    half = stats.t.ppf(0.975, 2) * 0.02 / math.sqrt(3)  # sample SD of (0.80, 0.82, 0.84) is 0.02
    assert (out.loc["a", "ci95_low"], out.loc["a", "ci95_high"]) == pytest.approx((0.82 - half, 0.82 + half))
    assert out.loc["a", "verdict"] == "consistent"
    assert out.loc["b", "verdict"] == "discrepant at 5%"
    assert out.loc["c", "verdict"] == "discrepant at 1%"


def test_compare_refuses_ambiguous_or_incomplete_tables():
    trials = pd.DataFrame({"dataset": ["d"], "strategy": ["a"], "status": ["ok"], "aubc": [0.8]})
    with pytest.raises(audit.AuditError, match="2 rows for d/a"):
        audit.compare(trials, pd.DataFrame({"dataset": ["d", "d"], "strategy": ["a", "a"], "mean": [0.8, 0.7]}))
    with pytest.raises(audit.AuditError, match="lacks column"):
        audit.compare(trials.drop(columns="aubc"), pd.DataFrame({"dataset": [], "strategy": [], "mean": []}))


def test_references_say_where_each_number_was_transcribed():
    refs = audit.references("lu2023")
    assert len(refs) > 0 and refs.paper.eq("lu2023").all()
    assert refs.source.str.match(r"reference_results/lu2023\w*\.csv:\d+$").all()
    known = refs.dropna(subset=["mean_fraction"])
    assert known.mean_fraction.between(0, 1).all()


def test_protocol_loads_by_name_and_reports_unknown_names():
    assert audit.protocol("lu2023").name == "lu2023"
    with pytest.raises(audit.AuditError, match="unknown protocol"):
        audit.protocol("nonesuch")


def test_a_quiet_replay_prints_nothing(tmp_path, heart):
    """progress=False (the default) leaves stderr alone, the time estimate included."""
    code = ("import audit; audit.reproduce('lu2023', 'heart', strategies=['uniform', 'us-c'], trials=2, "
            f"store={str(tmp_path / 's.sqlite')!r}, out={str(tmp_path / 'r')!r}, diagnose=False)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stderr == "" and done.stdout == ""
