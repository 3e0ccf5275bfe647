"""Data sets published as train and test files (CDALBench's Splice, DNA, USPS): fetching from a
file:// mirror, the trust-on-first-fetch pins, loading train rows then test rows, the fixed
split under method "given", and the refusals (tampered, a user's file, absent). The real
files cannot be fetched here (no network): what needs them is skipped with the reason."""
from __future__ import annotations

import bz2
import dataclasses
import hashlib
import json

import numpy as np
import pytest

from audit.analysis.summary import SummaryRequest, summary_table
from audit.cli.main import main
from audit.engine import datasets as D
from audit.engine.datasets import DataError
from audit.engine.runner import TrialResult, TrialTask, execute_task, run_trial
from audit.engine.splits import plan_seeds, seed_split
from audit.engine.store import ResultStore, fingerprint_details
from audit.protocols import ModelSpec, load_protocol
from tests.conftest import one_line_error

# dna's shape: 180 features, labels 1..3; the train part has every class
DNA_TRAIN = "1 1:0.5 3:1\n2 2:1\n3 1:0.2 2:0.1\n1 1:0.9\n2 4:1\n3 5:1\n1 6:1\n2 7:1\n3 8:1\n1 9:1\n2 10:1\n3 11:1\n"
DNA_TEST = "2 1:0.1 180:1\n3 2:0.3\n1 3:0.7\n"
# usps's shape: 256 features, labels 1..10, published bz2-compressed
USPS_TRAIN = "".join(f"{k % 10 + 1} {k % 256 + 1}:{k / 10:.1f} 256:1\n" for k in range(30))
USPS_TEST = "".join(f"{k % 10 + 1} {k + 1}:0.5\n" for k in range(10))


@pytest.fixture
def isolated(monkeypatch, tmp_path):
    """No data directory named, the shared one without these files, the cache in tmp_path."""
    monkeypatch.delenv(D.DATA_DIR_ENV, raising=False)
    monkeypatch.delenv(D.DATA_URL_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(D, "REPO_DATA_DIR", tmp_path / "shared")


@pytest.fixture
def mirror(isolated, monkeypatch, tmp_path):
    """A file:// mirror holding dna's and usps's files (usps as .bz2), as $AL_AUDIT_DATA_URL."""
    directory = tmp_path / "mirror"
    directory.mkdir()
    (directory / "dna.scale.tr").write_text(DNA_TRAIN)
    (directory / "dna.scale.t").write_text(DNA_TEST)
    (directory / "usps.bz2").write_bytes(bz2.compress(USPS_TRAIN.encode()))
    (directory / "usps.t.bz2").write_bytes(bz2.compress(USPS_TEST.encode()))
    monkeypatch.setenv(D.DATA_URL_ENV, directory.as_uri())
    return directory


def files_in(directory) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def test_registry_holds_only_what_the_released_loaders_state():
    splice, dna, usps = (D.get_info(name) for name in ("splice-full", "dna", "usps"))
    assert [info.d for info in (splice, dna, usps)] == [60, 180, 256]  # load_svmlight_file(n_features=...)
    assert [f.name for f in splice.parts.train + splice.parts.test] == ["splice", "splice.t"]
    assert [f.name for f in dna.parts.files] == ["dna.scale.tr", "dna.scale.t"]  # dna.scale.val unused
    assert [f.name for f in usps.parts.files] == ["usps.bz2", "usps.t.bz2"]
    for info in (splice, dna, usps):
        assert info.task == "train-test" and info.n == 0 and info.sha256 == ""  # not known here
        assert all(f.sha256 == "" for f in info.parts.files)
    assert D.get_info("splice-cdalbench") is splice and D.get_info("splice").n == 1000


def test_fetch_pins_each_file_and_loads_train_then_test_rows(mirror, tmp_path):
    cache = tmp_path / "xdg" / "al-audit" / "datasets"
    assert D.fetch("dna") == cache
    assert files_in(cache) == ["dna.scale.t", "dna.scale.t.al-audit-pin.json",
                               "dna.scale.tr", "dna.scale.tr.al-audit-pin.json"]
    for name in ("dna.scale.tr", "dna.scale.t"):
        pin = json.loads((cache / f"{name}.al-audit-pin.json").read_text())
        published = (mirror / name).read_bytes()
        assert pin["sha256"] == hashlib.sha256(published).hexdigest() and pin["n_bytes"] == len(published)
        assert pin["source"] == f"{mirror.as_uri()}/{name}" and pin["pinned_at"].endswith("Z")
    data = D.load_dataset("dna")  # found in the user cache: the shared directory does not hold it
    assert data.X.shape == (15, 180) and data.classes == ("1", "2", "3")
    assert data.X[12, 179] == 1.0 and data.y[12:].tolist() == [1, 2, 0]  # the test file's rows come last
    assert data.info.n == 15 and data.info.n_classes == 3 and data.info.class_counts == (("1", 5), ("2", 5), ("3", 5))
    assert data.given.train.tolist() == list(range(12)) and data.given.test.tolist() == [12, 13, 14]
    assert data.draw(0) is data.draw(7) is data.given  # the same split for every seed
    assert len(data.info.sha256) == 64 and data.info.n_bytes == len(DNA_TRAIN) + len(DNA_TEST)
    assert D.fetch("dna") == cache  # already there and matching its pins: kept, nothing fetched


def test_bz2_files_are_kept_as_published_and_read_decompressed(mirror, tmp_path):
    cache = D.fetch("usps")
    assert (cache / "usps.bz2").read_bytes() == (mirror / "usps.bz2").read_bytes()
    pin = json.loads((cache / "usps.bz2.al-audit-pin.json").read_text())
    assert pin["sha256"] == hashlib.sha256((mirror / "usps.bz2").read_bytes()).hexdigest()
    data = D.load_dataset("usps")
    assert data.X.shape == (40, 256) and len(data.classes) == 10 and data.classes[-1] == "10"
    assert data.given.test.tolist() == list(range(30, 40)) and data.X[30, 0] == 0.5


def test_given_split_takes_the_test_files_rows_and_validation_from_the_train_rows(mirror):
    D.fetch("dna")
    data = D.load_dataset("dna")
    cdalbench = load_protocol("cdalbench")
    seeds, skipped = plan_seeds(cdalbench, data.y, 3, data)
    assert seeds == [0, 1, 2] and skipped == []
    for seed in seeds:
        X, y, split = seed_split(cdalbench, data, seed)
        assert X is data.X and split.test.tolist() == [12, 13, 14]
        assert split.validation.size == 2  # 0.2 of the 12 train rows (Table 6)
        assert sorted(np.concatenate([split.validation, split.labeled, split.pool]).tolist()) == list(range(12))
        assert sorted(y[split.labeled].tolist()) == [0, 1, 2]  # the seed set: 1 per class
    validations = [seed_split(cdalbench, data, seed)[2].validation.tolist() for seed in (0, 1)]
    assert validations[0] != validations[1]  # drawn by the split seed


def test_a_trial_runs_on_the_given_split_whatever_the_executor(mirror):
    D.fetch("dna")
    data = D.load_dataset("dna")
    base = load_protocol("cdalbench")
    protocol = dataclasses.replace(base, budget_size=3, budget_by_dataset={}, task_model_by_dataset={}, batch_size=1,
                                   task_model=ModelSpec.from_data({"name": "lr"}),
                                   strategies={"random": base.strategy("random")})
    here = run_trial(protocol, "dna", data.X, data.y, "random", 0, given=data.given)
    assert here.status == "ok" and [r.n_labeled for r in here.rounds] == [3, 4, 5, 6]
    loaded = execute_task(TrialTask(protocol, "dna", None, "random", 0))  # a worker loading the set itself
    assert loaded.status == "ok" and loaded.query_hash == here.query_hash
    without = run_trial(protocol, "dna", data.X, data.y, "random", 0)
    assert without.status == "error" and "has none" in without.error


def test_summary_plans_the_seeds_of_sets_with_their_own_split(mirror, tmp_path):
    # a generated set's draws and a train/test set's fixed split both give every seed a split
    D.fetch("dna")
    cdalbench = load_protocol("cdalbench")
    store = ResultStore(tmp_path / "store.sqlite")
    fingerprint = store.register(fingerprint_details(cdalbench))
    for dataset in ("threeclust", "dna"):
        store.save(TrialResult("cdalbench", dataset, "random", 0, "ok", aubc=0.7, aubc_by_metric={"accuracy": 0.7}),
                   fingerprint)
    store.close()
    table = summary_table(SummaryRequest("cdalbench", strategies=["random"], store=tmp_path / "store.sqlite"))
    assert table["no_valid_seed"] == {} and table["datasets"] == ["threeclust", "dna"]
    assert [(c["dataset"], c["n"], c["published_mean"]) for c in table["cells"]] == [
        ("threeclust", 1, 0.721), ("dna", 1, 0.774)]  # Table 8's Random cells
    assert table["data"]["dna"]["n"] == 15 and len(table["data"]["dna"]["sha256"]) == 64


def test_a_file_changed_after_its_pin_is_refused(mirror, tmp_path):
    cache = D.fetch("dna")
    D.load_dataset("dna")
    (cache / "dna.scale.t").write_text(DNA_TEST.replace("0.3", "0.4"))
    msg = one_line_error(D.load_dataset, "dna")
    assert msg.startswith(f"checksum mismatch for {cache / 'dna.scale.t'}: expected ")
    status = D.dataset_status("dna")
    assert (status["status"], status["present"], status["problem"]) == ("refused", True, msg)
    assert one_line_error(D.fetch, "dna") == f"{msg}; al-audit does not replace it: move it away to fetch dna"
    # deleted and fetched again: the pin outlives the file, so a changed mirror is caught too
    (cache / "dna.scale.t").unlink()
    (mirror / "dna.scale.t").write_text(DNA_TEST.replace("0.3", "0.5"))
    assert "checksum mismatch" in one_line_error(D.fetch, "dna")
    assert not (cache / "dna.scale.t").exists() and not (cache / ".dna.scale.t.al-audit-partial").exists()


def test_a_users_file_under_the_name_is_never_replaced(mirror, tmp_path):
    cache = tmp_path / "xdg" / "al-audit" / "datasets"
    cache.mkdir(parents=True)
    mine = cache / "dna.scale.tr"
    mine.write_text("my own notes\n")
    msg = one_line_error(D.fetch, "dna")
    assert msg == (f"{mine} was not fetched by al-audit (no dna.scale.tr.al-audit-pin.json); "
                   "al-audit does not replace it: move it away to fetch dna")
    assert mine.read_text() == "my own notes\n" and files_in(cache) == ["dna.scale.tr"]
    (cache / "dna.scale.t").write_text(DNA_TEST)  # both files there, neither fetched by al-audit
    assert one_line_error(D.load_dataset, "dna").startswith(f"{mine} is not pinned (no dna.scale.tr.al-audit-pin.json")


@pytest.mark.parametrize("published, why", [
    (DNA_TEST.replace("180:1", "181:1"), "has feature index 181; dna has 180 features"),
    ("2 1:x\n", "bad feature '1:x'"),
])
def test_a_download_that_is_not_the_set_never_lands(mirror, tmp_path, published, why):
    (mirror / "dna.scale.t").write_text(published)
    msg = one_line_error(D.fetch, "dna")
    assert msg.startswith(f"download of {mirror.as_uri()}/dna.scale.t refused: ") and why in msg
    cache = tmp_path / "xdg" / "al-audit" / "datasets"
    assert files_in(cache) == ["dna.scale.tr", "dna.scale.tr.al-audit-pin.json"]  # the good part is kept


def test_a_cut_off_bz2_file_is_refused(mirror, tmp_path):
    (mirror / "usps.bz2").write_bytes((mirror / "usps.bz2").read_bytes()[:-20])
    msg = one_line_error(D.fetch, "usps")
    assert "it ends inside a bz2 stream" in msg or "cannot decompress" in msg
    assert not (tmp_path / "xdg" / "al-audit" / "datasets" / "usps.bz2").exists()


def test_labels_must_be_one_to_k_with_every_class_in_the_train_file(mirror):
    (mirror / "dna.scale.t").write_text("4 1:1\n")
    D.fetch("dna")
    assert one_line_error(D.load_dataset, "dna").endswith("the test files have a label the train files lack")


def test_absent_files_say_how_to_fetch_them(isolated, tmp_path, capsys):
    msg = one_line_error(D.load_dataset, "dna")
    cache = tmp_path / "xdg" / "al-audit" / "datasets"
    assert msg == f"dna is not present ({cache / 'dna.scale.tr'} not found): audit datasets --fetch dna"
    assert main(["datasets"]) == 0
    out = capsys.readouterr().out
    assert "dna: not present (fetch: audit datasets --fetch dna)" in out
    row = next(line for line in out.splitlines() if line.startswith("usps "))
    assert row.split()[:5] == ["usps", "train-test", "?", "256", "?"]


def test_datasets_command_fetches_and_shows_the_pins(mirror, capsys):
    assert main(["datasets", "--fetch", "dna"]) == 0
    assert main(["datasets"]) == 0
    out = capsys.readouterr().out
    pins = json.loads((D.user_cache_dir() / "dna.scale.t.al-audit-pin.json").read_text())
    assert f"dna.scale.t: pinned at first fetch {pins['pinned_at']}, sha256 {pins['sha256']}" in out
    row = next(line for line in out.splitlines() if line.startswith("dna "))
    assert row.split()[:7] == ["dna", "train-test", "15", "180", "5/5/5", "1.00", "small"]


def test_reproduce_without_the_files_stops_with_one_line(isolated, tmp_path, capsys):
    pytest.importorskip("torch", reason="the cdalbench classifiers need the extra `deep`; without it "
                        "reproduce stops on that first (tests/test_cdalbench.py)")
    store = tmp_path / "store.sqlite"
    code = main(["reproduce", "cdalbench", "--dataset", "dna", "--store", str(store),
                 "--out", str(tmp_path / "out"), "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert err[0].startswith("audit: error: dna is not present (") and err[0].endswith("audit datasets --fetch dna")
    assert not store.exists() and not (tmp_path / "out").exists()


@pytest.mark.parametrize("name", ["splice-full", "dna", "usps"])
def test_the_published_files_load_as_the_registry_states(name):
    try:
        data = D.load_dataset(name)
    except DataError as exc:
        pytest.skip(f"the published {name} files are not here (no network where this was written): {exc}")
    info = D.get_info(name)
    assert data.X.shape[1] == info.d and data.given.test.size > 0
    assert info.n_classes in (0, len(data.classes))
