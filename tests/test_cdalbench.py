"""The cdalbench protocol as data, its split (given test rows, 1 per class, a validation split),
its per-subsystem seeds, the PyTorch classifiers (skipped without the extra `deep`) and the
one-line refusal when PyTorch is missing."""
import dataclasses
import importlib.util

import numpy as np
import pytest

from audit.cli.main import main
from audit.engine import models
from audit.engine.datasets import load_dataset
from audit.engine.splits import data_seed, plan_seeds, seed_split
from audit.engine.synthetic import draw
from audit.protocols import load_protocol


@pytest.fixture(scope="module")
def cdalbench():
    return load_protocol("cdalbench")


def test_protocol_states_the_papers_settings(cdalbench):
    assert cdalbench.for_dataset("threeclust").budget_size == 60  # Sec. 8
    assert cdalbench.for_dataset("divergingsin").budget_size == 60
    assert [cdalbench.for_dataset(name).budget_size for name in ("splice-full", "dna", "usps")] == [400, 300, 400]
    assert cdalbench.for_dataset("splice").budget_size == 60  # the shared 1,000-row train part: not CDALBench's
    dna, usps = (cdalbench.for_dataset(name).task_model.params for name in ("dna", "usps"))  # Table 7
    assert (dna["optimizer"], dna["lr"], dna["weight_decay"], dna["batch_size"]) == ("nadam", 3.9e-2, 3.6e-5, 64)
    assert (usps["optimizer"], usps["lr"], usps["weight_decay"], usps["batch_size"]) == ("adam", 8.1e-3, 1.5e-6, 43)
    assert cdalbench.batch_size == 1 and cdalbench.trials.for_size(600) == (50, 50)
    assert (cdalbench.split.initial_labels, cdalbench.split.initial_rule) == (1, "per-class")
    assert cdalbench.validation_ratio == 0.2 and cdalbench.sd_ddof == 0
    assert cdalbench.aubc_variant == "cdalbench_code"  # the released logger and table script (B + 1 values)
    assert cdalbench.seeds == {"data": "trial", "split": "trial", "initial": "trial", "model": "trial", "strategy": 1}



def test_synthetic_classifiers_train_as_the_released_code_did(cdalbench):
    # the released configs' MLP [12, 16] and [24, 2], as DenseModel builds them (its first hidden
    # size twice); from_scratch reloads an uncopied state_dict, so training continues, with
    # patience 50, 100 epochs (50 on the seed set) and drop_last once there is more than a batch
    threeclust, divergingsin = (cdalbench.for_dataset(name).task_model for name in ("threeclust", "divergingsin"))
    assert (threeclust.name, threeclust.params["hidden"]) == ("torch-mlp", [12, 12, 16])
    assert (divergingsin.name, divergingsin.params["hidden"]) == ("torch-mlp", [24, 24, 2])
    for spec in (threeclust, divergingsin):
        assert {k: spec.params[k] for k in ("warm_start", "patience", "max_epochs", "first_max_epochs", "drop_last",
                                            "batch_size", "lr", "optimizer")} == {
            "warm_start": True, "patience": 50, "max_epochs": 100, "first_max_epochs": 50, "drop_last": True,
            "batch_size": 32, "lr": 1e-3, "optimizer": "nadam"}
    assert cdalbench.paper_vs_code["aubc.variant"]["followed"] == "code"
    assert cdalbench.paper_vs_code["task_model_by_dataset.divergingsin.patience"]["code"] == 50



def test_tabular_mlps_are_built_as_the_released_dense_model_builds_table_7s(cdalbench):
    for name in ("splice-full", "dna", "usps"):
        assert cdalbench.for_dataset(name).task_model.params["hidden"] == [24, 24, 12]
    assert cdalbench.paper_vs_code["task_model.hidden"] == {
        "paper": "[24, 12]", "code": "[24, 24, 12]", "followed": "code",
        "source": cdalbench.paper_vs_code["task_model.hidden"]["source"]}

def test_later_knobs_keep_the_other_protocols_hashes(cdalbench):
    # lu2023's hash as stored before the knobs of this protocol existed (tests/test_knobs.py keeps the others)
    lu2023 = load_protocol("lu2023")
    assert lu2023.validation_ratio == 0.0 and lu2023.scaler == "standard" and lu2023.task_model_by_dataset == {}
    changed = dataclasses.replace(lu2023, validation_ratio=0.2)
    assert changed.spec_hash != lu2023.spec_hash


def test_split_draws_the_trials_own_data_set(cdalbench):
    data = load_dataset("threeclust")
    X, y, split = seed_split(cdalbench, data, 7)
    drawn = draw("threeclust", data_seed(cdalbench, 7))
    assert np.array_equal(X, drawn.X) and split.test.tolist() == drawn.test.tolist()
    assert split.validation.size == int(480 * 0.2) == 96
    assert sorted(y[split.labeled].tolist()) == [0, 1]  # 1 per class
    rows = np.concatenate([split.test, split.validation, split.labeled, split.pool])
    assert sorted(rows.tolist()) == list(range(600))
    # s_D moves the draw, the split and the seed set; another trial seed gives another data set
    X8, _, split8 = seed_split(cdalbench, data, 8)
    assert not np.array_equal(X, X8) and split8.labeled.tolist() != split.labeled.tolist()
    assert plan_seeds(cdalbench, data.y, None, data)[0] == list(range(50))


def test_seed_set_is_the_first_row_of_each_class_in_the_shuffled_train_rows(cdalbench):
    data = load_dataset("divergingsin")
    _, y, split = seed_split(cdalbench, data, 0)
    # the draw's train rows in their order, less the validation rows, shuffled by the initial seed (= trial seed)
    order = np.array([r for r in draw("divergingsin", 0).train if r not in set(split.validation.tolist())])
    np.random.default_rng(0).shuffle(order)
    first = [next(r for r in order if y[r] == c) for c in (0, 1)]
    assert split.labeled.tolist() == sorted(first, key=order.tolist().index)
    assert split.pool.tolist() == [r for r in order.tolist() if r not in first]


def test_without_pytorch_reproduce_says_what_to_install_before_any_work(monkeypatch, capsys, tmp_path):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    store = tmp_path / "store.sqlite"
    code = main(["reproduce", "cdalbench", "--dataset", "threeclust", "--store", str(store),
                 "--out", str(tmp_path / "out"), "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert err[0] == ("audit: error: protocol 'cdalbench': model 'torch-mlp' needs the optional extra 'deep' "
                      "(PyTorch; torch not installed): `uv sync --extra deep` (or `uv run --extra deep audit ...`)")
    assert not store.exists() and not (tmp_path / "out").exists()


torch = pytest.importorskip("torch", reason="PyTorch is the optional extra `deep` (uv sync --extra deep)")


def _xy(n=200, seed=0):
    got = draw("threeclust", seed)
    return got.X[got.train][:n], got.y[got.train][:n], got.X[got.test], got.y[got.test]


def test_torch_classifier_is_deterministic_and_learns():
    X, y, X_test, y_test = _xy()
    spec = models.ModelSpec("torch-mlp", {"hidden": [24, 12], "lr": 1e-2, "max_epochs": 50})
    a = spec.build(3).fit(X, y)
    b = spec.build(3).fit(X, y)
    assert np.array_equal(a.predict_proba(X_test), b.predict_proba(X_test))
    assert a.epochs_ == 50 and (a.predict(X_test) == y_test).mean() > 0.6
    assert a.embed(X_test).shape == (len(X_test), 12)
    c = spec.build(4).fit(X, y)
    assert not np.array_equal(a.predict_proba(X_test), c.predict_proba(X_test))  # s_theta moves the weights


def test_alg2_stops_at_the_first_epoch_without_a_better_validation_loss():
    X, y, X_val, y_val = _xy()
    patient = models.ModelSpec("torch-linear", {"lr": 0.5, "max_epochs": 100, "patience": 5}).build(0)
    eager = models.ModelSpec("torch-linear", {"lr": 0.5, "max_epochs": 100, "patience": 0}).build(0)
    eager.fit(X, y, validation=(X_val, y_val))
    patient.fit(X, y, validation=(X_val, y_val))
    assert eager.epochs_ < 100 and patient.epochs_ >= eager.epochs_
    # replay the eager run's validation losses: every epoch improved but the last
    replay = models.ModelSpec("torch-linear", {"lr": 0.5, "max_epochs": 1, "patience": 0}).build(0)
    losses = []
    for _ in range(eager.epochs_):
        replay.set_params(warm_start=True).fit(X, y)
        p = replay.predict_proba(X_val)
        losses.append(-np.mean(np.log(p[np.arange(len(y_val)), y_val])))
    assert all(b < a for a, b in zip(losses[:-2], losses[1:-1]))  # improving until the last epoch
    assert losses[-1] >= losses[-2] - 1e-6  # which did not improve: stop


def test_warm_start_fine_tunes_and_cold_start_restarts_from_the_same_weights():
    X, y, X_test, _ = _xy()
    cold = models.ModelSpec("torch-linear", {"max_epochs": 2}).build(0)
    first = cold.fit(X[:20], y[:20]).predict_proba(X_test)
    again = cold.fit(X[:20], y[:20]).predict_proba(X_test)
    assert np.allclose(first, again, atol=1e-6)  # each fit restarts from the same initial weights
    warm = models.ModelSpec("torch-linear", {"max_epochs": 2, "warm_start": True}).build(0)
    w1 = warm.fit(X[:20], y[:20]).predict_proba(X_test)
    w2 = warm.fit(X[:20], y[:20]).predict_proba(X_test)
    assert not np.allclose(w1, w2)  # continued from the first fit's weights
    fresh = models.ModelSpec("torch-linear", {"max_epochs": 2}).build(0).fit(X[:20], y[:20])
    assert np.allclose(fresh.predict_proba(X_test), first)


def test_first_fit_runs_its_own_number_of_epochs():
    # the released code fits the seed set for 50 epochs and every later round for up to 100
    X, y, _, _ = _xy()
    model = models.ModelSpec("torch-linear", {"max_epochs": 7, "first_max_epochs": 3, "warm_start": True}).build(0)
    assert model.fit(X[:20], y[:20]).epochs_ == 3
    assert model.fit(X[:21], y[:21]).epochs_ == 7
    cold = models.ModelSpec("torch-linear", {"max_epochs": 7, "first_max_epochs": 3}).build(0)
    assert cold.fit(X[:20], y[:20]).epochs_ == 3 and cold.fit(X[:20], y[:20]).epochs_ == 7


@pytest.mark.parametrize("drop_last, rows, steps", [(False, 70, 3), (True, 70, 2), (True, 64, 2), (True, 20, 1)])
def test_drop_last_keeps_whole_batches_once_there_is_more_than_one(drop_last, rows, steps):
    # the released DataLoader: drop_last = batch_size < len(x_labeled)
    X, y, _, _ = _xy()
    model = models.ModelSpec("torch-linear", {"max_epochs": 1, "batch_size": 32, "drop_last": drop_last}).build(0)
    model.fit(X[:20], y[:20])  # builds the network and its optimizer
    model.set_params(warm_start=True)
    calls = []
    model.optimizer_.register_step_post_hook(lambda *args: calls.append(1))
    model.fit(X[:rows], y[:rows])
    assert len(calls) == steps


def _module_by_module_fits(hidden, seed, fits, X_val, y_val, first_epochs=5, epochs=12, patience=3, batch=32):
    """The plain PyTorch training loop TorchClassifier's fast fit must equal bit for bit: module
    calls per layer, a CrossEntropyLoss module, optimizer.zero_grad(), train() before each epoch's
    steps and eval() for its validation loss; warm-started across ``fits`` (labeled row counts)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        sizes, layers = [X_val.shape[1], *hidden], []
        for a, b in zip(sizes[:-1], sizes[1:]):
            layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
        network = torch.nn.Sequential(torch.nn.Sequential(*layers), torch.nn.Linear(sizes[-1], 2))
    optimizer = torch.optim.NAdam(network.parameters(), lr=1e-2)
    loader = torch.Generator().manual_seed(1)
    loss_fn = torch.nn.CrossEntropyLoss()
    Xv, yv = torch.as_tensor(X_val.astype(np.float32)), torch.as_tensor(y_val)
    states = []
    for count, (X, y) in enumerate(fits):
        Xt, yt = torch.as_tensor(X.astype(np.float32)), torch.as_tensor(y)
        stop = len(yt) - len(yt) % batch if len(yt) > batch else len(yt)  # drop_last
        best, waited, ran = float("inf"), 0, 0
        for _ in range(first_epochs if count == 0 else epochs):
            network.train()
            order = torch.randperm(len(yt), generator=loader)
            for start in range(0, stop, batch):
                optimizer.zero_grad()
                loss_fn(network(Xt[order[start:start + batch]]), yt[order[start:start + batch]]).backward()
                optimizer.step()
            ran += 1
            network.eval()
            with torch.no_grad():
                loss = float(loss_fn(network(Xv), yv))
            if loss < best:
                best, waited = loss, 0
            else:
                waited += 1
                if waited > patience:
                    break
        states.append(({k: v.clone() for k, v in network.state_dict().items()}, ran))
    return states


@pytest.mark.parametrize("hidden", [(12, 12, 16), (24, 24, 2), ()])
def test_fast_fit_equals_the_module_by_module_loop_bit_for_bit(hidden):
    # the fit calls F.linear / torch.relu / F.cross_entropy itself and never toggles train/eval
    # (audit/engine/torch_models.py): the replayed trials' weights, and so their queries and
    # accuracies, must stay those of the plain loop, to the last bit
    X, y, X_val, y_val = _xy(n=200, seed=2)
    y_val = 1 - y_val  # flipped: learning raises the validation loss, so early stopping takes part
    fits = [(X[:2], y[:2]), (X[:20], y[:20]), (X[:33], y[:33]), (X[:70], y[:70])]
    expected = _module_by_module_fits(hidden, 5, fits, X_val, y_val)
    model = models.ModelSpec("torch-mlp", {
        "hidden": list(hidden), "lr": 1e-2, "max_epochs": 12, "first_max_epochs": 5, "patience": 3,
        "warm_start": True, "drop_last": True, "batch_size": 32}).build(5)
    for (X_fit, y_fit), (state, epochs) in zip(fits, expected):
        model.fit(X_fit, y_fit, validation=(X_val, y_val))
        assert model.epochs_ == epochs
        got = model.network_.state_dict()
        assert all(torch.equal(got[k], v) for k, v in state.items())
    # predictions and the embedding through the same functions equal the modules' own
    with torch.no_grad():
        logits = model.network_(torch.as_tensor(X_val.astype(np.float32)))
        body = model.body_(torch.as_tensor(X_val.astype(np.float32)))
    assert np.array_equal(model.predict_proba(X_val), torch.softmax(logits.double(), dim=1).numpy())
    assert np.array_equal(model.embed(X_val), body.numpy().astype(np.float64))
    assert any(epochs < 12 for _, epochs in expected[1:])


def test_the_released_diverging_sine_network_can_be_dead_at_initialisation(cdalbench):
    """Why 8 of 50 Diverging Sine runs sit at chance in every strategy (docs/cdalbench.md): the
    released 24-24-2 network's 2-unit ReLU layer can start inactive on every training row, and
    then no gradient reaches the weights below it."""
    from sklearn.preprocessing import MinMaxScaler

    spec = cdalbench.for_dataset("divergingsin").task_model
    untrained = {**spec.params, "first_max_epochs": 0}  # build the initial weights, train nothing

    def last_layer(seed):
        got = draw("divergingsin", seed)
        X = MinMaxScaler().fit_transform(got.X[got.train])
        model = models.ModelSpec(spec.name, untrained).build(seed).fit(X, got.y[got.train])
        return model.embed(X)

    assert not last_layer(17).any()                        # both units off on all 1,600 rows
    assert (last_layer(0) > 0).any(axis=0).any()           # s_theta 0: a unit is alive
