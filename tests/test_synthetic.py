"""CDALBench's generated data sets: the draws per data seed, the registry's stored checksums,
the split the draw gives, and the released test-set scaler quirk."""
import numpy as np
import pytest

from audit.engine.datasets import REGISTRY, DataError, dataset_status, fetch, load_dataset
from audit.engine.runner import _Features
from audit.engine.splits import TrialSplit
from audit.engine.synthetic import draw

# SHA-256 of data seed 0's draws (features, labels, test rows, train rows), recorded once from
# this generator under numpy 2; a numpy whose Generator draws differently fails here.
SEED0 = {
    "threeclust": "fdfe46fd7d89e3c2181656c79bef102d30945d9d0be2232cb58df10d986fbba0",
    "divergingsin": "944fc445cc44ca98e4f5f84ca19a0c2ddcf4dddeb232ca35de5338cc1780575c",
}


@pytest.mark.parametrize("name", sorted(SEED0))
def test_seed0_draw_matches_the_stored_checksum(name):
    assert draw(name, 0).checksum() == SEED0[name]
    assert REGISTRY[name].sha256 == SEED0[name]


def test_threeclust_first_draws_by_hand():
    # identity covariance: the first cluster (mean 0, 0) is the generator's first standard normals
    first = np.random.default_rng(0).standard_normal(4).reshape(2, 2)
    got = draw("threeclust", 0)
    assert got.X[:2] == pytest.approx(first, abs=1e-12)
    assert got.X[:2].ravel().tolist() == pytest.approx([0.1257302210933933, -0.1321048632913019,
                                                        0.6404226504432821, 0.10490011715303971], abs=1e-15)
    # order: (0,0) label 1, (4,3) label 1, (0,6) label 0, (4,3) label 0, 150 each
    assert got.y.tolist() == [1] * 300 + [0] * 300
    means = got.X.reshape(4, 150, 2).mean(axis=1)
    assert means == pytest.approx(np.array([[0, 0], [4, 3], [0, 6], [4, 3]]), abs=0.25)


def test_divergingsin_first_draws_by_hand():
    # x = 0: y = sin(0) + 0.5 * 0 + N(0, 0.3) = 0.3 * the generator's first standard normal
    z = np.random.default_rng(0).standard_normal(1)[0]
    got = draw("divergingsin", 0)
    assert got.X[0].tolist() == pytest.approx([0.0, 0.3 * z], abs=1e-15)
    assert got.X[0, 1] == pytest.approx(0.03771906632801799, abs=1e-15)
    x = np.linspace(0, 10, 1000)
    assert got.X[:1000, 0] == pytest.approx(x) and got.X[1000:, 0] == pytest.approx(x)
    # the label-1 curve rises with 0.5 x, the label-0 curve falls; the noise has SD 0.3
    assert np.std(got.X[:1000, 1] - (np.sin(2 * x) + 0.5 * x)) == pytest.approx(0.3, abs=0.03)
    assert np.std(got.X[1000:, 1] - (np.sin(2 * x) - 0.5 * x)) == pytest.approx(0.3, abs=0.03)
    assert got.y.tolist() == [1] * 1000 + [0] * 1000


# standard normals each generator draws before the shuffle: 600 2-D points; 2 x 1000 noises
@pytest.mark.parametrize("name, n, normals", [("threeclust", 600, 1200), ("divergingsin", 2000, 2000)])
def test_test_rows_are_the_first_fifth_of_the_shuffle(name, n, normals):
    got = draw(name, 3)
    ids = np.arange(n)
    rng = np.random.default_rng(3)
    rng.standard_normal(normals)
    rng.shuffle(ids)
    assert got.test.tolist() == ids[: n // 5].tolist() and got.train.tolist() == ids[n // 5:].tolist()
    assert sorted(np.concatenate([got.test, got.train]).tolist()) == list(range(n))


def test_each_data_seed_draws_anew_and_the_same_seed_the_same():
    a, b, again = draw("threeclust", 0), draw("threeclust", 1), draw("threeclust", 0)
    assert a.checksum() != b.checksum() and a.checksum() == again.checksum()
    assert not np.array_equal(a.X, b.X)


def test_registry_loads_seed0_and_reports_generated_sets():
    data = load_dataset("honeypot")
    assert data.info.name == "threeclust" and data.info.task == "synthetic"
    assert data.X.shape == (600, 2) and data.draw(5).checksum() == draw("threeclust", 5).checksum()
    assert dataset_status("divergingsin")["status"] == "ok"
    with pytest.raises(DataError, match="generated per data seed"):
        fetch("threeclust")


def _features(test_fit):
    got = draw("divergingsin", 0)
    split = TrialSplit(0, got.test, got.train[:2], got.train[2:])
    return _Features("train", got.X, split, scaler="minmax", test_fit=test_fit)


def test_released_scaler_quirk_fits_the_test_rows_on_themselves():
    released, fixed = _features("test"), _features("train")
    # as released: the test rows span exactly [0, 1] whatever the train rows' range
    assert released.X_test.min(axis=0).tolist() == [0.0, 0.0] and released.X_test.max(axis=0).tolist() == [1.0, 1.0]
    # fixed: the train rows' scaler, so the test rows are not stretched to [0, 1] themselves
    assert fixed.X_test.max(axis=0).tolist() != [1.0, 1.0] or fixed.X_test.min(axis=0).tolist() != [0.0, 0.0]
    assert released.X_train == pytest.approx(fixed.X_train)
    assert not np.allclose(released.X_test, fixed.X_test)
