"""GAIL's discriminator (``TransitionClassifier``): one network for the TF losses and the NumPy rollout reward."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from sbtf.common.mpi_adam import MpiAdam
from sbtf.common.mpi_running_mean_std import RunningMeanStd
from sbtf.common.nn.network_ops import TF_OPS, NumpyOps
from sbtf.gail.adversary import TransitionClassifier

OBS_SPACE = gym.spaces.Box(-1.0, 1.0, (2, 3), np.float32)
ACTION_SPACES = {"discrete": gym.spaces.Discrete(4), "box": gym.spaces.Box(-1.0, 1.0, (2,), np.float32)}
SB2_NAMES = [f"adversary/{scope}/{var}:0" for scope in ("fully_connected", "fully_connected_1", "fully_connected_2")
             for var in ("weights", "biases")]


def _batch(action_space, rng: np.random.Generator, n: int, shift: float = 0.0):
    obs = rng.normal(shift, 1.5, (n,) + OBS_SPACE.shape).astype(np.float32)
    if isinstance(action_space, gym.spaces.Discrete):
        actions = rng.integers(0, action_space.n, n)
    else:
        actions = rng.normal(shift, 1.0, (n,) + action_space.shape).astype(np.float32)
    return obs, actions


def _discriminator_update(clf: TransitionClassifier, action_space, adam: MpiAdam, rng: np.random.Generator) -> None:
    """One GAIL discriminator step as TRPO runs it: statistics of both batches, then one Adam step."""
    gen_obs, gen_acs = _batch(action_space, rng, 32)
    exp_obs, exp_acs = _batch(action_space, rng, 32, shift=0.7)
    clf.obs_rms.update(np.concatenate([gen_obs.reshape(32, -1), exp_obs.reshape(32, -1)]))
    *_, grad = clf.lossandgrad(gen_obs, gen_acs, exp_obs, exp_acs)
    clf.apply_gradient(adam, grad, 1e-2)


@pytest.mark.parametrize("kind", sorted(ACTION_SPACES))
def test_numpy_reward_follows_updates_with_one_read(kind):
    rng = np.random.default_rng(3)
    clf = TransitionClassifier(OBS_SPACE, ACTION_SPACES[kind], hidden_size=16)
    assert list(clf.named_parameters()) == SB2_NAMES
    assert clf.reward_path.uses_numpy
    adam = MpiAdam(clf.get_trainable_variables())
    obs, actions = _batch(ACTION_SPACES[kind], rng, 20, shift=0.3)
    before = clf.get_reward(obs, actions)
    np.testing.assert_allclose(before, clf.reward_tf(obs, actions), rtol=1e-5, atol=1e-5)

    for _ in range(3):
        _discriminator_update(clf, ACTION_SPACES[kind], adam, rng)
    reads = clf.reward_path.n_reads
    after = clf.get_reward(obs, actions)
    assert clf.reward_path.n_reads == reads + 1  # stale copies: one compiled read for all three updates
    assert not np.allclose(after, before)
    np.testing.assert_allclose(after, clf.reward_tf(obs, actions), rtol=1e-5, atol=1e-5)
    clf.get_reward(obs[:1], actions[:1])
    assert clf.reward_path.n_reads == reads + 1  # fresh copies: no TF read per rollout step

    # the observation statistics change outside the weights: the reward follows without a weight read
    clf.obs_rms.update(rng.normal(-2.0, 3.0, (64,) + OBS_SPACE.shape))
    moved = clf.get_reward(obs, actions)
    assert clf.reward_path.n_reads == reads + 1
    assert not np.allclose(moved, after)
    np.testing.assert_allclose(moved, clf.reward_tf(obs, actions), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", sorted(ACTION_SPACES))
def test_weights_changed_after_direct_assignment(kind):
    rng = np.random.default_rng(5)
    clf = TransitionClassifier(OBS_SPACE, ACTION_SPACES[kind], hidden_size=8, normalize=False)
    obs, actions = _batch(ACTION_SPACES[kind], rng, 10)
    clf.get_reward(obs, actions)
    for var in clf.get_trainable_variables():
        var.assign(rng.normal(0.0, 0.5, var.shape).astype(np.float32))
    clf.weights_changed()
    np.testing.assert_allclose(clf.get_reward(obs, actions), clf.reward_tf(obs, actions), rtol=1e-5, atol=1e-5)
    # a tracked write needs no call: assign_variables (what load / MPI syncs use)
    from sbtf.common.compile.weight_tracking import assign_variables

    assign_variables([(var, rng.normal(0.0, 0.5, var.shape).astype(np.float32))
                      for var in clf.get_trainable_variables()])
    np.testing.assert_allclose(clf.get_reward(obs, actions), clf.reward_tf(obs, actions), rtol=1e-5, atol=1e-5)


def test_reward_of_single_transition_and_mismatched_lengths():
    clf = TransitionClassifier(OBS_SPACE, ACTION_SPACES["discrete"], hidden_size=8)
    reward = clf.get_reward(np.zeros(OBS_SPACE.shape, np.float32), 2)
    assert reward.shape == (1, 1) and reward.dtype == np.float32 and reward[0, 0] > 0
    with pytest.raises(ValueError, match="2 observations but 3 actions"):
        clf.get_reward(np.zeros((2,) + OBS_SPACE.shape, np.float32), [0, 1, 2])


def test_one_hot_and_standardize_agree_between_backends():
    stats = RunningMeanStd(shape=(3,), name="test_stats")
    stats.update(np.random.default_rng(0).normal(1.0, 2.0, (40, 3)))
    x = np.random.default_rng(1).normal(0.0, 1.0, (5, 3)).astype(np.float32)
    numpy_ops = NumpyOps({}, {})
    np.testing.assert_allclose(numpy_ops.standardize(x, stats), TF_OPS.standardize(tf.constant(x), stats).numpy(),
                               rtol=1e-6, atol=1e-6)
    indices = np.array([[3], [0], [1]])
    np.testing.assert_array_equal(numpy_ops.one_hot(indices, 4), TF_OPS.one_hot(tf.constant(indices), 4).numpy())
    assert numpy_ops.one_hot(indices, 4).dtype == np.float32
    np.testing.assert_allclose(numpy_ops.log(x ** 2 + 1), TF_OPS.log(tf.constant(x ** 2 + 1)).numpy(), rtol=1e-6)
