"""`audit summary` (audit/analysis/summary.py, audit/report/summary.py): the verdicts of the
store's cells equal `audit reproduce`'s, counts, "not run" cells, lint marks beside the
cells, zhan2021, the output's safety and bad input."""
from __future__ import annotations

import csv
import hashlib
import json

import pytest

import audit
from audit.analysis.compare import CONSISTENT, DISCREPANT_1, DISCREPANT_5
from audit.api import summary as api_summary
from audit.cli.main import main
from audit.engine.datasets import REGISTRY
from audit.engine.destinations import MANIFEST

FILES = {"summary.csv", "summary.png", "summary.md", "summary.html", "summary.json"}


@pytest.fixture(scope="module")
def lu_store(tmp_path_factory, heart, sonar):
    """A real short replay: lu2023 on heart and sonar, uniform and us-c, 3 trials; and reproduce's cells."""
    where = tmp_path_factory.mktemp("summary-lu")
    store = where / "store.sqlite"
    cells = {}
    for dataset in ("heart", "sonar"):
        replay = audit.reproduce("lu2023", dataset, strategies=["uniform", "us-c"], trials=3, store=store,
                                 out=where / f"report-{dataset}", diagnose=False)
        cells.update({(dataset, c["strategy"]): c for c in replay.report["strategies"]})
    return store, cells


def run(argv, capsys):
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own errors (a bad option value)
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def read_csv(path):
    with open(path, newline="") as f:
        return {(r["dataset"], r["strategy"]): r for r in csv.DictReader(f)}


def store_files(store):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in store.parent.iterdir()
            if p.is_file() and p.name.startswith(store.name)}


def test_verdicts_equal_reproduce_and_the_counts_line(lu_store, tmp_path, capsys):
    store, cells = lu_store
    before = store_files(store)
    code, out, err = run(["summary", "--protocol", "lu2023", "--store", str(store), "--out", str(tmp_path / "s")],
                         capsys)
    assert code == 0, err
    assert store_files(store) == before  # read only
    assert {p.name for p in (tmp_path / "s").iterdir()} == FILES | {MANIFEST}
    rows = read_csv(tmp_path / "s" / "summary.csv")
    assert {d for d, _ in rows} == {"heart", "sonar"}  # default: the data sets with trials
    assert len(rows) == 2 * 20  # every strategy of the protocol
    for key, cell in cells.items():
        row = rows[key]
        assert row["verdict"] == cell["verdict"] and int(row["n"]) == cell["n_trials"] == 3
        assert float(row["mean"]) == pytest.approx(cell["mean"], abs=1e-12)
        assert (float(row["ci95_low"]), float(row["ci99_high"])) == pytest.approx((cell["ci95"][0], cell["ci99"][1]))
        assert float(row["published_mean"]) == pytest.approx(cell["published_mean"])
        assert float(row["difference"]) == pytest.approx(cell["mean"] - cell["published_mean"])
        assert row["reference"].startswith(f"{cell['reference']['paper']} {cell['reference']['table']}")
        assert row["trial_seeds"] == "0-2"
    assert rows["heart", "qbc"]["verdict"] == "not run" and rows["heart", "qbc"]["n"] == "0"
    verdicts = [c["verdict"] for c in cells.values()]
    referenced = sum(v in (CONSISTENT, DISCREPANT_5, DISCREPANT_1) for v in verdicts)
    assert (f"{verdicts.count(CONSISTENT)} of {referenced} referenced cells consistent at 5%" in out
            and f"{verdicts.count(DISCREPANT_5)} discrepant at 5%, {verdicts.count(DISCREPANT_1)} at 1%" in out)
    assert "36 not run" in out and "40 cells: 2 data sets x 20 strategies" in out
    assert out.startswith("protocol lu2023 (spec ") and "trial seeds" in out and "fingerprint" in out
    assert f"report: {tmp_path / 's'}/ summary.csv" in out
    manifest = json.loads((tmp_path / "s" / MANIFEST).read_text())
    assert manifest["command"] == "summary" and set(manifest["files"]) == FILES


def test_trials_takes_the_first_seeds_as_reproduce_would(lu_store, tmp_path):
    store, _ = lu_store
    frame = api_summary("lu2023", store=store, datasets=["heart"], strategies=["uniform"], trials=2)
    stored = audit.trials(store, dataset="heart", strategy="uniform")
    first_two = stored.sort_values("trial_seed").aubc.iloc[:2]
    assert frame.n.tolist() == [2] and frame["mean"].iloc[0] == pytest.approx(first_two.mean())
    assert frame.trial_seeds.tolist() == ["0-1"] and frame.attrs["trial_seeds"] == [0, 1]
    again = audit.reproduce("lu2023", "heart", strategies=["uniform"], trials=2, store=store,
                            out=tmp_path / "r", diagnose=False)
    assert again.ran == 0 and again.cells.verdict.tolist() == frame.verdict.tolist()


def test_all_datasets_show_not_run_and_the_lint_mark_beside_vr(lu_store, tmp_path, capsys):
    store, _ = lu_store
    code, out, err = run(["summary", "--protocol", "lu2023", "--datasets", "all", "--strategies", "uniform,vr",
                          "--store", str(store), "--out", str(tmp_path / "s")], capsys)
    assert code == 0, err
    rows = read_csv(tmp_path / "s" / "summary.csv")
    lu2023_sets = [n for n, info in REGISTRY.items() if info.task == "binary"]
    assert len(rows) == 2 * len(lu2023_sets) == 52
    assert all(rows[d, "uniform"]["verdict"] == "not run" for d in lu2023_sets if d not in ("heart", "sonar"))
    # lu2023's published VR column copies Uniform's: vr cannot run here, yet its published cell is marked
    assert rows["heart", "vr"]["verdict"] == "not run" and rows["heart", "vr"]["published_mean"]
    assert rows["heart", "vr"]["lint"].startswith("[1] identical-columns:") and "vr equals uniform" in rows["heart", "vr"]["lint"]
    assert rows["heart", "uniform"]["lint"] == ""
    assert rows["phoneme", "vr"]["lint"] == ""  # no VR number published there
    assert "lint findings beside the cells" in out and "[1] identical-columns" in out
    assert "unavailable here" not in out  # every lu2023 strategy runs here since native.vr and LAL
    html = (tmp_path / "s" / "summary.html").read_text()
    assert "data:image/png;base64," in html and "vr equals uniform" in html and "http" not in html.split("<body>")[1]
    assert "[1]" in (tmp_path / "s" / "summary.md").read_text()


def test_zhan2021_binary_and_multiclass(tmp_path, capsys):
    store = tmp_path / "zh.sqlite"
    replays = {d: audit.reproduce("zhan2021", d, strategies=["uniform"], trials=2, store=store,
                                  out=tmp_path / f"r-{d}", diagnose=False) for d in ("iris", "heart")}
    code, out, err = run(["summary", "--protocol", "zhan2021", "--store", str(store), "--strategies", "uniform,margin",
                          "--out", str(tmp_path / "s")], capsys)
    assert code == 0, err
    rows = read_csv(tmp_path / "s" / "summary.csv")
    assert sorted({d for d, _ in rows}) == ["heart", "iris"]
    for dataset, replay in replays.items():
        cell = replay.cells.set_index("strategy").loc["uniform"]
        assert rows[dataset, "uniform"]["verdict"] == cell.verdict
        assert float(rows[dataset, "uniform"]["mean"]) == pytest.approx(cell["mean"])
    assert rows["iris", "margin"]["verdict"] == "not run"
    assert "AUBC trapezoid" in out


def test_an_out_holding_a_users_file_is_refused_and_left_alone(lu_store, tmp_path, capsys):
    store, _ = lu_store
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    code, out, err = run(["summary", "--protocol", "lu2023", "--store", str(store), "--out", str(mine)], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1 and err.startswith("audit: error: ")
    assert [p.name for p in mine.iterdir()] == ["notes.txt"] and (mine / "notes.txt").read_text() == "keep me"


def test_the_default_directory_and_replacing_an_earlier_summary(lu_store, tmp_path, monkeypatch, capsys):
    store, _ = lu_store
    monkeypatch.chdir(tmp_path)
    argv = ["summary", "--protocol", "lu2023", "--store", str(store), "--strategies", "uniform,us-c"]
    assert run(argv, capsys)[0] == 0
    assert {p.name for p in (tmp_path / "reports" / "lu2023-summary").iterdir()} == FILES | {MANIFEST}
    assert run(argv, capsys)[0] == 0  # its own earlier summary is replaced
    code, _, err = run(argv[:-1] + ["uniform"], capsys)  # one with fewer strategies needs --force
    assert code == 2 and "us-c" in err
    assert run(argv[:-1] + ["uniform", "--force"], capsys)[0] == 0


@pytest.mark.parametrize("argv, message", [
    (["--protocol", "nope"], "unknown protocol 'nope'"),
    (["--protocol", "lu2023", "--datasets", "heart,nope"], "unknown data set 'nope'"),
    (["--protocol", "lu2023", "--datasets", "iris"], "'iris' is multiclass"),
    (["--protocol", "lu2023", "--strategies", "uniform,zzz"], "has no strategy 'zzz'"),
    (["--protocol", "lu2023", "--datasets", "heart,heart"], "named twice"),
    (["--protocol", "lu2023", "--trials", "0"], "--trials"),
    (["--protocol", "zhan2021"], "holds no trial of protocol 'zhan2021'"),
])
def test_bad_input_is_one_line_before_any_work(lu_store, tmp_path, capsys, argv, message):
    store, _ = lu_store
    code, out, err = run(["summary", *argv, "--store", str(store), "--out", str(tmp_path / "s")], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1 and err.startswith("audit: error: ") and message in err
    assert not (tmp_path / "s").exists()


def test_a_missing_or_foreign_store_is_one_line(tmp_path, capsys):
    code, _, err = run(["summary", "--protocol", "lu2023", "--store", str(tmp_path / "none.sqlite")], capsys)
    assert code == 2 and err == f"audit: error: no result store at {tmp_path / 'none.sqlite'}\n"
    (tmp_path / "text.sqlite").write_text("not a database")
    code, _, err = run(["summary", "--protocol", "lu2023", "--store", str(tmp_path / "text.sqlite")], capsys)
    assert code == 2 and err.startswith("audit: error: cannot read the result store") and err.count("\n") == 1
    assert (tmp_path / "text.sqlite").read_text() == "not a database"


def test_cells_with_fewer_trials_than_planned_are_counted_and_marked(lu_store, tmp_path, capsys):
    from audit.report.summary import cell_text, short_cells

    store, _ = lu_store  # 3 trials stored per cell
    code, out, err = run(["summary", "--protocol", "lu2023", "--datasets", "heart", "--strategies", "uniform,us-c,qbc",
                          "--trials", "5", "--store", str(store), "--out", str(tmp_path / "s")], capsys)
    assert code == 0, err
    assert "2 with fewer trials than planned (n=k/N in the heatmap)" in out  # qbc: not run, not short
    summary = json.loads((tmp_path / "s" / "summary.json").read_text())
    assert [(c["strategy"], c["n"]) for c in short_cells(summary)] == [("uniform", 3), ("us-c", 3)]
    uniform = next(c for c in summary["cells"] if c["strategy"] == "uniform")
    assert cell_text(uniform, "percent", 5).endswith("\nn=3/5") and "\n" not in cell_text(uniform, "percent", 3)
    code, out, err = run(["summary", "--protocol", "lu2023", "--datasets", "heart", "--trials", "3",
                          "--store", str(store), "--out", str(tmp_path / "t")], capsys)
    assert code == 0 and "fewer trials than planned" not in out


def test_an_sqlite_file_of_another_program_is_named_so(tmp_path, capsys):
    import sqlite3

    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE notes (text TEXT)")
    before = other.read_bytes()
    code, _, err = run(["summary", "--protocol", "lu2023", "--store", str(other)], capsys)
    assert code == 2 and err == (f"audit: error: cannot read the result store {other}: it is not an al-audit "
                                 "result store (no trials or rounds table)\n")
    assert other.read_bytes() == before
