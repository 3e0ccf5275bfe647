"""The released-code knobs of issue 23 ([query_models] defaults, [labels] reveal and
libact_binary): each changes a replay exactly where zhan2021's released code differs."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from audit.engine.models import ModelSpec
from audit.engine.runner import bound_strategy, conflicting_duplicates, first_equal_row_labels, run_trial
from audit.engine.splits import make_split
from audit.errors import AuditError
from audit.protocols import load_protocol
from tests.conftest import dataset_or_skip

RELEASED = load_protocol("zhan2021-released")


def _with(protocol, budget=None, **changes):
    changed = dataclasses.replace(protocol, **changes)
    return changed if budget is None else dataclasses.replace(changed, budget_size=budget)


def _labels_seen(result):
    return [r.accuracy for r in result.rounds]


# --------------------------------------------------------------------- protocol data

def test_the_released_protocol_sets_the_knobs_and_the_others_keep_the_defaults():
    assert (RELEASED.query_model_defaults, RELEASED.label_reveal, RELEASED.label_reveal_applies_to,
            RELEASED.libact_binary) == ("sklearn-0.19", "first-equal-row", ("libact",), "file")
    for name in ("zhan2021", "lu2023"):
        p = load_protocol(name)
        assert (p.query_model_defaults, p.label_reveal, p.libact_binary) == ("current", "row", "pm1")


def test_knobs_at_their_defaults_leave_the_spec_hash_alone():
    zhan = load_protocol("zhan2021")
    assert _with(zhan, query_model_defaults="current").spec_hash == zhan.spec_hash
    assert _with(zhan, query_model_defaults="sklearn-0.19").spec_hash != zhan.spec_hash
    assert _with(zhan, label_reveal="first-equal-row").spec_hash != zhan.spec_hash
    assert _with(zhan, libact_binary="file").spec_hash != zhan.spec_hash


@pytest.mark.parametrize("table, bad", [
    ("[query_models]\ndefaults = \"sklearn-0.18\"\n", "query_models.defaults"),
    ("[labels]\nreveal = \"any\"\n", "labels.reveal"),
    ("[labels]\nlibact_binary = \"01\"\n", "labels.libact_binary"),
    ("[labels]\nreveals = \"row\"\n", "unknown keys"),
])
def test_bad_knob_values_are_refused(protocol_file, table, bad):
    with pytest.raises(AuditError, match=bad):
        load_protocol(protocol_file("zhan2021", append="\n" + table))


def test_era_defaults_fill_only_unset_params_of_query_and_committee_models():
    assert ModelSpec("lr", {"C": 0.1}).with_defaults("sklearn-0.19").params == {"solver": "liblinear", "C": 0.1}
    assert ModelSpec("lr", {"solver": "lbfgs"}).with_defaults("sklearn-0.19").params == {"solver": "lbfgs"}
    assert ModelSpec("svm-rbf").with_defaults("sklearn-0.19").params == {"gamma": "auto"}
    assert ModelSpec("lr-grid").with_defaults("sklearn-0.19") == ModelSpec("lr-grid")  # explicit lbfgs in its code
    assert ModelSpec("lr", {"C": 0.1}).with_defaults("current") == ModelSpec("lr", {"C": 0.1})
    assert ModelSpec("lr").build(0, defaults="sklearn-0.19").solver == "liblinear"
    query, params = bound_strategy(RELEASED, RELEASED.strategy("qbc"))
    assert query is None
    assert [m["params"] for m in params["committee"]] == [
        {"solver": "liblinear", "C": 1.0}, {"gamma": "auto"}, {"gamma": "auto"}, {}]
    query, params = bound_strategy(RELEASED, RELEASED.strategy("albl"))
    assert query.params == {"solver": "liblinear", "C": 1.0}
    assert [a.get("model", {}).get("params") for a in params["arms"]] == [
        {"solver": "liblinear", "C": 1.0}, {"solver": "liblinear", "C": 0.01}, None]
    # QUIRE, HintSVM and DWUS build no model whose meaning changed (DWUS spells n_init out)
    current = _with(RELEASED, query_model_defaults="current")
    for sid in ("quire", "hintsvm", "dwus", "margin", "eer"):
        assert bound_strategy(RELEASED, RELEASED.strategy(sid)) == bound_strategy(current, current.strategy(sid))
    # the task model is explicit: unaffected
    assert RELEASED.task_model.params == {"C": 1.0, "gamma": "auto"}


# --------------------------------------------------------------------- replays

def test_library_defaults_change_us_nc_on_sonar_and_not_quire():
    sonar = dataset_or_skip("sonar")
    current = _with(RELEASED, budget=25, query_model_defaults="current")
    era = _with(RELEASED, budget=25)
    a = run_trial(current, "sonar", sonar.X, sonar.y, "us-nc", 0)
    b = run_trial(era, "sonar", sonar.X, sonar.y, "us-nc", 0)
    assert a.status == b.status == "ok", (a.error, b.error)
    assert a.rounds[0].accuracy == b.rounds[0].accuracy  # the task model is the same
    assert a.query_hash != b.query_hash  # liblinear's LR ranks the pool differently
    qa = run_trial(current, "sonar", sonar.X, sonar.y, "quire", 0)
    qb = run_trial(era, "sonar", sonar.X, sonar.y, "quire", 0)
    assert (qa.query_hash, qa.aubc) == (qb.query_hash, qb.aubc)


def test_first_equal_row_lookup_answers_the_first_duplicates_label():
    X = np.array([[0.0, 1.0], [2.0, 2.0], [0.0, 1.0], [3.0, 3.0], [2.0, 2.0]])
    y = np.array([1, 0, 0, 1, 1])
    assert first_equal_row_labels(X, y).tolist() == [1, 0, 1, 1, 0]
    assert conflicting_duplicates(X, y) == 4


def test_label_lookup_changes_nothing_on_sonar():
    sonar = dataset_or_skip("sonar")
    assert conflicting_duplicates(sonar.X, sonar.y) == 0
    row = _with(RELEASED, budget=10, label_reveal="row")
    lookup = _with(RELEASED, budget=10)
    a = run_trial(row, "sonar", sonar.X, sonar.y, "us-nc", 1)
    b = run_trial(lookup, "sonar", sonar.X, sonar.y, "us-nc", 1)
    assert (a.query_hash, _labels_seen(a)) == (b.query_hash, _labels_seen(b))


def test_label_lookup_on_haberman_differs_from_the_first_wrongly_labeled_query_on():
    """The replays agree up to the round that queries a row whose first equal train row has
    another label; from then on the libact strategy has learned a label the row does not have.
    A native strategy is not affected ([labels] applies_to = ["libact"])."""
    haberman = dataset_or_skip("haberman")
    row = _with(RELEASED, label_reveal="row")
    lookup = RELEASED
    for seed in range(10):
        split = make_split(RELEASED, haberman.y, seed)
        X_train, y_train = haberman.X[split.train], haberman.y[split.train]
        wrong = set(split.train[first_equal_row_labels(X_train, y_train) != y_train].tolist())
        if wrong:
            break
    assert wrong, "no haberman split has a row whose first equal train row has another label"
    a = run_trial(row, "haberman", haberman.X, haberman.y, "us-nc", seed)
    b = run_trial(lookup, "haberman", haberman.X, haberman.y, "us-nc", seed)
    assert a.status == b.status == "ok", (a.error, b.error)
    first = next(r.round for r in a.rounds if set(r.queried) & wrong)
    assert [r.queried for r in a.rounds[:first + 1]] == [r.queried for r in b.rounds[:first + 1]]
    assert [r.accuracy for r in a.rounds[:first]] == [r.accuracy for r in b.rounds[:first]]
    assert ([r.accuracy for r in a.rounds[first:]] != [r.accuracy for r in b.rounds[first:]]
            or a.query_hash != b.query_hash)
    ua = run_trial(row, "haberman", haberman.X, haberman.y, "uniform", seed)
    ub = run_trial(lookup, "haberman", haberman.X, haberman.y, "uniform", seed)
    assert (ua.query_hash, ua.aubc) == (ub.query_hash, ub.aubc)


def test_libact_binary_file_changes_hintsvm_on_parkinsons_and_nothing_on_sonar():
    parkinsons, sonar = dataset_or_skip("parkinsons"), dataset_or_skip("sonar")
    pm1 = _with(RELEASED, budget=15, libact_binary="pm1")
    file = _with(RELEASED, budget=15)
    a = run_trial(pm1, "parkinsons", parkinsons.X, parkinsons.y, "hintsvm", 0)
    b = run_trial(file, "parkinsons", parkinsons.X, parkinsons.y, "hintsvm", 0)
    assert a.status == b.status == "ok", (a.error, b.error)
    assert a.query_hash != b.query_hash  # HintSVM reads label 0 as "hint"
    c = run_trial(pm1, "sonar", sonar.X, sonar.y, "hintsvm", 0)
    d = run_trial(file, "sonar", sonar.X, sonar.y, "hintsvm", 0)
    assert (c.query_hash, c.aubc) == (d.query_hash, d.aubc)
