"""Transcribe published AUBC tables from the paper texts into reference_results/*.csv.

Usage (from the repo root):
    uv run python reference_results/transcribe.py [PAPERS_DIR] [--references DIR] [--out OUT_DIR]

PAPERS_DIR defaults to ../shared/papers relative to the repo root, DIR (published figures
outside the papers) to ../shared/references; OUT_DIR defaults to this directory. Every
number is copied as printed (digits kept, no rescaling).
"""

import argparse
import csv
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
LU2023 = "rebenchmark-pool-based-al-binary.txt"
ZHAN2021 = "aldataset-zhan2021-benchmark.txt"
CDALBENCH = "cdalbench-cross-domain-benchmark.txt"
LU2023_REPOSITORY = "lu2023-repository-summary.csv"
REPOSITORY_TABLE = "repository summary"

COLUMNS = ["paper", "table", "row", "dataset", "strategy", "batch_size", "metric",
           "mean", "sd", "n", "scale", "aubc_variant", "note"]
DATASETS = {
    "appendicitis", "sonar", "parkinsons", "ex8b", "heart", "haberman", "ionosphere",
    "clean1", "breast", "wdbc", "australian", "diabetes", "mammographic", "ex8a", "tic",
    "german", "splice", "gcloudb", "gcloudub", "checkerboard", "spambase", "banana",
    "phoneme", "ringnorm", "twonorm", "phishing", "iris", "wine", "thyroid", "vehicle",
    "glass", "seeds", "d31", "r15",
}
LARGE = {"spambase", "banana", "phoneme", "ringnorm", "twonorm", "phishing"}
STRATEGIES = {
    "uniform": "uniform", "rs": "uniform", "bso": "bso", "us-c": "us-c", "us-nc": "us-nc",
    "us": "us-nc", "margin": "margin", "core-set": "coreset", "kcenter": "coreset",
    "graph": "graph", "hier": "hier", "infodiv": "infodiv", "mcm": "mcm",
    "hintsvm": "hintsvm", "qbc": "qbc", "quire": "quire", "albl": "albl", "dwus": "dwus",
    "vr": "vr", "eer": "eer", "bmdr": "bmdr", "spal": "spal", "lal": "lal",
}
STRATEGY_NOTES = {
    "us": "zhan2021 'us' is libact US with LR(C=0.1) = lu2023 US-NC",
    "margin": "zhan2021 'margin' is uncertainty sampling with a grid-searched LR; not us-c",
}
MISPRINTS = {"ore-Set": "Core-Set"}
NOT_RUN = {"-", "$-$", "TLE", "error"}
STAR = "* = significant difference from [60]"
ARROW = " $\\rightarrow$ "
ZHAN_METRICS = {"Table 5": "accuracy", "Table 6": "roc_auc", "Table 7": "f1"}
BEST_NOTE = "row 'best' is undefined in the paper; equals its Table 3 BSO except on wine"
REMARKS = {  # (table, row label, data set) -> remark on a suspicious printed value
    ("Table 5", "best", "wine"): "the paper's Table 3 BSO for wine is 0.946",
    ("Table 6", "best", "wine"): "the paper's Table 3 BSO for wine is 0.956",
    ("Table 7", "best", "wine"): "the paper's Table 3 BSO for wine is 0.943",
    ("Table 6", "mcm-10", "appendicitis"): "outlier: equals the Table 5 (acc) value; mcm-1/2/5 "
                                           "auc are 0.692-0.733",
    ("Table 6", "infodiv-1", "wine"): "outlier: infodiv-2/5/10 auc are 0.964-0.986",
}


def read_table(path, caption):
    """Header cells and data rows (tab-split) of the table whose caption starts with `caption`."""
    lines = path.read_text(encoding="utf-8").splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith(caption + ":")]
    if len(starts) != 1:
        raise ValueError(f"{path.name}: expected one caption {caption!r}, found {len(starts)}")
    i = starts[0] + 1
    while not lines[i].strip():
        i += 1
    header = lines[i].split("\t")
    rows = []
    for line in lines[i + 1:]:
        if not line.strip():
            break
        cells = line.split("\t")
        if len(cells) != len(header):
            raise ValueError(f"{path.name}: {caption} row {cells[0]!r} has {len(cells)} cells")
        rows.append(cells)
    return header, rows


def dataset_id(label):
    name = label.lower()
    if name not in DATASETS:
        raise ValueError(f"unknown data set label {label!r}")
    return name


def strategy_id(label):
    """Canonical strategy id and notes for a printed strategy label."""
    notes = []
    name = label.rstrip("*")
    if name in MISPRINTS:
        notes.append(f"label printed as {name!r} (misprint of {MISPRINTS[name]!r})")
        name = MISPRINTS[name]
    key = name.lower()
    if key in STRATEGY_NOTES:
        notes.append(STRATEGY_NOTES[key])
    if key not in STRATEGIES:
        notes.append(f"label {name!r} has no canonical strategy id; kept lower-cased")
    return STRATEGIES.get(key, key), notes


def value(cell):
    """The printed number without a trailing '*' ('' if not run) and notes about the cell."""
    if cell in NOT_RUN:
        return "", [f"printed as {cell}"]
    number = cell.rstrip("*")
    float(number)  # raises on anything that is not a number
    return number, ([f"value marked * ({STAR})"] if number != cell else [])


def trials(dataset):
    """Trials per data set as lu2023 states for both papers: 100 if n < 2000, else 10."""
    return 10 if dataset in LARGE else 100


def record(paper, table, row, dataset, strategy, mean, notes, metric="accuracy",
           batch_size=1, sd="", n=None, scale="percent"):
    return {
        "paper": paper, "table": table, "row": row, "dataset": dataset,
        "strategy": strategy, "batch_size": batch_size, "metric": metric, "mean": mean,
        "sd": sd, "n": trials(dataset) if n is None else n, "scale": scale,
        "aubc_variant": f"{paper}_code", "note": "; ".join(notes),
    }


def labelled(paper, table, label, column, cell, qs_cell, extra_notes):
    """A BEST/WORST cell: the value with the strategy printed in the *_QS column."""
    mean, notes = value(cell)
    strategy, qs_notes = strategy_id(qs_cell)
    notes = [column, *notes, *qs_notes]
    if qs_cell.endswith("*"):
        notes.append(f"{column}_QS printed as {qs_cell} ({STAR})")
    if paper == "zhan2021" and strategy in {"coreset", "graph", "hier", "infodiv", "mcm"}:
        notes.append("batch size not stated")
    return record(paper, table, label, dataset_id(label), strategy, mean, notes + extra_notes)


def lu2023_table1(papers):
    _, rows = read_table(papers / LU2023, "Table 1")
    out = []
    for label, uniform, bso, avg, best, best_qs, worst, worst_qs in rows:
        dataset = dataset_id(label)
        for strategy, cell in (("uniform", uniform), ("bso", bso)):
            mean, notes = value(cell)
            out.append(record("lu2023", "Table 1", label, dataset, strategy, mean, notes))
        mean, notes = value(avg)
        notes = ["Avg: mean of the 17 query strategies' mean AUBC (Uniform and BSO excluded)",
                 *notes]
        out.append(record("lu2023", "Table 1", label, dataset, "avg-17", mean, notes))
        out.append(labelled("lu2023", "Table 1", label, "BEST", best, best_qs, []))
        out.append(labelled("lu2023", "Table 1", label, "WORST", worst, worst_qs, []))
    return out


def lu2023_table8(papers):
    header, rows = read_table(papers / LU2023, "Table 8")
    out = []
    sides = (("zhan2021", "lu2023 Table 8",
              ["[60]'s Table 3 as reported by lu2023 (left of the arrow)"]),
             ("lu2023", "Table 8", ["right of the arrow"]))
    for label, *cells in rows:
        split = {name: cell.split(ARROW) for name, cell in zip(header[1:], cells)}
        for side, (paper, table, side_note) in enumerate(sides):
            for column, strategy in (("Uniform", "uniform"), ("BSO", "bso"), ("Avg", "avg-17")):
                mean, notes = value(split[column][side])
                if column == "Avg":
                    notes = ["Avg column (mean of query strategies' mean AUBC)", *notes]
                out.append(record(paper, table, label, dataset_id(label), strategy, mean,
                                  notes + side_note))
            for column in ("BEST", "WORST"):
                out.append(labelled(paper, table, label, column, split[column][side],
                                    split[column + "_QS"][side], side_note))
    return out


def lu2023_tables9_10(papers):
    out = []
    for table, strategy in (("Table 9", "uniform"), ("Table 10", "bso")):
        _, rows = read_table(papers / LU2023, table)
        for label, mean, sd, reported, alpha5, alpha1 in rows:
            dataset = dataset_id(label)
            out.append(record("lu2023", table, label, dataset, strategy, mean,
                              [f"alpha5={alpha5};alpha1={alpha1}"], sd=sd))
            out.append(record("zhan2021", f"lu2023 {table} col [60]", label, dataset, strategy,
                              reported, ["as reported by lu2023 in column '[60] (%)'"]))
    return out


def zhan2021_tables5_7(papers):
    out = []
    for table, metric in ZHAN_METRICS.items():
        header, rows = read_table(papers / ZHAN2021, table)
        for label, *cells in rows:
            if label == "best":
                strategy, batch_size = "best", 1
                row_notes = [BEST_NOTE]
            else:
                name, batch = re.fullmatch(r"(.+)-(\d+)", label).groups()
                (strategy, row_notes), batch_size = strategy_id(name), int(batch)
            for column, cell in zip(header[1:], cells):
                dataset = dataset_id(column)
                mean, notes = value(cell)
                decimals = len(mean.partition(".")[2])
                if decimals > 3:
                    notes.append(f"printed with {decimals} decimals (the table otherwise has <= 3)")
                if (table, label, dataset) in REMARKS:
                    notes.append(REMARKS[table, label, dataset])
                out.append(record("zhan2021", table, label, dataset, strategy, mean,
                                  row_notes + notes, metric=metric, batch_size=batch_size,
                                  n=100, scale="fraction"))
    return out


def lu2023_repository(references):
    """The lu2023 authors' repository Summary Table (already one row per cell, as fractions)."""
    out = []
    with open(references / LU2023_REPOSITORY, encoding="utf-8", newline="") as f:
        for cells in csv.DictReader(f):
            if cells["printed_as"] and (cells["mean"] or cells["sd"]):
                raise ValueError(f"{LU2023_REPOSITORY}: {cells['dataset']} {cells['strategy_as_printed']} "
                                 "has both a number and a printed word")
            mean, notes = value(cells["printed_as"] or cells["mean"])
            strategy, label_notes = strategy_id(cells["strategy_as_printed"])
            notes = [*notes, *label_notes] + ([cells["note"]] if cells["note"] else [])
            out.append(record("lu2023", REPOSITORY_TABLE, cells["dataset"], dataset_id(cells["dataset"]),
                              strategy, mean, notes, sd=cells["sd"], scale="fraction"))
    return out


PROPERTY_COLUMNS = ["paper", "table", "row", "dataset", "d", "n", "classes", "imbalance_ratio", "note"]
ZHAN_TABLE2_NAMES = {  # zhan2021 Table 2's long names -> registry ids
    "Breast Cancer": "breast", "Statlog (Australian)": "australian", "Statlog (German)": "german",
    "MUSK (Clean1)": "clean1", "Molecular Biology (Splice)": "splice", "Statlog (Vehicle)": "vehicle",
    "Gaussian Cloud Balance": "gcloudb", "Gaussian Cloud Unbalance": "gcloudub",
    "XOR (Checkerboard2$\\times$2)": "checkerboard",
}


def zhan2021_table2(papers):
    """zhan2021 Table 2: d, n and K of its 20 data sets (n printed with thousands commas)."""
    _, rows = read_table(papers / ZHAN2021, "Table 2")
    return [{"paper": "zhan2021", "table": "Table 2", "row": label,
             "dataset": dataset_id(ZHAN_TABLE2_NAMES.get(label, label)), "d": d, "n": n.replace(",", ""),
             "classes": k, "imbalance_ratio": "", "note": "n printed with a thousands comma" if "," in n else ""}
            for label, _properties, d, n, k, _source, _literature in rows]


def lu2023_table5(papers):
    """lu2023 Table 5 (revision of [60]'s Table 2): `[60] -> new version` of r (IR), d and n;
    the left side is a zhan2021 row as lu2023 quotes it, the right side lu2023's."""
    _, rows = read_table(papers / LU2023, "Table 5")
    out = []
    for label, _property, *cells in rows:
        split = [cell.split(ARROW.strip()) for cell in cells]
        for side, (paper, table) in enumerate((("zhan2021", "lu2023 Table 5"), ("lu2023", "Table 5"))):
            ratio, d, n = (parts[side] if len(parts) == 2 else parts[0] for parts in split)
            out.append({"paper": paper, "table": table, "row": label, "dataset": dataset_id(label), "d": d,
                        "n": n, "classes": "", "imbalance_ratio": ratio,
                        "note": "left of the arrow" if side == 0 else "right of the arrow (new version)"})
    return out


# CDALBench (paper id cdalbench2024): its column labels -> data-set ids (registry ids where the
# registry has the set; the encoded and image/text sets keep the paper's name, lower-cased).
# Splice is LIBSVM's train and test files, registry id splice-full (`splice` is the train part only).
CDAL_DATASETS = {
    "Splice": "splice-full", "SpliceEnc": "splice-enc", "DNA": "dna", "DNAEnc": "dna-enc", "USPS": "usps",
    "USPSEnc": "usps-enc", "Cifar10Enc": "cifar10-enc", "FMnistEnc": "fmnist-enc", "TopV2": "topv2",
    "Diverging Sine": "divergingsin", "DivergingSin": "divergingsin", "ThreeClust": "threeclust",
    "Cifar10": "cifar10", "FMnist": "fmnist", "News": "news",
    "Normal": "normal", "Semi": "semi", "Unencoded": "unencoded", "Encoded": "encoded",
}
CDAL_STRATEGIES = {"Oracle": "greedy-oracle", "LeastConf": "leastconfident", "LeastConfident": "leastconfident"}
CDAL_NOTES = {
    "threeclust": "ThreeClust is the Honeypot set (Sec. 8)",
    "normal": "aggregate column: un-encoded data sets", "semi": "aggregate column: encoded data sets",
    "unencoded": "aggregate column: un-encoded data sets", "encoded": "aggregate column: encoded data sets",
}
CDAL_QUERY_SIZES = {"Table 8": 1, "Table 9": 5}
PM = "$\\pm$"


def cdal_strategy(label):
    return CDAL_STRATEGIES.get(label, label.lower())


def cell_lines(path, caption):
    """(header labels, {row label: cells}) of a table printed one cell per line (CDALBench's
    Tables 8-14): the column labels up to the first row label, then each row label followed by
    its cells; a row with one cell more than the data columns starts with its "Wins" count."""
    lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    start = [i for i, line in enumerate(lines) if line.startswith(caption + ":")]
    if len(start) != 1:
        raise ValueError(f"{path.name}: expected one caption {caption!r}, found {len(start)}")
    i = start[0] + 1
    header = []
    while lines[i] != "Oracle":
        header.append(lines[i])
        i += 1
    rows, label = {}, None
    for line in lines[i:]:
        if line.startswith("Table ") or line.startswith("Appendix "):
            break
        if line[0].isalpha():
            label = line
            rows[label] = []
        else:
            rows[label].append(line)
    return header, rows


def cdalbench_tables8_9(papers):
    """Tables 8 (query size 1) and 9 (query size 5): AUC mean +- SD per method and data set,
    50 runs; the Wins column in the note. Table 9's Oracle row is compared with Table 8's."""
    out, oracle = [], {}
    for table, query_size in CDAL_QUERY_SIZES.items():
        header, rows = cell_lines(papers / CDALBENCH, table)
        wins_label, columns = header[0], header[1:]
        for label, cells in rows.items():
            notes = []
            if len(cells) == len(columns) + 1:
                notes.append(f"{wins_label}: {cells[0]}")
                cells = cells[1:]
            elif len(cells) != len(columns):
                raise ValueError(f"{table} row {label!r} has {len(cells)} cells for {len(columns)} columns")
            else:
                notes.append(f"{wins_label} not printed")
            if label == "Oracle":
                oracle[table] = cells
                if table != "Table 8" and cells == oracle["Table 8"]:
                    notes.append("every cell equals Table 8's Oracle row (query size 1)")
            for column, cell in zip(columns, cells):
                mean, _, sd = cell.partition(PM)
                float(mean), float(sd)  # raises on anything that is not a number
                dataset = CDAL_DATASETS[column]
                row = record("cdalbench2024", table, label, dataset, cdal_strategy(label), mean,
                             notes + ([CDAL_NOTES[dataset]] if dataset in CDAL_NOTES else []),
                             batch_size=query_size, sd=sd, n=50, scale="fraction")
                # the released logger and table script average all B + 1 accuracies (docs/cdalbench.md)
                out.append({**row, "aubc_variant": "cdalbench_code"})
    return out


RANK_COLUMNS = ["paper", "table", "row", "dataset", "strategy", "mean_rank", "pm", "runs", "note"]
CDAL_RANK_RUNS = {"Table 3": 50, "Table 4": 3, "Table 5": 3}
CDAL_RANK_NOTES = {
    "Table 3": "ranks averaged over runs and query sizes; '+-' as printed (the paper does not say what it is)",
    "Table 4": "first random draw of 3 runs from the pool of 50",
    "Table 5": "second random draw of 3 runs from the pool of 50",
}


def cdalbench_ranks(papers):
    """Tables 3 (50 runs), 4 and 5 (two draws of 3 runs): mean ranks per method and data set."""
    out = []
    for table, runs in CDAL_RANK_RUNS.items():
        header, rows = read_table(papers / CDALBENCH, table)
        for label, *cells in rows:
            for column, cell in zip(header[1:], cells):
                mean, _, pm = cell.partition(PM)
                float(mean)
                dataset = CDAL_DATASETS[column]
                notes = [CDAL_RANK_NOTES[table]] + ([CDAL_NOTES[dataset]] if dataset in CDAL_NOTES else [])
                out.append({"paper": "cdalbench2024", "table": table, "row": label, "dataset": dataset,
                            "strategy": cdal_strategy(label), "mean_rank": mean, "pm": pm, "runs": runs,
                            "note": "; ".join(notes)})
    return out


# output file -> (transcription, which source directory it reads: "papers" or "references")
OUTPUTS = {
    "lu2023_table1.csv": (lu2023_table1, "papers"),
    "lu2023_table8.csv": (lu2023_table8, "papers"),
    "lu2023_table9_10.csv": (lu2023_tables9_10, "papers"),
    "zhan2021_tables5_7.csv": (zhan2021_tables5_7, "papers"),
    "lu2023_repository.csv": (lu2023_repository, "references"),
    "cdalbench2024_tables8_9.csv": (cdalbench_tables8_9, "papers"),
}
# Data-set properties as the papers print them (a subdirectory: not AUBC references)
PROPERTY_OUTPUTS = {
    "dataset_properties/zhan2021_table2.csv": zhan2021_table2,
    "dataset_properties/lu2023_table5.csv": lu2023_table5,
}


# Mean ranks (not AUBCs, so not read by load_references): their own columns, their own directory
RANK_OUTPUTS = {
    "ranks/cdalbench2024_tables3_5.csv": cdalbench_ranks,
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("papers", nargs="?", type=Path, default=REPO / ".." / "shared" / "papers")
    parser.add_argument("--references", type=Path, default=REPO / ".." / "shared" / "references")
    parser.add_argument("--out", type=Path, default=HERE)
    args = parser.parse_args()
    jobs = [(name, transcribe, getattr(args, source), COLUMNS) for name, (transcribe, source) in OUTPUTS.items()]
    jobs += [(name, transcribe, args.papers, PROPERTY_COLUMNS) for name, transcribe in PROPERTY_OUTPUTS.items()]
    jobs += [(name, transcribe, args.papers, RANK_COLUMNS) for name, transcribe in RANK_OUTPUTS.items()]
    for name, transcribe, source, columns in jobs:
        rows = transcribe(source)
        (args.out / name).parent.mkdir(exist_ok=True)
        with open(args.out / name, "w", encoding="utf-8", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=columns, lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
        print(f"{name}: {len(rows)} rows")


if __name__ == "__main__":
    main()
