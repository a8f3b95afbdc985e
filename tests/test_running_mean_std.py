import numpy as np
import pytest

from sbtf.common.running_mean_std import RunningMeanStd


def _expected_with_prior(data: np.ndarray, epsilon: float):
    """Moments of the data merged with the prior (count epsilon, mean 0, var 1) the estimator starts from."""
    n = data.shape[0]
    total = epsilon + n
    mean = data.sum(axis=0) / total
    m2 = epsilon * (1.0 + mean ** 2) + ((data - mean) ** 2).sum(axis=0)
    return mean, m2 / total, total


@pytest.mark.parametrize("shape", [(), (3,), (2, 4)])
def test_update_matches_numpy(shape):
    rng = np.random.default_rng(0)
    batches = [rng.normal(loc=3.0, scale=2.0, size=(size,) + shape) for size in (1, 7, 50, 3)]
    rms = RunningMeanStd(epsilon=1e-4, shape=shape)
    for batch in batches:
        rms.update(batch)
    data = np.concatenate(batches, axis=0)
    mean, var, count = _expected_with_prior(data, 1e-4)
    np.testing.assert_allclose(rms.mean, mean, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(rms.var, var, rtol=1e-10, atol=1e-12)
    assert rms.count == pytest.approx(count)
    assert rms.mean.shape == shape and rms.var.shape == shape
    assert rms.mean.dtype == np.float64 and rms.var.dtype == np.float64
    # Far from the prior, the estimate is the plain sample mean / variance.
    np.testing.assert_allclose(rms.mean, data.mean(axis=0), rtol=1e-4)
    np.testing.assert_allclose(rms.var, data.var(axis=0), rtol=1e-3)


def test_initial_state_and_types():
    rms = RunningMeanStd(shape=(2,))
    np.testing.assert_array_equal(rms.mean, np.zeros(2))
    np.testing.assert_array_equal(rms.var, np.ones(2))
    assert rms.count == pytest.approx(1e-4)
    assert isinstance(rms.count, float)
    rms.update(np.ones((4, 2), dtype=np.float32))
    assert rms.mean.dtype == np.float64
    assert isinstance(rms.count, float)


def test_update_from_moments_merges_two_estimators():
    rng = np.random.default_rng(1)
    a = rng.uniform(-5, 5, size=(30, 2))
    b = rng.uniform(0, 1, size=(11, 2))
    left = RunningMeanStd(epsilon=1e-4, shape=(2,))
    left.update(a)
    right = RunningMeanStd(epsilon=1e-4, shape=(2,))
    right.update(b)
    # Merging the moments of the second estimator into the first equals one estimator updated with both batches
    # (up to the second estimator's own prior, whose weight is 1e-4).
    left.update_from_moments(right.mean, right.var, right.count)
    both = RunningMeanStd(epsilon=1e-4, shape=(2,))
    both.update(np.concatenate([a, b]))
    np.testing.assert_allclose(left.mean, both.mean, rtol=1e-5)
    np.testing.assert_allclose(left.var, both.var, rtol=1e-5)
    assert left.count == pytest.approx(both.count + 1e-4)


def test_single_value_batches_track_stream():
    rms = RunningMeanStd(epsilon=1e-8)
    values = np.array([1.0, 2.0, 4.0, 8.0])
    for value in values:
        rms.update(np.array([value]))
    assert rms.mean == pytest.approx(values.mean(), rel=1e-6)
    assert rms.var == pytest.approx(values.var(), rel=1e-6)


def test_combine_equals_one_stream_and_copy_is_independent():
    """SB3's ``RunningMeanStd.combine`` / ``copy``: merging two streams' statistics equals one stream over both."""
    rng = np.random.default_rng(0)
    first, second, both = RunningMeanStd(shape=(3,)), RunningMeanStd(shape=(3,)), RunningMeanStd(shape=(3,))
    for _ in range(15):
        batch = rng.normal(size=(4, 3))
        first.update(batch)
        both.update(batch)
    for _ in range(19):
        batch = rng.normal(size=(2, 3)) + 1.0
        second.update(batch)
        both.update(batch)
    first.combine(second)  # equal up to the initial count epsilon (1e-4), counted once per stream
    np.testing.assert_allclose(first.mean, both.mean, rtol=1e-5)
    np.testing.assert_allclose(first.var, both.var, rtol=1e-5)
    twin = both.copy()
    np.testing.assert_allclose(twin.mean, both.mean)
    assert twin.count == both.count and twin.mean is not both.mean and twin.var is not both.var
    twin.update(np.ones((5, 3)))
    assert not np.allclose(twin.mean, both.mean)
