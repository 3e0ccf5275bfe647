"""Issue 16, items 10, 12, 13 and `audit --version`: bad options, bad model specs and
verdicts at tiny trial counts, each through the real command line."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from audit.analysis import compare
from audit.analysis.diagnose import counterfactual
from audit.cli.main import main
from audit.engine.store import ResultStore
from tests.test_cli import REPO, assert_one_line_error


def cli(capsys, *argv):
    """(exit code, stdout, stderr) of `audit ARGV`; an option's type rejects it while the
    command line is read, which exits (SystemExit) as the console script does."""
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def replay(tmp_path, *argv):
    return ("reproduce", *argv, "--store", str(tmp_path / "s.sqlite"), "--out", str(tmp_path / "report"),
            "--no-progress")


# --- item 10: numeric options ------------------------------------------------------------

@pytest.mark.parametrize("timeout", ["nan", "inf", "1e999"])
def test_a_non_finite_trial_timeout_is_refused_before_any_trial(capsys, tmp_path, timeout, heart):
    code, _, err = cli(capsys, *replay(tmp_path, "lu2023", "--dataset", "heart", "--strategies", "uniform",
                                       "--trials", "2", "--trial-timeout", timeout))
    assert_one_line_error(code, err, "--trial-timeout", "positive finite number of seconds", repr(timeout))
    assert not (tmp_path / "s.sqlite").exists() and not (tmp_path / "report").exists()  # no trial stored


def test_a_non_finite_max_trial_seconds_is_refused_before_any_trial(capsys, tmp_path, heart):
    store = tmp_path / "s.sqlite"
    code, _, err = cli(capsys, "run", "--protocol", "lu2023", "--datasets", "heart", "--strategies", "uniform",
                       "--trials", "2", "--max-trial-seconds", "nan", "--store", str(store), "--no-progress")
    assert_one_line_error(code, err, "--max-trial-seconds", "positive finite number of seconds")
    assert not store.exists()


@pytest.mark.parametrize("argv, option", [
    (("reproduce", "lu2023", "--dataset", "heart", "--trials", "nan"), "--trials"),
    (("reproduce", "lu2023", "--dataset", "heart", "--jobs", "two"), "--jobs"),
    (("reproduce", "lu2023", "--dataset", "heart", "--batch-size", "1.5"), "--batch-size"),
    (("reproduce", "lu2023", "--dataset", "heart", "--trial-timeout", "soon"), "--trial-timeout"),
    (("crosscheck", "--dataset", "heart", "--trials", "x"), "--trials"),
    (("runs-needed", "--protocol", "lu2023", "--dataset", "heart", "--strategies", "uniform", "--samples", "1e3"),
     "--samples"),
    (("gate", "--baseline", "b.json", "--margin", "inf"), "--margin"),
    (("gate", "--baseline", "b.json", "--margin", "1.5"), "--margin"),
    (("gate", "--baseline", "b.json", "--alpha", "five"), "--alpha"),
    (("baseline", "create", "--suite", "smoke", "--jobs", "nan"), "--jobs"),
    (("run", "--protocol", "lu2023", "--retries", "nan"), "--retries"),
    (("run", "--protocol", "lu2023", "--workers", "1.0"), "--workers"),
    (("run", "--protocol", "lu2023", "--max-trial-seconds", "inf"), "--max-trial-seconds"),
])
def test_every_numeric_option_is_checked_as_the_command_line_is_read(capsys, tmp_path, monkeypatch, argv, option):
    monkeypatch.chdir(tmp_path)  # a command that got past its options would write here
    code, _, err = cli(capsys, *argv)
    assert_one_line_error(code, err, f"argument {option}: must be")
    assert list(tmp_path.iterdir()) == []


# --- item 12: model specs and the scheduler address --------------------------------------

@pytest.mark.parametrize("models, fragment", [
    ("lr,sklearn.base.ClassifierMixin", "not a scikit-learn classifier (a concrete estimator with fit and predict)"),
    ("lr,sklearn.utils.tests.test_tags.EmptyClassifier", "test or private module"),
    ("lr,sklearn.utils._mocking.CheckingClassifier", "test or private module"),
    ("lr,lr(C=" + "-" * 100_000 + "1)", "a spec may have at most 500"),
])
def test_compat_refuses_models_that_are_not_usable_classifiers(capsys, tmp_path, models, fragment, heart):
    code, _, err = cli(capsys, "compat", "--protocol", "lu2023", "--dataset", "heart", "--models", models,
                       "--trials", "2", "--store", str(tmp_path / "s.sqlite"), "--out", str(tmp_path / "out"),
                       "--no-progress")
    assert_one_line_error(code, err, fragment)
    assert len(err) < 400 and not (tmp_path / "out").exists()


SUITE = """name = "mine"
protocol = "lu2023"
datasets = ["heart"]
strategies = ["us-fixture"]
trials = 2

[bindings.us-fixture]
implementation = "skactiveml.uncertainty"
params = {{ method = "entropy" }}
query_model = {query_model}
"""


@pytest.mark.parametrize("query_model, fragment", [
    ('{ name = "sklearn.utils.tests.test_estimator_checks.BaseBadClassifier" }', "test or private module"),
    ('{ name = "lr", params = { C = -1.0 } }', "The 'C' parameter of LogisticRegression"),
])
def test_suite_bindings_are_validated_like_command_line_specs(capsys, tmp_path, query_model, fragment, heart):
    suite, baseline = tmp_path / "mine.toml", tmp_path / "base.json"
    suite.write_text(SUITE.format(query_model=query_model))
    code, _, err = cli(capsys, "baseline", "create", "--suite", str(suite), "--out", str(baseline), "--no-progress")
    assert_one_line_error(code, err, "suite mine.toml: binding 'us-fixture': query_model:", fragment)
    assert not baseline.exists()


@pytest.mark.parametrize("address", ["not a url", "tcp://127.0.0.1", "http://127.0.0.1:8786", "tcp://host:70000"])
def test_a_malformed_scheduler_address_is_one_line_before_any_work(capsys, tmp_path, address, heart):
    store = tmp_path / "s.sqlite"
    code, _, err = cli(capsys, "run", "--protocol", "lu2023", "--datasets", "heart", "--strategies", "uniform",
                       "--trials", "2", "--executor", "dask", "--scheduler", address, "--store", str(store),
                       "--no-progress")
    assert_one_line_error(code, err, "--scheduler", "[SCHEME://]HOST:PORT", repr(address))
    assert not store.exists()


# --- item 13: diagnosis and verdicts at tiny trial counts --------------------------------

def test_two_trials_claim_no_explanation(capsys, tmp_path, sonar):
    """zhan2021 Uniform on sonar at 2 trials is discrepant at 5%; its replays' intervals
    were wider than [0, 1] and "explained" the cell."""
    code, _, err = cli(capsys, *replay(tmp_path, "zhan2021", "--dataset", "sonar", "--strategies", "uniform",
                                       "--trials", "2"))
    assert code == 0, err
    (cell,) = json.loads((tmp_path / "report" / "report.json").read_text())["strategies"]
    diagnosis = cell["diagnosis"]
    assert cell["verdict"].startswith("discrepant") and "explained by" not in err
    assert diagnosis["summary"].startswith("underpowered: 2 successful trials")
    assert diagnosis["status"] == "underpowered" and diagnosis["explained_by"] == [] and diagnosis["hypotheses"] == []
    assert cell["n_trials"] < counterfactual.MIN_DIAGNOSIS_TRIALS
    store = ResultStore(tmp_path / "s.sqlite")
    try:
        assert store.count() == 2  # the cell's own trials: no counterfactual replay ran
    finally:
        store.close()
    assert diagnosis["summary"] in (tmp_path / "report" / "report.md").read_text()


def test_no_diagnose_says_so_in_the_report(capsys, tmp_path, sonar):
    code, _, err = cli(capsys, *replay(tmp_path, "zhan2021", "--dataset", "sonar", "--strategies", "uniform",
                                       "--trials", "2", "--no-diagnose"))
    assert code == 0, err
    (cell,) = json.loads((tmp_path / "report" / "report.json").read_text())["strategies"]
    assert cell["verdict"].startswith("discrepant")
    assert cell["diagnosis"]["summary"] == "diagnosis not run (--no-diagnose)"
    html = (tmp_path / "report" / "report.html").read_text()
    assert "<td>diagnosis not run (--no-diagnose)</td></tr>" in html  # the table's diagnosis column
    assert "- uniform: diagnosis not run (--no-diagnose)" in (tmp_path / "report" / "report.md").read_text()


def test_a_consistent_verdict_on_a_wide_interval_is_flagged_low_power(capsys, tmp_path, heart):
    code, out, err = cli(capsys, *replay(tmp_path, "lu2023", "--dataset", "heart", "--strategies", "uniform",
                                         "--trials", "2"))
    assert code == 0, err
    (cell,) = json.loads((tmp_path / "report" / "report.json").read_text())["strategies"]
    assert cell["verdict"] == "consistent" and cell["low_power"] is True
    assert cell["detectable_difference"] > compare.LOW_POWER_TOLERANCE
    row = next(line for line in out.splitlines() if line.startswith("uniform "))
    assert row.endswith("consistent (low power)")
    # 100 trials of SD 0.02 can detect about 0.0056: a consistent verdict there is not flagged
    many = compare.summarise(np.random.default_rng(0).normal(0.8, 0.02, size=100))
    assert compare.detectable_difference(many) < compare.LOW_POWER_TOLERANCE
    assert not compare.low_power(many, compare.CONSISTENT)


# --- audit --version -----------------------------------------------------------------------

def test_version_prints_the_libraries_without_importing_them():
    code = ("import sys; from audit.cli.main import main\n"
            "try:\n    main(['--version'])\nexcept SystemExit as exc:\n    assert exc.code == 0, exc.code\n"
            "print(sorted(m for m in ('sklearn', 'libact', 'alipy', 'skactiveml', 'numpy') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    version, imported = done.stdout.splitlines()
    assert version.startswith("al-audit 0.1.0 (libact ") and "alipy " in version and "scikit-activeml " in version
    assert imported == "[]"
