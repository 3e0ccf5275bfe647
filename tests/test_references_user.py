"""A user's own published table (--references FILE.csv, `audit references check`):
the shipped schema with optional columns, every problem one line with file and line,
before any trial, and the cells compared with the user's numbers."""
import subprocess
import sys

import pytest

import audit
from audit.analysis.references import read_user_table, select

HEADER = "paper,table,dataset,strategy,metric,mean,sd,n,scale,aubc_variant"
GOOD = "mine,Table 1,sonar,uniform,accuracy,0.75,0.03,20,fraction,zhan2021_code"
DATASETS, STRATEGIES = ("sonar", "heart"), ("uniform", "us-c")


def write(tmp_path, *lines, name="mine.csv"):
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_table_without_the_optional_columns_reads(tmp_path):
    [ref] = read_user_table(write(tmp_path, HEADER, GOOD), DATASETS, STRATEGIES)
    assert (ref.mean_fraction, ref.sd, ref.n, ref.batch_size, ref.row) == (0.75, 0.03, 20, None, "")
    assert ref.source == f"{tmp_path / 'mine.csv'}:2"
    assert select([ref], dataset="sonar", strategy="uniform", batch_size=1) == [ref]  # no batch size: any


@pytest.mark.parametrize("lines, message", [
    ((HEADER, GOOD.replace("0.75", "abc")), r"mine\.csv:2: mean 'abc' is not a number"),
    ((HEADER.replace(",mean", ""), GOOD.replace(",0.75", "")), r"mine\.csv:1: lacks column\(s\) mean"),
    ((HEADER + ",colour", GOOD + ",red"), r"mine\.csv:1: has unknown column\(s\) colour"),
    ((HEADER, GOOD, GOOD.replace("sonar", "nosuch")), r"mine\.csv:3: unknown data set 'nosuch'"),
    ((HEADER, GOOD.replace("uniform", "magic")), r"mine\.csv:2: strategy 'magic' is not in the protocol"),
    ((HEADER, GOOD.replace("fraction", "percent")), r"mine\.csv:2: mean 0\.75 on the percent scale"),
    ((HEADER, GOOD + ",extra"), r"mine\.csv:2: 11 cells, expected 10"),
    ((HEADER,), r"mine\.csv has no rows"),
])
def test_each_problem_is_one_line_with_file_and_line(tmp_path, lines, message):
    with pytest.raises(audit.AuditError, match=message) as err:
        read_user_table(write(tmp_path, *lines), DATASETS, STRATEGIES)
    assert "\n" not in str(err.value)


def test_a_missing_file_is_reported(tmp_path):
    with pytest.raises(audit.AuditError, match="is not a readable file"):
        read_user_table(tmp_path / "absent.csv", DATASETS, STRATEGIES)


def cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "audit.cli.main", *args], capture_output=True, text=True, cwd=cwd)


def test_check_command(tmp_path):
    good = write(tmp_path, HEADER, GOOD)
    done = cli("references", "check", str(good), "--protocol", "zhan2021", cwd=tmp_path)
    assert done.returncode == 0 and "1 rows valid for zhan2021" in done.stdout
    bad = write(tmp_path, HEADER, GOOD.replace("0.75", "x"), name="bad.csv")
    done = cli("references", "check", str(bad), "--protocol", "zhan2021", cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "bad.csv:2" in done.stderr


def test_a_bad_table_stops_reproduce_before_any_trial(tmp_path, sonar):
    bad = write(tmp_path, HEADER, GOOD.replace("sonar", "nosuch"))
    done = cli("reproduce", "zhan2021", "--dataset", "sonar", "--strategies", "uniform", "--trials", "2",
               "--references", str(bad), "--store", "s.sqlite", "--out", "rep", cwd=tmp_path)
    assert done.returncode == 2 and "mine.csv:2: unknown data set" in done.stderr
    assert not (tmp_path / "s.sqlite").exists() and not (tmp_path / "rep").exists()


def test_cells_are_compared_with_the_users_numbers(tmp_path, sonar):
    table = write(tmp_path, HEADER, GOOD)
    replay = audit.reproduce("zhan2021", "sonar", strategies=["uniform"], trials=3, store=tmp_path / "s.sqlite",
                             out=tmp_path / "rep", references=table)
    cell = replay.cells.iloc[0]
    assert cell.published_mean == 0.75 and f"{table}:2" in cell.reference
    assert cell.welch_p is not None  # the table gave SD and n
    assert f"({table}:2)" in (tmp_path / "rep" / "report.md").read_text()
