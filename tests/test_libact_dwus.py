"""The lean route of libact DWUS's fit (adapters/libact_dwus.py): SciPy's own CG fit with its
forward-difference gradient computed at once, bit for bit libact's; self-checked, with a fallback."""
from __future__ import annotations

import numpy as np
import pytest

from adapters import libact_dwus
from audit.engine.runner import run_trial
from audit.fast.policy import FastPathFallbackWarning, recording
from audit.protocols import load_protocol
from tests.conftest import dataset_or_skip


def test_the_route_is_verified_on_this_scipy_and_gated_by_release():
    assert libact_dwus.scipy_supported()
    assert libact_dwus.lean_dwus_verified()
    assert not libact_dwus.scipy_supported("1.15.3") and not libact_dwus.scipy_supported("2.0")


@pytest.mark.parametrize("seed", [3, 4])
def test_the_batch_gives_libacts_likelihood_bit_for_bit(seed):
    model, ids, labels = libact_dwus._check_model(seed)
    rng = np.random.default_rng(seed)
    size = model.centers.shape[1] + 1
    start = rng.standard_normal(size)
    # the points of one forward-difference gradient: one coordinate moved at a time
    points = np.array([start] + [start + np.eye(size)[i] * 1.4901161193847656e-08 for i in range(size)])
    got = libact_dwus.likelihood_batch(model, labels, points)
    expected = np.array([model._likelihood(np.copy(w), ids, labels) for w in points])
    assert got.dtype == np.float64 and got.tobytes() == expected.tobytes()


@pytest.mark.parametrize("alphabet", [(-1, 1), (0, 1), (1, 2, 7), (1,)])
def test_the_batch_gives_libacts_likelihood_for_any_labels(alphabet):
    """The sigmoid is computed once per distinct label: the same values whatever labels the rows carry."""
    model, ids, _ = libact_dwus._check_model(7)
    rng = np.random.default_rng(len(alphabet))
    labels = rng.choice(np.array(alphabet), size=(ids.size, 1))
    points = rng.standard_normal((5, model.centers.shape[1] + 1)) * 0.3
    expected = np.array([model._likelihood(np.copy(w), ids, labels) for w in points])
    assert libact_dwus.likelihood_batch(model, labels, points).tobytes() == expected.tobytes()


@pytest.mark.parametrize("seed", [3, 4])
def test_the_gradient_is_scipys_forward_difference_bit_for_bit(seed):
    """As CG differences it without ``jac``: its eps as the absolute step; at 1e10 the step
    vanishes (1e10 + eps == 1e10) and SciPy's fallback step applies."""
    from scipy.optimize._numdiff import approx_derivative

    model, ids, labels = libact_dwus._check_model(seed)
    rng = np.random.default_rng(seed)
    size = model.centers.shape[1] + 1
    for w in (rng.standard_normal(size), np.zeros(size), np.r_[rng.standard_normal(size - 1), 1e10]):
        expected = approx_derivative(lambda v: model._likelihood(v, ids, labels), w, method="2-point",
                                     abs_step=libact_dwus.CG_STEP)
        assert libact_dwus.difference_gradient(model, ids, labels, w).tobytes() == expected.tobytes()


def test_a_fit_through_the_route_is_libacts_fit():
    model, ids, labels = libact_dwus._check_model(5)
    twin = libact_dwus._check_model(5)[0]
    model.train(ids, labels)
    libact_dwus._lean_train(twin, ids, labels)
    assert twin.w_.tobytes() == model.w_.tobytes() and np.abs(model.w_).max() > 0


@pytest.mark.parametrize("dataset, trial_seed", [("heart", 0), ("sonar", 0)])
def test_trial_queries_are_the_library_ones(dataset, trial_seed, monkeypatch):
    """heart seed 0 fits DWUS's LR every round; sonar seed 0 has NaN densities (degenerate)."""
    data = dataset_or_skip(dataset)
    zhan2021 = load_protocol("zhan2021")
    lean = run_trial(zhan2021, dataset, data.X, data.y, "dwus", trial_seed)
    monkeypatch.setattr(libact_dwus, "lean_dwus_verified", lambda: False)
    library = run_trial(zhan2021, dataset, data.X, data.y, "dwus", trial_seed)
    assert lean.status == library.status == "ok"
    assert (lean.query_hash, lean.aubc) == (library.query_hash, library.aubc)
    # the same library warnings (an import's DeprecationWarning comes only with a process's first trial)
    assert [w for w in lean.warnings if not w.startswith("DeprecationWarning")] == \
        [w for w in library.warnings if not w.startswith("DeprecationWarning")]
    assert "lean-dwus" in lean.fast_path.split("+") and "lean-dwus" not in library.fast_path.split("+")
    assert "library" in library.fast_path.split("+")


def test_a_failed_self_check_warns_and_sends_every_fit_to_libact(monkeypatch):
    real = libact_dwus.likelihood_batch
    monkeypatch.setattr(libact_dwus, "likelihood_batch",
                        lambda model, y, points: real(model, y, points) + 1e-12)
    with pytest.warns(FastPathFallbackWarning, match="lean-dwus: its self-check found a difference"):
        assert libact_dwus.lean_dwus_verified.__wrapped__() is False
    monkeypatch.setattr(libact_dwus, "lean_dwus_verified", lambda: False)
    model, ids, labels = libact_dwus._check_model(6)
    with recording() as ran, libact_dwus.lean_training():
        model.train(ids, labels)
    assert ran == {"library"}


@pytest.mark.parametrize("clusters", range(1, 13))
def test_the_cluster_sum_is_numpys_sum_of_each_row_at_every_length(clusters):
    """Rows shorter than SEQUENTIAL_ROW are added left to right, as numpy adds them; longer ones
    by numpy itself (its eight-lane pairwise sum)."""
    rows = np.random.default_rng(clusters).random((7, 40, clusters)) * np.logspace(-3, 3, clusters)  # (B, n, K)
    summed = libact_dwus._sum_clusters(np.ascontiguousarray(rows.transpose(0, 2, 1)))  # laid out (B, K, n)
    assert summed.tobytes() == np.sum(rows, axis=-1).tobytes()


def test_the_gradient_from_the_value_cg_computed_is_the_gradient_computed_afresh():
    model, ids, labels = libact_dwus._check_model(3)
    w = np.random.default_rng(3).standard_normal(model.centers.shape[1] + 1)
    given = libact_dwus.difference_gradient(model, ids, labels, w, model._likelihood(np.copy(w), ids, labels))
    assert given.tobytes() == libact_dwus.difference_gradient(model, ids, labels, w).tobytes()
