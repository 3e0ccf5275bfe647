import pytest

from audit.analysis.reference_lint import (
    extreme_labels,
    identical_columns,
    lint_references,
    load_facts,
    mean_range,
)
from audit.analysis.references import COLUMNS
from audit.cli.main import main

HEADER = ",".join(COLUMNS)


def row(table, dataset, strategy, mean, sd="", note="", scale="fraction", paper="p"):
    return f"{paper},{table},{dataset},{dataset},{strategy},1,accuracy,{mean},{sd},100,{scale},v,{note}"


def findings(tmp_path, rows, detector, facts=None):
    directory = tmp_path / "reference_results"
    directory.mkdir(parents=True)
    (directory / "t.csv").write_text("\n".join([HEADER, *rows]) + "\n")
    from audit.analysis.references import load_references

    refs = load_references(metric=None, directory=directory, check_range=False)
    return detector(refs, facts or {})


DATASETS = ["a", "b", "c", "d", "e"]


def test_a_column_copying_uniform_is_flagged_with_data_sets_and_sources(tmp_path):
    rows = [row("T", d, "uniform", f"0.{70 + i}", "0.01") for i, d in enumerate(DATASETS)]
    rows += [row("T", d, "vr", f"0.{70 + i}", "0.01") for i, d in enumerate(DATASETS[:3])]
    rows += [row("T", "d", "vr", "0.7301", "0.02"), row("T", "e", "vr", "0.9", "0.01")]
    [found] = findings(tmp_path, rows, identical_columns)
    assert found.triggered and found.datasets == ("a", "b", "c", "d")
    assert "vr equals uniform (mean and SD as printed) on 3 of the 5 data sets" in found.finding
    assert "within 0.0002 of uniform's on 1 more (d)" in found.finding and "fell back to uniform" in found.finding
    assert found.line().endswith("[reference_results/t.csv:2,3,4,5,7,8,9,10]")


def test_a_known_cause_of_a_collapsed_column_is_named_and_still_flagged(tmp_path):
    rows = [row("T", d, "uniform", f"0.{70 + i}", "0.01", paper="lu2023") for i, d in enumerate(DATASETS)]
    rows += [row("T", d, "vr", f"0.{70 + i}", "0.01", paper="lu2023") for i, d in enumerate(DATASETS)]
    facts = {"collapsed": [{"paper": "lu2023", "strategy": "vr", "onto": "uniform", "why": "sigma read as an int"}]}
    [found] = findings(tmp_path, rows, identical_columns, facts)
    assert found.triggered and found.finding.endswith("vr fell back to uniform: sigma read as an int")
    other = {"collapsed": [{"paper": "zhan2021", "strategy": "vr", "onto": "uniform", "why": "sigma read as an int"}]}
    [found] = findings(tmp_path / "other", rows, identical_columns, other)  # another paper's cause is not this one's
    assert found.finding.endswith("vr most likely fell back to uniform")


def test_coincidences_on_a_minority_of_data_sets_are_not_flagged(tmp_path):
    rows = [row("T", d, "uniform", f"0.{70 + i}") for i, d in enumerate(DATASETS)]
    rows += [row("T", d, "qbc", f"0.{70 + i}" if i < 2 else "0.99") for i, d in enumerate(DATASETS)]
    [found] = findings(tmp_path, rows, identical_columns)
    assert not found.triggered and found.finding == "no column copies another"


def test_a_known_equivalence_is_explained_not_flagged(tmp_path):
    rows = [row("T", d, s, "0.8", "0.01") for d in DATASETS for s in ("us-c", "infodiv")]
    [found] = findings(tmp_path, rows, identical_columns, load_facts())
    assert not found.triggered and "explained, InfoDiv reduces to uncertainty sampling" in found.finding


def test_a_best_label_that_is_not_the_maximum_is_flagged(tmp_path):
    rows = [row("T", "a", "uniform", "0.95"), row("T", "a", "qbc", "0.8"), row("T", "a", "mcm", "0.85"),
            row("T", "a", "qbc", "0.8", note="BEST"), row("T", "a", "qbc", "0.8", note="WORST"),
            row("T", "b", "qbc", "0.8"), row("T", "b", "mcm", "0.7"), row("T", "b", "qbc", "0.8", note="BEST")]
    found = findings(tmp_path, rows, extreme_labels)
    assert [(f.datasets, f.triggered) for f in found] == [(("a",), True)]  # uniform is no query strategy
    assert "BEST is qbc 0.8, not the maximum; T's extreme: mcm 0.85" in found[0].finding


def test_labels_of_a_table_without_columns_are_checked_in_the_papers_full_table(tmp_path):
    rows = [row("Table 1", "a", "mcm", "84", note="BEST", scale="percent"),
            row("full", "a", "mcm", "0.84"), row("full", "a", "qbc", "0.86")]
    [found] = findings(tmp_path, rows, extreme_labels, {"full_table": {"p": "full"}})
    assert found.triggered and "full's extreme: qbc 0.86" in found.finding
    assert not findings(tmp_path / "x", rows[:2], extreme_labels, {"full_table": {"p": "full"}})[0].triggered


def test_a_mean_off_the_unit_range_after_scale_is_flagged(tmp_path):
    rows = [row("T", "a", "qbc", "84"), row("T", "b", "qbc", "84", scale="percent")]
    [found] = findings(tmp_path, rows, mean_range)
    assert found.triggered and found.datasets == ("a",) and "mean 84 (fraction) is 84" in found.finding


def test_lu2023_vr_copies_uniform_on_19_of_20_data_sets():
    """The figures the issue quotes, computed from the transcribed repository table."""
    found = {f.finding.split(": ", 1)[1].split(" (")[0]: f for f in lint_references("lu2023")
             if f.name == "identical-columns"}
    vr = found["vr equals uniform"]
    assert vr.triggered and "on 16 of the 20 data sets" in vr.finding
    assert "on 3 more (haberman, mammographic, banana)" in vr.finding
    infodiv = found["infodiv equals us-c"]
    assert not infodiv.triggered and "26 of the 26" in infodiv.finding
    assert len(found) == 2


def test_zhan2021_best_row_is_beaten_where_its_readme_says():
    beaten = {tuple(f.finding.split()[3:5]) for f in lint_references("zhan2021")
              if f.name == "extreme-labels" and f.triggered}
    assert beaten == {(d, m) for d in ("iris", "thyroid", "wine") for m in ("(accuracy):", "(roc_auc):", "(f1):")} \
        | {("appendicitis", "(roc_auc):"), ("gcloudb", "(f1):")}


def test_lint_references_command(capsys):
    assert main(["lint-references", "lu2023"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert any(line.startswith("!! identical-columns: lu2023 repository summary") and "vr" in line for line in out)
    assert main(["lint-references", "nosuch"]) == 2
    assert capsys.readouterr().err.startswith("audit: error: 'nosuch' is neither a paper")


@pytest.mark.parametrize("name", ["zhan2021", "audit/protocols/lu2023.toml"])
def test_lint_references_takes_a_protocol_or_paper(name, capsys):
    assert main(["lint-references", name]) == 0
    assert capsys.readouterr().out
