"""The on-policy storage layer: RolloutBuffer returns (GAE, n-step), the named batch, trajectory segments."""
import numpy as np
import pytest

from sbtf.common.storage.rollout import RolloutBatch, RolloutBuffer, TrajectorySegment, add_vtarg_and_adv


def _filled_buffer(n_steps=5, n_envs=3, seed=0):
    rng = np.random.default_rng(seed)
    buffer = RolloutBuffer(n_steps, n_envs, (2,), np.float32, (), np.int64)
    buffer.reset(start_states=None)
    starts = rng.random((n_steps, n_envs)) < 0.3
    for step in range(n_steps):
        buffer.add(rng.normal(size=(n_envs, 2)), rng.integers(0, 3, n_envs), rng.normal(size=n_envs), starts[step],
                   rng.normal(size=n_envs))
        rewards = rng.normal(size=n_envs)
        buffer.add_rewards(rewards + 1.0, rewards)
    return buffer, rng


def test_gae_matches_a_direct_computation():
    buffer, rng = _filled_buffer()
    last_values, last_dones = rng.normal(size=3).astype(np.float32), np.array([True, False, False])
    gamma, lam = 0.9, 0.8
    buffer.compute_gae(last_values, last_dones, gamma, lam)
    for env in range(3):
        next_value, next_nonterminal, gae = last_values[env], 1.0 - last_dones[env], 0.0
        for step in reversed(range(5)):
            delta = buffer.rewards[step, env] + gamma * next_value * next_nonterminal - buffer.values[step, env]
            gae = delta + gamma * lam * next_nonterminal * gae
            assert buffer.advantages[step, env] == pytest.approx(gae, rel=1e-5, abs=1e-5)
            next_value, next_nonterminal = buffer.values[step, env], 1.0 - buffer.episode_starts[step, env]
    np.testing.assert_allclose(buffer.returns, buffer.advantages + buffer.values, rtol=1e-6)


def test_nstep_returns_reset_at_episode_starts_and_bootstrap():
    buffer, rng = _filled_buffer(seed=1)
    last_values, last_dones = rng.normal(size=3).astype(np.float32), np.array([False, True, False])
    buffer.compute_nstep_returns(last_values, last_dones, gamma=0.5)
    for env in range(3):
        running = 0.0 if last_dones[env] else last_values[env]
        for step in reversed(range(5)):
            if step < 4 and buffer.episode_starts[step + 1, env]:
                running = 0.0
            running = buffer.rewards[step, env] + 0.5 * running
            assert buffer.returns[step, env] == pytest.approx(running, rel=1e-5, abs=1e-6)
    np.testing.assert_allclose(buffer.advantages, buffer.returns - buffer.values)


def test_named_batch_is_env_major_and_copied():
    buffer, _ = _filled_buffer(n_steps=4, n_envs=2)
    buffer.compute_nstep_returns(np.zeros(2, np.float32), np.zeros(2, bool), gamma=0.99)
    batch = buffer.get([{"r": 1.0, "l": 3}])
    assert isinstance(batch, RolloutBatch) and len(batch) == 8
    np.testing.assert_array_equal(batch.observations[:4], buffer.observations[:, 0])  # env 0's steps first
    np.testing.assert_array_equal(batch.true_rewards[4:], buffer.true_rewards[:, 1])
    np.testing.assert_allclose(batch.rewards - batch.true_rewards, np.ones(8, np.float32), rtol=1e-6)
    np.testing.assert_array_equal(batch.masks, buffer.episode_starts.swapaxes(0, 1).reshape(-1))
    assert batch.episode_infos == [{"r": 1.0, "l": 3}] and batch.states is None
    buffer.observations[:] = 0.0
    assert np.any(batch.observations != 0.0)  # the next rollout does not overwrite a batch
    buffer.reset()
    with pytest.raises(RuntimeError, match="0 of 4 steps"):
        buffer.get([])


def _segment(horizon=6):
    rng = np.random.default_rng(3)
    dones = np.zeros(horizon, bool)
    dones[2] = True
    return TrajectorySegment(observations=rng.normal(size=(horizon, 2)).astype(np.float32),
                             rewards=np.ones(horizon, np.float32), dones=dones,
                             episode_starts=np.concatenate([[True], dones[:-1]]),
                             true_rewards=np.ones(horizon, np.float32),
                             vpred=rng.normal(size=horizon).astype(np.float32), actions=np.zeros(horizon, np.int64),
                             nextvpred=0.5, truncated_values=np.zeros(horizon, np.float32), ep_rets=[3.0],
                             ep_lens=[3], ep_true_rets=[3.0], total_timestep=horizon, continue_training=True)


def test_trajectory_segment_reads_like_sb2s_dict_and_becomes_a_batch():
    seg = _segment()
    assert seg["total_timestep"] == 6 and "adv" not in seg and seg.get("adv") is None
    with pytest.raises(ValueError, match="add_vtarg_and_adv"):
        seg.to_batch(np.float32)
    add_vtarg_and_adv(seg, gamma=0.9, lam=0.95)
    assert "adv" in seg and seg["adv"] is seg.adv
    np.testing.assert_allclose(seg["tdlamret"], seg.adv + seg.vpred)
    seg["custom"] = 1
    assert seg["custom"] == 1 and "custom" in seg.keys()
    batch = seg.to_batch(np.float32)
    assert batch.advantages.std() == pytest.approx(1.0, abs=1e-3)  # standardized for PPO1 / TRPO
    raw = seg.to_batch(np.float32, standardize_advantages=False)
    np.testing.assert_array_equal(raw.advantages, seg.adv)
    assert raw.episode_infos == [{"r": 3.0, "l": 3}]
    raw.values[:] = 0.0
    assert np.any(seg.vpred != 0.0)  # the values before the update are a copy


def test_nstep_base_class_lives_in_the_algorithm_layer_only():
    from sbtf.common import base_class
    from sbtf.common.algo import on_policy

    assert not hasattr(base_class, "NStepActorCriticRLModel")  # no alias for old callers (issue #30)
    assert issubclass(on_policy.NStepActorCriticRLModel, on_policy.OnPolicyAlgorithm)
