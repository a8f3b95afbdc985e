"""Behaviour of sbtf.common.noise: SB2 maths, attribute names and plain-data round trips."""
import json

import numpy as np
import pytest

from sbtf.common import noise as nz


def roundtrip(obj):
    data = json.loads(json.dumps(obj.to_dict()))
    assert data["__noise__"] == type(obj).__name__
    return type(obj).from_dict(data), nz.noise_from_dict(data)


def test_adaptive_param_noise():
    spec = nz.AdaptiveParamNoiseSpec()
    assert (spec.initial_stddev, spec.desired_action_stddev, spec.adoption_coefficient) == (0.1, 0.1, 1.01)
    assert spec.current_stddev == 0.1
    spec.adapt(0.5)  # too far: decrease
    assert spec.current_stddev == pytest.approx(0.1 / 1.01)
    spec.adapt(0.01)  # too close: increase
    spec.adapt(0.01)
    assert spec.current_stddev == pytest.approx(0.1 * 1.01)
    assert spec.get_stats() == {"param_noise_stddev": spec.current_stddev}
    assert "desired_action_stddev=0.1" in repr(spec)
    a, b = roundtrip(spec)
    for restored in (a, b):
        assert isinstance(restored, nz.AdaptiveParamNoiseSpec)
        assert restored.current_stddev == spec.current_stddev
        assert restored.adoption_coefficient == 1.01


def test_action_noise_base():
    base = nz.ActionNoise()
    base.reset()
    with pytest.raises(NotImplementedError):
        base()
    with pytest.raises(TypeError):
        base.to_dict()


def test_normal_action_noise_statistics():
    np.random.seed(0)
    mean, sigma = np.array([1.0, -2.0]), np.array([0.5, 0.1])
    noise = nz.NormalActionNoise(mean, sigma)
    samples = np.array([noise() for _ in range(20000)])
    assert samples.shape == (20000, 2)
    np.testing.assert_allclose(samples.mean(axis=0), mean, atol=0.02)
    np.testing.assert_allclose(samples.std(axis=0), sigma, rtol=0.03)
    assert noise._mu is mean and noise._sigma is sigma
    a, b = roundtrip(noise)
    np.testing.assert_array_equal(a._mu, mean)
    assert a._sigma.dtype == sigma.dtype and a._sigma.shape == (2,)
    np.random.seed(3)
    x = noise()
    np.random.seed(3)
    np.testing.assert_array_equal(b(), x)


def test_normal_action_noise_scalar_params():
    noise = nz.NormalActionNoise(0.0, 0.2)
    a, _ = roundtrip(noise)
    assert a._mu == 0.0 and a._sigma == 0.2


def test_ornstein_uhlenbeck_recurrence_and_reset():
    mean = np.zeros(3)
    sigma = 0.3 * np.ones(3)
    noise = nz.OrnsteinUhlenbeckActionNoise(mean, sigma, theta=0.2, dt=0.05)
    assert (noise._theta, noise._dt, noise.initial_noise) == (0.2, 0.05, None)
    np.testing.assert_array_equal(noise.noise_prev, np.zeros(3))
    np.random.seed(1)
    first = noise()
    second = noise()
    np.random.seed(1)
    eps1 = np.random.normal(size=3)
    eps2 = np.random.normal(size=3)
    expected1 = 0.0 + 0.2 * (0.0 - 0.0) * 0.05 + 0.3 * np.sqrt(0.05) * eps1
    expected2 = expected1 + 0.2 * (0.0 - expected1) * 0.05 + 0.3 * np.sqrt(0.05) * eps2
    np.testing.assert_allclose(first, expected1)
    np.testing.assert_allclose(second, expected2)
    noise.reset()
    np.testing.assert_array_equal(noise.noise_prev, np.zeros(3))

    init = np.array([1.0, 2.0, 3.0])
    with_init = nz.OrnsteinUhlenbeckActionNoise(mean, sigma, initial_noise=init)
    with_init()
    with_init.reset()
    np.testing.assert_array_equal(with_init.noise_prev, init)
    assert "OrnsteinUhlenbeckActionNoise(mu=" in repr(with_init)


def test_ornstein_uhlenbeck_roundtrip_keeps_state():
    noise = nz.OrnsteinUhlenbeckActionNoise(np.array([0.1, -0.1], dtype=np.float32), np.array([0.2, 0.2]),
                                            initial_noise=np.array([0.5, 0.5]))
    np.random.seed(2)
    for _ in range(5):
        noise()
    a, b = roundtrip(noise)
    np.testing.assert_array_equal(a.noise_prev, noise.noise_prev)
    assert a._mu.dtype == np.float32
    np.testing.assert_array_equal(a.initial_noise, [0.5, 0.5])
    np.random.seed(9)
    expected = noise()
    np.random.seed(9)
    np.testing.assert_allclose(b(), expected)


@pytest.mark.parametrize("bad", [
    {"__noise__": "Popen", "args": ["ls"]},
    {"mean": [0.0]},
    {"__noise__": "NormalActionNoise", "mean": {"array": ["x"], "dtype": "|O"}, "sigma": 1.0},
])
def test_noise_from_dict_rejects_unknown(bad):
    with pytest.raises(ValueError):
        nz.noise_from_dict(bad)


def test_from_dict_checks_class():
    data = nz.NormalActionNoise(0.0, 1.0).to_dict()
    with pytest.raises(ValueError):
        nz.OrnsteinUhlenbeckActionNoise.from_dict(data)
