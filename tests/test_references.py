import csv
import subprocess
import sys
from decimal import Decimal

import pytest

from audit.analysis.references import COLUMNS, REFERENCE_DIR, load_references
from audit.engine.datasets import names as load_dataset_names

PAPERS = REFERENCE_DIR.parent.parent / "shared" / "papers"
SHARED_REFERENCES = REFERENCE_DIR.parent.parent / "shared" / "references"
ROW_COUNTS = {
    "lu2023_table1.csv": 130,
    "lu2023_table8.csv": 260,
    "lu2023_table9_10.csv": 92,
    "zhan2021_tables5_7.csv": 2160,
    "lu2023_repository.csv": 494,
    "cdalbench2024_tables8_9.csv": 286,  # 2 tables x 13 methods x 11 data sets
}
PROPERTY_FILES = ["dataset_properties/zhan2021_table2.csv", "dataset_properties/lu2023_table5.csv"]
RANK_FILES = {"ranks/cdalbench2024_tables3_5.csv": (13 + 12 + 12) * 9}  # methods (Tables 4, 5: no Galaxy) x (7 sets + 2 aggregates)


def cell(table, paper, dataset, strategy, row=None, metric="accuracy", batch_size=None):
    """The single reference of `table` matching the filters."""
    found = [ref for ref in load_references(paper, dataset, strategy, metric, batch_size)
             if ref.table == table and (row is None or ref.row == row)]
    assert len(found) == 1, found
    return found[0]


def test_every_file_parses_with_the_expected_row_count():
    refs = load_references(metric=None)
    counts = {name: sum(ref.source.startswith(f"reference_results/{name}:") for ref in refs)
              for name in ROW_COUNTS}
    assert counts == ROW_COUNTS
    assert {p.name for p in REFERENCE_DIR.glob("*.csv")} == set(ROW_COUNTS)


def test_values_in_range_and_consistent():
    for ref in load_references(metric=None):
        assert ref.mean is None or 0 <= ref.mean_fraction <= 1
        assert ref.sd is None or ref.sd >= 0
        assert ref.aubc_variant == ("cdalbench_code" if ref.paper == "cdalbench2024" else f"{ref.paper}_code")
        assert ref.scale == ("fraction" if ref.table in {"Table 5", "Table 6", "Table 7", "repository summary"}
                             or ref.paper == "cdalbench2024" else "percent")
        assert ref.mean is not None or "printed as" in ref.note


@pytest.mark.parametrize("table, paper, dataset, strategy, mean, sd, n", [
    ("Table 9", "lu2023", "sonar", "uniform", 74.63, 3.79, 100),
    ("lu2023 Table 9 col [60]", "zhan2021", "sonar", "uniform", 61.7, None, 100),
    ("Table 9", "lu2023", "phishing", "uniform", 93.82, 0.48, 10),
    ("lu2023 Table 9 col [60]", "zhan2021", "spambase", "uniform", 68.5, None, 10),
    ("Table 10", "lu2023", "ex8b", "bso", 93.76, 1.82, 100),
    ("lu2023 Table 10 col [60]", "zhan2021", "checkerboard", "bso", 99.2, None, 100),
    ("Table 1", "lu2023", "sonar", "us-c", 77.62, None, 100),
    ("Table 1", "lu2023", "banana", "us-nc", 80.50, None, 10),
    ("Table 1", "lu2023", "haberman", "bmdr", 73.19, None, 100),
    ("Table 1", "lu2023", "spambase", "bso", None, None, 10),
    ("lu2023 Table 8", "zhan2021", "sonar", "uniform", 62, None, 100),
    ("lu2023 Table 8", "zhan2021", "sonar", "lal", 78, None, 100),
    ("Table 8", "lu2023", "sonar", "uniform", 74.63, None, 100),
    ("lu2023 Table 8", "zhan2021", "splice", "eer", 68, None, 100),
    ("Table 8", "lu2023", "splice", "coreset", 75.18, None, 100),
    ("lu2023 Table 8", "zhan2021", "heart", "dwus", 72, None, 100),
    ("Table 8", "lu2023", "heart", "hintsvm", 80.39, None, 100),
])
def test_lu2023_cells_match_the_paper(table, paper, dataset, strategy, mean, sd, n):
    ref = cell(table, paper, dataset, strategy)
    assert (ref.mean, ref.sd, ref.n, ref.batch_size) == (mean, sd, n, 1)


def test_lu2023_notes():
    assert cell("Table 9", "lu2023", "parkinsons", "uniform").note == "alpha5=Out;alpha1=In"
    best = cell("Table 1", "lu2023", "sonar", "us-c")
    assert best.note.startswith("BEST") and "US-C*" in best.note
    assert cell("Table 1", "lu2023", "sonar", "hintsvm").note == "WORST"
    assert "value marked *" in cell("Table 1", "lu2023", "sonar", "uniform").note
    assert "ore-Set" in cell("Table 8", "lu2023", "splice", "coreset").note


@pytest.mark.parametrize("dataset, strategy, mean, sd, n, note", [
    ("appendicitis", "uniform", 0.8395, 0.0363, 100, ""),
    ("sonar", "coreset", 0.742, 0.0353, 100, ""),
    ("tic", "infodiv", 0.872, 0.0158, 100, ""),
    ("heart", "bso", 0.893, 0.0247, 100, ""),
    ("phishing", "us-c", 0.946, 0.0049, 10, ""),
    ("clean1", "vr", None, None, 100, "printed as TLE"),
    ("checkerboard", "spal", None, None, 100, "printed as error"),
    ("spambase", "bso", None, None, 10, "printed as TLE"),
])
def test_lu2023_repository_cells(dataset, strategy, mean, sd, n, note):
    ref = cell("repository summary", "lu2023", dataset, strategy)
    assert (ref.mean, ref.sd, ref.n, ref.scale, ref.note) == (mean, sd, n, "fraction", note)


def test_lu2023_repository_agrees_with_the_paper_where_both_print_a_number():
    """Table 9/10 (mean, SD) and Table 1 (mean) are the same numbers the repository prints x 100."""
    repository = {(r.dataset, r.strategy): r for r in load_references("lu2023") if r.table == "repository summary"}
    compared = 0
    for ref in load_references("lu2023"):
        printed = ref.mean is not None and ref.strategy != "avg-17"  # Avg has no repository cell
        if ref.table in {"Table 1", "Table 9", "Table 10"} and printed:
            other = repository[ref.dataset, ref.strategy]
            assert round(other.mean * 100, 2) == ref.mean, ref
            assert ref.sd is None or round(other.sd * 100, 2) == ref.sd, ref
            compared += 1
    assert compared == 144  # Table 1: 26 x 4 (Uniform, BSO, BEST, WORST) less 6 BSO "-"; 9/10: 46


@pytest.mark.parametrize("table, row, dataset, strategy, batch_size, mean", [
    ("Table 5", "uniform-1", "sonar", "uniform", 1, 0.617),
    ("Table 5", "quire-1", "ex8b", "quire", 1, 0.8964),
    ("Table 5", "kcenter-5", "checkerboard", "coreset", 5, 0.981),
    ("Table 5", "us-1", "german", "us-nc", 1, 0.742),
    ("Table 5", "margin-2", "clean1", "margin", 2, 0.827),
    ("Table 6", "uniform-1", "sonar", "uniform", 1, 0.64),
    ("Table 6", "margin-10", "wine", "margin", 10, 0.985),
    ("Table 6", "mcm-10", "appendicitis", "mcm", 10, 0.865),
    ("Table 7", "dwus-1", "haberman", "dwus", 1, 0.191),
    ("Table 7", "best", "german", "best", 1, 0.548),
    ("Table 7", "hintSVM-1", "iris", "hintsvm", 1, None),
])
def test_zhan2021_cells_match_the_paper(table, row, dataset, strategy, batch_size, mean):
    metric = {"Table 5": "accuracy", "Table 6": "roc_auc", "Table 7": "f1"}[table]
    ref = cell(table, "zhan2021", dataset, strategy, row=row, metric=metric,
               batch_size=batch_size)
    assert (ref.mean, ref.sd, ref.n, ref.scale) == (mean, None, 100, "fraction")


def test_mean_fraction_and_printed_digits():
    assert cell("Table 1", "lu2023", "sonar", "us-c").mean_fraction == pytest.approx(0.7762)
    assert cell("Table 5", "zhan2021", "sonar", "uniform", batch_size=1).mean_fraction == 0.617
    table1 = (REFERENCE_DIR / "lu2023_table1.csv").read_text(encoding="utf-8")
    assert "lu2023,Table 1,Sonar,sonar,bso,1,accuracy,88.40," in table1


@pytest.mark.parametrize("line, problem", [
    ("p,T,r,sonar,uniform,1,accuracy,150,,100,percent,v,", "outside the percent range"),
    ("p,T,r,sonar,uniform,1,accuracy,0.5,-1,100,fraction,v,", "sd -1.0 is not >= 0"),
    ("p,T,r,sonar,uniform,1,accuracy,abc,,100,fraction,v,", "mean 'abc' is not a number"),
    ("p,T,r,sonar,uniform,1,auc,0.5,,100,fraction,v,", "unknown metric"),
    ("p,T,r,sonar,uniform,1,accuracy,0.5,,100,fraction,v", "12 cells"),
])
def test_bad_rows_are_reported_with_file_and_line(tmp_path, line, problem):
    directory = tmp_path / "reference_results"
    directory.mkdir()
    good = "p,T,r,sonar,uniform,1,accuracy,0.5,,100,fraction,v,"
    (directory / "bad.csv").write_text(f"{','.join(COLUMNS)}\n{good}\n{line}\n")
    with pytest.raises(ValueError, match=r"^reference_results/bad\.csv:3: ") as err:
        load_references(directory=directory)
    assert problem in str(err.value)


def test_transcription_reproduces_the_csv_files(tmp_path):
    if not (PAPERS.is_dir() and SHARED_REFERENCES.is_dir()):
        pytest.skip(f"paper texts or published figures not found at {PAPERS}, {SHARED_REFERENCES}")
    script = REFERENCE_DIR / "transcribe.py"
    subprocess.run([sys.executable, script, PAPERS, "--references", SHARED_REFERENCES,
                    "--out", tmp_path], check=True, capture_output=True)
    assert {p.name for p in tmp_path.glob("*.csv")} == set(ROW_COUNTS)
    for name in [*ROW_COUNTS, *PROPERTY_FILES, *RANK_FILES]:
        assert (tmp_path / name).read_bytes() == (REFERENCE_DIR / name).read_bytes(), name


# Sample cells of CDALBench's Tables 8 (query size 1) and 9 (query size 5), read off the paper text
@pytest.mark.parametrize("table, dataset, strategy, batch_size, mean, sd, wins", [
    ("Table 8", "threeclust", "margin", 1, 0.704, 0.074, "0"),
    ("Table 8", "threeclust", "random", 1, 0.721, 0.036, "0"),
    ("Table 8", "divergingsin", "coreset", 1, 0.937, 0.014, "0"),
    ("Table 8", "divergingsin", "greedy-oracle", 1, 0.957, 0.009, None),
    ("Table 8", "splice-full", "leastconfident", 1, 0.779, 0.019, "3"),
    ("Table 8", "topv2", "entropy", 1, 0.815, 0.021, "2"),
    ("Table 9", "divergingsin", "typiclust", 5, 0.916, 0.02, "0"),
    ("Table 9", "threeclust", "badge", 5, 0.72, 0.036, "2"),
    ("Table 9", "usps-enc", "bald", 5, 0.332, 0.054, "3"),
])
def test_cdalbench_cells_match_the_paper(table, dataset, strategy, batch_size, mean, sd, wins):
    ref = cell(table, "cdalbench2024", dataset, strategy, batch_size=batch_size)
    assert (ref.mean, ref.sd, ref.n, ref.batch_size, ref.scale, ref.aubc_variant) == \
        (mean, sd, 50, batch_size, "fraction", "cdalbench_code")
    assert ("Wins not printed" if wins is None else f"Wins: {wins}") in ref.note


def test_cdalbench_table9_oracle_row_is_table8s():
    oracle9 = load_references("cdalbench2024", strategy="greedy-oracle", batch_size=5)
    assert len(oracle9) == 11 and all("equals Table 8's Oracle row" in r.note for r in oracle9)
    eight = {r.dataset: (r.mean, r.sd) for r in load_references("cdalbench2024", strategy="greedy-oracle",
                                                                  batch_size=1) if r.table == "Table 8"}
    assert {r.dataset: (r.mean, r.sd) for r in oracle9} == eight


@pytest.mark.parametrize("table, dataset, strategy, mean_rank, pm", [
    ("Table 3", "splice-full", "margin", "6.8", "0.02"),
    ("Table 3", "normal", "margin", "4.8", ""),
    ("Table 3", "usps", "typiclust", "13.0", "0.02"),
    ("Table 4", "splice-full", "typiclust", "5.7", ""),
    ("Table 5", "splice-full", "typiclust", "10.0", ""),   # 4.3 ranks apart from Table 4 (the paper says 4.7)
    ("Table 5", "dna", "badge", "9.0", ""),
    ("Table 4", "encoded", "leastconfident", "6.7", ""),
])
def test_cdalbench_ranks_match_the_paper(table, dataset, strategy, mean_rank, pm):
    with open(REFERENCE_DIR / "ranks" / "cdalbench2024_tables3_5.csv", encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == RANK_FILES["ranks/cdalbench2024_tables3_5.csv"]
    found = [r for r in rows if (r["table"], r["dataset"], r["strategy"]) == (table, dataset, strategy)]
    assert [(r["mean_rank"], r["pm"], r["runs"]) for r in found] == [(mean_rank, pm, "50" if table == "Table 3" else "3")]


@pytest.mark.parametrize("dataset, strategy, table, mean, sd", [
    ("heart", "uniform", "Table 9", 80.51, 2.79),          # the paper's own table wins where it has SD
    ("heart", "bso", "Table 10", 89.30, 2.47),
    ("heart", "us-c", "repository summary", 0.8157, 0.0262),  # Table 1's BEST, without SD, comes last
    ("heart", "qbc", "repository summary", 0.813, 0.0265),    # no number in the paper at all
    ("clean1", "vr", None, None, None),                        # printed TLE: no reference
])
def test_lu2023_picks_the_paper_then_the_repository_table(dataset, strategy, table, mean, sd):
    from audit.analysis.references import pick_reference
    from audit.protocols import load_protocol

    ref = pick_reference(load_protocol("lu2023"), dataset, strategy)
    assert (ref.table, ref.mean, ref.sd) == (table, mean, sd) if ref else table is None


TIMES = REFERENCE_DIR / "timings" / "lu2023_repository_times.csv"


def _transcribe_times():
    sys.path.insert(0, str(REFERENCE_DIR / "timings"))
    try:
        import transcribe_times
    finally:
        sys.path.pop(0)
    return transcribe_times


def test_lu2023_times_cover_the_small_sets_and_every_column():
    with TIMES.open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 20 * 19  # the 20 small sets x (Uniform, 17 strategies, BSO); no large set is timed there
    assert {r["dataset"] for r in rows} == set(load_dataset_names("binary", "small"))
    seconds = _transcribe_times().seconds
    for r in rows:  # every value is its printed text read again
        assert Decimal(r["seconds"]) == seconds(r["printed"].rstrip("*")), r
        assert (r["estimated"] == "yes") == r["printed"].endswith("*"), r


@pytest.mark.parametrize("dataset, strategy, printed", [
    # ariapoy/active-learning-benchmark, results/README.md at 5ef0bdb, section "Computational Time"
    ("sonar", "bso", "0m52.329s"),
    ("sonar", "eer", "14m30.543s"),
    ("clean1", "vr", "65hr*"),
    ("splice", "eer", "605m40s"),
    ("checkerboard", "uniform", "0m22.576s"),
])
def test_lu2023_times_cells(dataset, strategy, printed):
    with TIMES.open(encoding="utf-8") as handle:
        row = next(r for r in csv.DictReader(handle) if (r["dataset"], r["strategy"]) == (dataset, strategy))
    assert row["printed"] == printed


def test_lu2023_times_transcription_reads_the_table_format():
    readme = ("## Computational Time\n\ntext\n\n| | Uniform | Core-Set |\n|:--|:--|:--|\n"
              "| Sonar | 0m2.278s | 65hr* |\n| Heart | 1m0.5s | 2m3s |\n\n## Next\n| other | table |\n")
    rows = _transcribe_times().transcribe(readme)
    assert [(r["dataset"], r["strategy"], r["seconds"], r["estimated"]) for r in rows] == [
        ("sonar", "uniform", "2.278", "no"), ("sonar", "coreset", "234000", "yes"),
        ("heart", "uniform", "60.5", "no"), ("heart", "coreset", "123", "no")]


def test_a_report_without_any_published_number_says_why():
    from audit.report.sections import report_sections

    cells = [{"strategy": "random", "reference": None}, {"strategy": "margin", "reference": None}]
    figures_only = {"protocol": {"scale": "fraction", "reference_paper": "alpbench2024", "reference_tables": []},
                    "strategies": cells, "seeds": {"skipped": []}}
    (section,) = [s for s in report_sections(figures_only) if s.title == "Published references"]
    assert [i.text for i in section.items] == [
        "none: alpbench2024 publishes no numeric table (its results are figures), so no cell has a published number "
        "and every verdict is 'no reference'"]
    tables = {**figures_only, "protocol": {**figures_only["protocol"], "reference_paper": "lu2023",
                                           "reference_tables": ["Table 9"]}}
    (section,) = [s for s in report_sections(tables) if s.title == "Published references"]
    assert section.items[0].text.startswith("none: no published number for any cell of this data set")
