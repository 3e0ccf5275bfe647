"""Shipped protocols, their knobs, spec hashes, and failures on bad protocol files."""
from __future__ import annotations

import re

import pytest

from audit.engine.metrics import AUBC_VARIANTS
from audit.engine.models import ModelSpec
from audit.errors import AuditError
from audit.protocols import PROTOCOL_DIR, Protocol, available_protocols, load_protocol

LU2023_TEXT = (PROTOCOL_DIR / "lu2023.toml").read_text()


def write(tmp_path, text: str, name: str = "lu2023.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def replace_once(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times"
    return text.replace(old, new)


def drop_section(text: str, header: str) -> str:
    """Remove one [section] (its header line up to the next header)."""
    pattern = re.compile(rf"^\[{re.escape(header)}\][^\n]*\n(?:(?!\[).*\n)*", re.M)
    out, n = pattern.subn("", text)
    assert n == 1
    return out


def error_of(path) -> str:
    with pytest.raises(AuditError) as exc:
        load_protocol(path)
    msg = str(exc.value)
    assert "\n" not in msg.strip()
    return msg


# ------------------------------------------------------------------------ shipped protocols

def test_available_protocols_lists_the_shipped_ones():
    names = available_protocols()
    assert {"lu2023", "zhan2021"} <= set(names)
    assert names == sorted(names)


@pytest.mark.parametrize("name", ["lu2023", "zhan2021"])
def test_shipped_protocols_load(name):
    p = load_protocol(name)
    assert isinstance(p, Protocol)
    assert p.name == name
    assert p.path == PROTOCOL_DIR / f"{name}.toml"
    assert p.aubc_variant in AUBC_VARIANTS
    assert p.strategies


def test_lu2023_knobs_match_protocol_notes():
    p = load_protocol("lu2023")
    # split: default_rng(s) shuffle, train = first int(0.6 n); 20 initial labels; skip bad seeds
    assert p.split.method == "lu2023"
    assert p.split.test_ratio == 0.4
    assert p.split.initial_labels == 20
    assert p.split.initial_rule == "skip-seed"
    assert p.split.min_per_class == 1
    assert p.split.pool_order == "shuffled"
    # 100 trials from seeds 0..149 for n < 2000, 10 from 0..14 otherwise
    assert (p.trials.small, p.trials.seeds_small) == (100, 150)
    assert (p.trials.large, p.trials.seeds_large) == (10, 15)
    assert p.trials.large_from == 2000
    assert p.trials.for_size(208) == (100, 150)
    assert p.trials.for_size(1999) == (100, 150)
    assert p.trials.for_size(2000) == (10, 15)
    assert p.trials.for_size(11055) == (10, 15)
    # split and initial set from the trial seed; strategy seed 1126, model random_state 6211
    assert p.seeds == {"split": "trial", "initial": "trial", "strategy": 1126, "model": 6211}
    # StandardScaler fitted on the train part
    assert p.scaling == {"task": "train", "query": "train"}
    # SVC(kernel='rbf', gamma='auto', C=1.0)
    assert p.task_model == ModelSpec("svm-rbf", {"C": 1.0, "gamma": "auto"})
    assert p.task_model.params["gamma"] == "auto"
    svc = p.task_model.build(6211)
    assert (svc.kernel, svc.gamma, svc.C, svc.random_state) == ("rbf", "auto", 1.0, 6211)
    # the whole pool, one label per round; AUBC as the released code; SD with ddof 1
    assert p.budget_size == "pool" and p.batch_size == 1
    assert p.aubc_variant == "lu2023_code"
    assert p.aubc_metric == "accuracy"
    assert p.sd_ddof == 1
    assert p.tasks == ("binary",)


def test_lu2023_strategies_bind_as_notes_say():
    p = load_protocol("lu2023")
    us_c = p.strategy("us-c")
    assert us_c.query_model == "task"
    us_nc = p.strategy("us-nc")
    assert us_nc.params == {"method": "entropy"}
    assert us_nc.query_model == ModelSpec("lr", {"C": 0.1})


def test_zhan2021_uses_shuffled_pool_and_train_scaling():
    p = load_protocol("zhan2021")
    assert p.split.pool_order == "shuffled"
    assert p.scaling == {"task": "train", "query": "train"}
    assert p.split.method == "lu2023"
    assert p.split.test_ratio == 0.4 and p.split.initial_labels == 20
    assert p.aubc_variant == "trapezoid"
    assert p.task_model == ModelSpec("svm-rbf", {"C": 1.0, "gamma": "auto"})


def test_query_model_for_resolves_task():
    p = load_protocol("lu2023")
    assert p.query_model_for(p.strategy("us-c")) is p.task_model
    assert p.query_model_for(p.strategy("us-nc")) == ModelSpec("lr", {"C": 0.1})
    assert p.query_model_for(p.strategy("uniform")) is None


def test_unknown_strategy_lists_known():
    p = load_protocol("lu2023")
    with pytest.raises(AuditError) as exc:
        p.strategy("qbc-nope")
    assert "qbc-nope" in str(exc.value) and "us-c" in str(exc.value)


def test_display_scale():
    assert load_protocol("lu2023").display(0.81234) == "81.23"
    assert load_protocol("zhan2021").display(0.81234) == "0.8123"


# ------------------------------------------------------------------------ spec_hash

def test_spec_hash_stable_across_loads():
    a, b = load_protocol("lu2023"), load_protocol("lu2023")
    assert a is not b
    assert a.spec_hash == b.spec_hash
    assert re.fullmatch(r"[0-9a-f]{16}", a.spec_hash)


def test_spec_hash_differs_between_protocols():
    assert load_protocol("lu2023").spec_hash != load_protocol("zhan2021").spec_hash


def test_unmodified_copy_has_the_same_hash(tmp_path):
    copy = load_protocol(write(tmp_path, LU2023_TEXT))
    assert copy.path == tmp_path / "lu2023.toml"
    assert copy.spec_hash == load_protocol("lu2023").spec_hash


@pytest.mark.parametrize("old, new", [
    ("strategy = 1126", "strategy = 1127"),
    ("initial_labels = 20", "initial_labels = 10"),
    ('pool_order = "shuffled"', 'pool_order = "file"'),
    ('variant = "lu2023_code"', 'variant = "lu2023_later"'),
    ("sd_ddof = 1", "sd_ddof = 0"),
    ("params = { C = 1.0, gamma = \"auto\" }", "params = { C = 1.0, gamma = \"scale\" }"),
    ('task = "train"', 'task = "labeled"'),
    ("query_model = { name = \"lr\", params = { C = 0.1 } }", "query_model = { name = \"lr\", params = { C = 1.0 } }"),
])
def test_spec_hash_changes_with_a_knob(tmp_path, old, new):
    base = load_protocol("lu2023").spec_hash
    changed = load_protocol(write(tmp_path, replace_once(LU2023_TEXT, old, new)))
    assert changed.spec_hash != base
    # and it is stable for the modified file too
    assert load_protocol(changed.path).spec_hash == changed.spec_hash


def test_spec_hash_ignores_title_and_comments(tmp_path):
    text = replace_once(LU2023_TEXT, 'title = "', 'title = "Renamed: ')
    text = text.replace("# the whole initial unlabeled pool", "# a different comment")
    assert load_protocol(write(tmp_path, text)).spec_hash == load_protocol("lu2023").spec_hash


# ------------------------------------------------------------------------ bad files

def test_unknown_choice_value(tmp_path):
    path = write(tmp_path, replace_once(LU2023_TEXT, 'pool_order = "shuffled"', 'pool_order = "sideways"'))
    msg = error_of(path)
    assert "pool_order" in msg and "sideways" in msg
    assert "shuffled" in msg and "file" in msg


@pytest.mark.parametrize("key, old, new", [
    ("initial_rule", 'initial_rule = "skip-seed"', 'initial_rule = "retry"'),
    ("method", 'method = "lu2023"', 'method = "kfold"'),
    ("scaling.task", 'task = "train"', 'task = "everything"'),
    ("seeds.strategy", "strategy = 1126", 'strategy = "random"'),
    ("aubc.metric", 'metric = "accuracy"', 'metric = "precision"'),
    ("aubc.scale", 'scale = "percent"', 'scale = "permille"'),
])
def test_other_unknown_choice_values(tmp_path, key, old, new):
    msg = error_of(write(tmp_path, replace_once(LU2023_TEXT, old, new)))
    assert key in msg
    assert new.split("=", 1)[1].strip().strip('"') in msg


@pytest.mark.parametrize("section", ["split", "trials", "seeds", "aubc", "task_model", "budget"])
def test_missing_section(tmp_path, section):
    msg = error_of(write(tmp_path, drop_section(LU2023_TEXT, section)))
    assert "lu2023.toml" in msg
    assert "missing" in msg and section in msg


def test_missing_key_inside_a_section(tmp_path):
    msg = error_of(write(tmp_path, replace_once(LU2023_TEXT, "model = 6211\n", "")))
    assert "missing" in msg and "model" in msg


def test_unknown_key_inside_a_section(tmp_path):
    text = replace_once(LU2023_TEXT, "initial_labels = 20", "initial_labels = 20\nintial_lables = 30")
    msg = error_of(write(tmp_path, text))
    assert "intial_lables" in msg


def test_invalid_toml(tmp_path):
    path = write(tmp_path, LU2023_TEXT + "\n[split\nbroken = \n")
    msg = error_of(path)
    assert "cannot read protocol" in msg and str(path) in msg


def test_missing_file(tmp_path):
    msg = error_of(tmp_path / "absent.toml")
    assert "cannot read protocol" in msg and "absent.toml" in msg


def test_unknown_aubc_variant(tmp_path):
    msg = error_of(write(tmp_path, replace_once(LU2023_TEXT, 'variant = "lu2023_code"', 'variant = "simpson"')))
    assert "simpson" in msg
    for name in AUBC_VARIANTS:
        assert name in msg


def test_unknown_task_model_name(tmp_path):
    msg = error_of(write(tmp_path, replace_once(LU2023_TEXT, '[task_model]\nname = "svm-rbf"',
                                                '[task_model]\nname = "svm-quantum"')))
    assert "svm-quantum" in msg and "svm-rbf" in msg


def test_unknown_query_model_name(tmp_path):
    msg = error_of(write(tmp_path, replace_once(LU2023_TEXT, 'query_model = { name = "lr", params = { C = 0.1 } }',
                                                'query_model = { name = "logreg", params = { C = 0.1 } }')))
    assert "logreg" in msg and "lr" in msg


@pytest.mark.parametrize("old, new", [
    ("test_ratio = 0.4", "test_ratio = 1.0"),
    ("test_ratio = 0.4", "test_ratio = 0.0"),
    ("initial_labels = 20", "initial_labels = 0"),
    ('size = "pool"', "size = 0"),
    ('size = "pool"', 'size = "all"'),
])
def test_out_of_range_values(tmp_path, old, new):
    error_of(write(tmp_path, replace_once(LU2023_TEXT, old, new)))


def test_positive_integer_budget_loads(tmp_path):
    p = load_protocol(write(tmp_path, replace_once(LU2023_TEXT, 'size = "pool"', "size = 50")))
    assert p.budget_size == 50


def test_load_unknown_protocol_name_lists_known():
    with pytest.raises(AuditError) as exc:
        load_protocol("nope")
    msg = str(exc.value)
    assert "nope" in msg
    for name in available_protocols():
        assert name in msg


@pytest.mark.parametrize("value", ["0", "-2"])
def test_non_positive_batch_size_is_rejected(tmp_path, value):
    error_of(write(tmp_path, replace_once(LU2023_TEXT, "batch_size = 1", f"batch_size = {value}")))


def test_non_numeric_batch_size_gives_audit_error(tmp_path):
    error_of(write(tmp_path, replace_once(LU2023_TEXT, "batch_size = 1", 'batch_size = "two"')))


def test_a_file_extending_a_protocol_adds_strategies_and_keeps_every_other_knob(tmp_path, lu2023):
    path = tmp_path / "mine.toml"
    path.write_text('extends = "lu2023"\nname = "mine"\n[split]\ntest_ratio = 0.3\n'
                    '[strategies.margin-again]\nimplementation = "native.margin"\nquery_model = "task"\n'
                    '[strategies.uniform]\nimplementation = "native.uniform"\n')
    mine = load_protocol(path)
    assert mine.name == "mine" and mine.split.test_ratio == 0.3
    assert mine.split.pool_order == lu2023.split.pool_order and mine.task_model == lu2023.task_model
    assert set(mine.strategies) == set(lu2023.strategies) | {"margin-again"}
    assert mine.strategy("uniform").params == {}  # a strategy it names replaces the base's whole entry
    assert mine.spec_hash != lu2023.spec_hash


def test_extends_chains_resolve_relative_to_the_file_and_loops_are_refused(tmp_path):
    (tmp_path / "a.toml").write_text('extends = "lu2023"\nname = "a"\n')
    (tmp_path / "b.toml").write_text('extends = "a.toml"\nname = "b"\n')
    assert load_protocol(tmp_path / "b.toml").reference_paper == "lu2023"
    (tmp_path / "c.toml").write_text('extends = "d.toml"\nname = "c"\n')
    (tmp_path / "d.toml").write_text('extends = "c.toml"\nname = "d"\n')
    with pytest.raises(AuditError, match="in a loop"):
        load_protocol(tmp_path / "c.toml")
    (tmp_path / "e.toml").write_text('extends = "nonesuch"\nname = "e"\n')
    with pytest.raises(AuditError, match="unknown protocol 'nonesuch'"):
        load_protocol(tmp_path / "e.toml")
