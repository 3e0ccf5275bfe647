"""The command line: outputs, and one clear line with a non-zero exit for every bad input."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from audit.cli.main import main
from audit.engine.datasets import resolve_data_dir

REPO = Path(__file__).resolve().parent.parent


def run(capsys, *argv):
    try:
        code = main(list(argv))
    except SystemExit as exc:  # an option's type refused its value while the command line was read
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code, err, *fragments):
    assert code == 2
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("audit: error: ")
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.fixture
def outdir(tmp_path):
    return tmp_path / "report"


def reproduce_args(tmp_path, outdir, *extra):
    return ("reproduce", *extra, "--store", str(tmp_path / "s.sqlite"), "--out", str(outdir), "--no-progress")


@pytest.mark.parametrize("argv, fragments", [
    (("nope", "--dataset", "sonar"), ("unknown protocol 'nope'", "lu2023", "zhan2021")),
    (("lu2023", "--dataset", "sonr"), ("unknown data set 'sonr'", "sonar", "heart")),
    (("lu2023", "--dataset", "sonar", "--strategies", "uniform,magic"), ("no strategy 'magic'", "us-c")),
    (("lu2023", "--dataset", "sonar", "--trials", "0"), ("argument --trials: must be a positive integer",)),
    (("lu2023", "--dataset", "sonar", "--trials", "-2"), ("argument --trials: must be a positive integer",)),
    (("lu2023", "--dataset", "iris"), ("covers binary data sets", "multiclass")),
])
def test_bad_arguments(capsys, tmp_path, outdir, argv, fragments):
    code, _, err = run(capsys, *reproduce_args(tmp_path, outdir, *argv))
    assert_one_line_error(code, err, *fragments)
    assert not outdir.exists()


def test_missing_data_file(capsys, tmp_path, outdir):
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = run(capsys, *reproduce_args(tmp_path, outdir, "lu2023", "--dataset", "sonar",
                                               "--data-dir", str(empty)))
    assert_one_line_error(code, err, "not found", "--data-dir")
    assert not outdir.exists()


@pytest.mark.parametrize("damage, fragment", [
    (lambda b: b[:-40] + b"9" + b[-39:], "checksum mismatch"),
    (lambda b: b[: len(b) // 2], "checksum mismatch"),
])
def test_corrupt_or_altered_data_file(capsys, tmp_path, outdir, sonar, damage, fragment):
    data = tmp_path / "data"
    data.mkdir()
    (data / "sonar-svmstyle.txt").write_bytes(damage(sonar.path.read_bytes()))
    code, _, err = run(capsys, *reproduce_args(tmp_path, outdir, "lu2023", "--dataset", "sonar",
                                               "--data-dir", str(data)))
    assert_one_line_error(code, err, fragment)


def test_budget_larger_than_pool(capsys, tmp_path, outdir, protocol_file, sonar):
    path = protocol_file(replace={'size = "pool"': "size = 500"})
    code, _, err = run(capsys, *reproduce_args(tmp_path, outdir, str(path), "--dataset", "sonar"))
    assert_one_line_error(code, err, "budget 500 is larger than the unlabeled pool (104 rows)")
    assert not outdir.exists()


def test_seeds_whose_initial_set_misses_a_class_are_skipped_and_reported(capsys, tmp_path, outdir,
                                                                        protocol_file, sonar):
    path = protocol_file(replace={"min_per_class = 1": "min_per_class = 9", 'size = "pool"': "size = 5"})
    code, out, err = run(capsys, *reproduce_args(tmp_path, outdir, str(path), "--dataset", "sonar",
                                                 "--strategies", "uniform", "--trials", "6"))
    assert code == 0, err
    report = json.loads((outdir / "report.json").read_text())
    skipped = report["seeds"]["skipped"]
    assert skipped and all("fewer than 9 of some class" in why for _, why in skipped)
    assert len(report["seeds"]["trial_seeds"]) == 6
    assert not set(report["seeds"]["trial_seeds"]) & {s for s, _ in skipped}
    assert f"skipping trial seed {skipped[0][0]}" in err
    assert "## Skipped seeds" in (outdir / "report.md").read_text()


def test_strategy_failing_mid_trial_is_recorded_and_the_run_goes_on(capsys, tmp_path, outdir, protocol_file,
                                                                    test_strategies, sonar):
    path = protocol_file(
        replace={"strategy = 1126": 'strategy = "trial"', 'size = "pool"': "size = 6"},
        append='\n[strategies.broken]\nimplementation = "test.fails"\nparams = { fail_seeds = [1] }\n')
    code, out, err = run(capsys, *reproduce_args(tmp_path, outdir, str(path), "--dataset", "sonar",
                                                 "--strategies", "uniform,broken", "--trials", "3"))
    assert code == 0, err
    cells = {c["strategy"]: c for c in json.loads((outdir / "report.json").read_text())["strategies"]}
    assert cells["broken"]["n_trials"] == 2 and cells["broken"]["n_errors"] == 1
    assert cells["broken"]["errors"][0]["trial_seed"] == 1
    assert "Singular matrix" in cells["broken"]["errors"][0]["error"]
    assert cells["uniform"]["n_trials"] == 3
    assert "2 (1 errors)" in out
    assert "trial seed 1 (error): LinAlgError" in (outdir / "report.md").read_text()


def test_reproduce_writes_the_report_files(capsys, tmp_path, outdir, sonar):
    code, out, err = run(capsys, *reproduce_args(tmp_path, outdir, "zhan2021", "--dataset", "sonar",
                                                 "--strategies", "uniform", "--trials", "4"))
    assert code == 0, err
    assert {p.name for p in outdir.iterdir()} == {"report.md", "report.json", "report.html", "per_trial.csv",
                                                  "learning_curve.png", "forest_plot.png", ".al-audit-report.json"}
    report = json.loads((outdir / "report.json").read_text())
    (cell,) = report["strategies"]
    for key in ("strategy", "n_trials", "mean", "sd", "ci95", "ci99", "published_mean", "verdict"):
        assert key in cell
    assert cell["published_mean"] == pytest.approx(0.617)
    assert cell["reference"]["table"] == "Table 5" and cell["reference"]["row"] == "uniform-1"
    assert report["protocol"]["aubc_variant"] == "trapezoid"
    assert report["environment"]["libact"] == "0.1.6"
    assert report["seeds"]["trial_seeds"] == [0, 1, 2, 3]
    rows = (outdir / "per_trial.csv").read_text().splitlines()
    assert rows[0].startswith("strategy,trial_seed,aubc") and len(rows) == 5
    assert (outdir / "learning_curve.png").read_bytes()[:4] == b"\x89PNG"
    for text in ("protocol zhan2021", "AUBC trapezoid", "trial seeds 0-3", "libact 0.1.6", "0.6170"):
        assert text in out


def test_datasets_command_lists_the_registry(capsys):
    code, out, _ = run(capsys, "datasets")
    assert code == 0
    assert f"data directory: {resolve_data_dir()}" in out
    sonar_line = next(line for line in out.splitlines() if line.startswith("sonar"))
    assert "ok" in sonar_line and "97/111" in sonar_line
    assert len([line for line in out.splitlines() if line.split() and line.split()[0] in
                ("iris", "phishing", "tic", "d31")]) == 4


def test_protocols_commands(capsys):
    code, out, _ = run(capsys, "protocols")
    assert code == 0 and "lu2023" in out and "zhan2021" in out
    code, out, _ = run(capsys, "protocols", "show", "lu2023")
    assert code == 0 and 'variant = "lu2023_code"' in out and "spec hash" in out
    code, out, _ = run(capsys, "protocols", "show", "lu2023", "--json")
    assert json.loads(out)["split"]["test_ratio"] == 0.4
    code, _, err = run(capsys, "protocols", "show", "nope")
    assert_one_line_error(code, err, "unknown protocol 'nope'")


def test_console_script_runs_without_a_traceback_on_bad_input(tmp_path):
    audit = shutil.which("audit", path=str(Path(sys.executable).parent))
    assert audit, "the console script `audit` is installed with the project"
    proc = subprocess.run([audit, "reproduce", "lu2023", "--dataset", "nope"], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("audit: error: unknown data set 'nope'")
    assert "Traceback" not in proc.stderr


def test_a_trial_over_the_time_limit_is_recorded_as_tle(capsys, tmp_path, outdir, protocol_file,
                                                         test_strategies, sonar):
    # Generous limit: uniform finishes well within it even on a loaded machine; "slow" (1 s a query) cannot.
    path = protocol_file(append='\n[strategies.slow]\nimplementation = "test.sleeps"\nparams = { seconds = 1.0 }\n')
    code, out, err = run(capsys, *reproduce_args(tmp_path, outdir, str(path), "--dataset", "sonar",
                                                 "--strategies", "uniform,slow", "--trials", "2",
                                                 "--trial-timeout", "4"))
    assert code == 0, err
    cells = {c["strategy"]: c for c in json.loads((outdir / "report.json").read_text())["strategies"]}
    assert cells["slow"]["n_tle"] == 2 and cells["slow"]["n_trials"] == 0
    assert cells["slow"]["errors"][0]["status"] == "tle"
    assert "time limit of 4 s per trial exceeded" in cells["slow"]["errors"][0]["error"]
    assert cells["uniform"]["n_trials"] == 2 and cells["uniform"]["n_tle"] == 0
    assert "0 (2 TLE)" in out


def test_plan_and_time_estimate_are_printed(capsys, tmp_path, outdir, sonar):
    code, _, err = run(capsys, *reproduce_args(tmp_path, outdir, "lu2023", "--dataset", "sonar",
                                               "--strategies", "uniform,us-c", "--trials", "3"))
    assert code == 0
    assert "plan: 2 strategies (uniform, us-c) x 3 trials on sonar, 6 to run, 0 already stored" in err
    # longest first: us-c (native.margin, 0.39 s on sonar) before uniform (0.31 s); the
    # estimate comes after the first result, uniform's seconds expected until measured
    assert "estimate: about" in err and "first trial: us-c" in err and "expected: uniform" in err


def test_batch_size_override_changes_the_protocol_and_the_reference(capsys, tmp_path, outdir, sonar):
    code, out, err = run(capsys, *reproduce_args(tmp_path, outdir, "zhan2021", "--dataset", "sonar",
                                                 "--strategies", "uniform", "--trials", "2", "--batch-size", "5"))
    assert code == 0, err
    report = json.loads((outdir / "report.json").read_text())
    assert report["protocol"]["batch_size"] == 5
    assert report["strategies"][0]["reference"]["row"] == "uniform-5"
    assert report["strategies"][0]["published_mean"] == pytest.approx(0.59)
    code, _, err = run(capsys, *reproduce_args(tmp_path, outdir, "zhan2021", "--dataset", "sonar",
                                               "--batch-size", "0"))
    assert_one_line_error(code, err, "argument --batch-size: must be a positive integer")


def test_strategies_command_prints_the_capability_matrix(capsys):
    code, out, _ = run(capsys, "strategies", "--protocol", "lu2023")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["protocol", "strategy", "implementation"]
    us_nc = next(line for line in lines if line.split()[1:2] == ["us-nc"])
    assert "libact.uncertainty" in us_nc and "lr(C=0.1)" in us_nc and "available" in us_nc
    assert "20 of 20 bound strategies available here" in out  # 17 strategies + uniform + 2 oracles
    vr = next(line for line in lines if line.split()[1:2] == ["vr"])
    assert vr.split()[2:4] == ["native.vr", "native"] and " available " in vr  # libact's VR re-implemented


def test_compat_prints_the_grid_and_writes_its_files(capsys, tmp_path):
    out = tmp_path / "compat"
    code, stdout, _ = run(capsys, "compat", "--protocol", "lu2023", "--dataset", "sonar", "--models", "lr,svm-rbf",
                          "--trials", "2", "--store", str(tmp_path / "s.sqlite"), "--out", str(out), "--no-progress")
    assert code == 0
    assert "task svm-rbf: " in stdout and f"report: {out}/report.md, compat.csv, compat.png" in stdout
    assert {p.name for p in out.iterdir()} >= {"compat.csv", "compat.png", "report.md"}


@pytest.mark.parametrize("argv, fragment", [
    (("--dataset", "sonar", "--datasets", "sonar,heart"), "either --dataset NAME or --datasets"),
    (("--models", "lr"), "at least two models"),
    (("--dataset", "sonr"), "unknown data set 'sonr'"),
    (("--models", "lr,knn(n_neighbors=0, weights='uniform')"), "'n_neighbors' parameter of KNeighborsClassifier"),
    (("--models", "lr,sklearn.linear_model.Ridge"), "is not a scikit-learn classifier"),
    (("--models", "knn,knn()"), "names one model twice: knn = knn()"),
])
def test_compat_bad_input(capsys, tmp_path, argv, fragment):
    argv = argv if any(a.startswith("--dataset") for a in argv) else ("--dataset", "sonar", *argv)
    code, _, err = run(capsys, "compat", "--protocol", "lu2023", *argv, "--store", str(tmp_path / "s.sqlite"),
                       "--out", str(tmp_path / "out"))
    assert_one_line_error(code, err, fragment)
    assert not (tmp_path / "out").exists()


def test_unavailable_strategies_are_rows_of_every_report_with_their_reason(tmp_path, lu2023):
    import dataclasses

    from audit.analysis.reproduce import ReproduceRequest, reproduce
    from audit.report.sections import format_table

    libact_vr = dataclasses.replace(lu2023.strategy("vr"), implementation="libact.vr")  # its extension is not built
    protocol = dataclasses.replace(lu2023, budget_size=3, strategies={
        "uniform": lu2023.strategy("uniform"), "vr": libact_vr})
    outcome = reproduce(ReproduceRequest(protocol, "sonar", trials=2, store=tmp_path / "s.sqlite",
                                         out=tmp_path / "out", progress=False, no_diagnose=True))
    lines = format_table(outcome.report).splitlines()
    for sid, reason in (("vr", "VarianceReduction C extension"),):
        row = next(line for line in lines if line.split()[:1] == [sid])
        assert row.endswith("unavailable (reason below)")
        assert any(line.startswith(f"{sid} unavailable: ") and reason in line for line in lines)
        assert f"{sid} unavailable: " in (tmp_path / "out" / "report.md").read_text()
    cells = {c["strategy"]: c for c in json.loads((tmp_path / "out" / "report.json").read_text())["strategies"]}
    assert cells["vr"]["status"] == "unavailable" and cells["uniform"]["n_trials"] == 2
