"""HER: BitFlippingEnv, HERGoalEnvWrapper, the replay wrapper's goal strategies, learning with DQN / SAC, HER over TD3
and DDPG, save/load with dict observations, errors."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from sbtf import DDPG, DQN, HER, PPO2, SAC, TD3
from sbtf.common.bit_flipping_env import BitFlippingEnv
from sbtf.common.buffers import ReplayBuffer
from sbtf.common.vec_env import DummyVecEnv, VecCheckNan
from sbtf.her import (KEY_ORDER, KEY_TO_GOAL_STRATEGY, GoalSelectionStrategy, HERGoalEnvWrapper,
                      HindsightExperienceReplayWrapper)


def success_rate(model, env, n_episodes: int = 50, seed: int = 1000) -> float:
    """Fraction of episodes (deterministic actions, dict observations given to predict) that reach the goal."""
    successes = 0
    for episode in range(n_episodes):
        obs, _ = env.reset(seed=seed + episode)
        done, info = False, {}
        while not done:
            action, _ = model.predict(obs, deterministic=True)
            obs, _, terminated, truncated, info = env.step(action)
            done = terminated or truncated
        successes += bool(info["is_success"])
    return successes / n_episodes


# ------------------------------------------------------------------------------------------ environments
@pytest.mark.parametrize("kwargs", [dict(), dict(continuous=True), dict(discrete_obs_space=True)])
def test_bit_flipping_env(kwargs):
    env = BitFlippingEnv(n_bits=4, max_steps=6, **kwargs)
    check_env(env, skip_render_check=True)
    assert list(env.observation_space.spaces) == KEY_ORDER
    obs, info = env.reset(seed=0)
    assert env.observation_space.contains(obs) and info == {}
    # one bit from the goal: flipping it reaches the goal, terminates the episode and succeeds
    env.state[:] = 1
    env.state[2] = 0
    action = 2 if not env.continuous else np.array([-1, -1, 1, -1], np.float32)
    obs, reward, terminated, truncated, info = env.step(action)
    assert (reward, terminated, truncated, info) == (0.0, True, False, {"is_success": True})
    assert env.compute_reward(obs["achieved_goal"], obs["desired_goal"], info) == 0.0
    assert env.compute_reward(obs["observation"], obs["desired_goal"], info) == 0.0  # the state is the achieved goal
    # time limit: cut as a truncation, not a termination
    env.reset(seed=1)
    env.state[:] = 0
    for step in range(6):
        no_success = 0 if not env.continuous else np.where(np.arange(4) == 0, 1.0, -1.0).astype(np.float32)
        _, reward, terminated, truncated, _ = env.step(no_success)  # flips bit 0 back and forth
        assert reward == -1.0 and not terminated and truncated == (step == 5)


def test_bit_flipping_compute_reward_batches():
    env = BitFlippingEnv(n_bits=3)
    achieved = np.array([[1, 1, 1], [0, 1, 1], [1, 1, 1]], np.int8)
    np.testing.assert_array_equal(env.compute_reward(achieved, np.ones((3, 3)), None), [0.0, -1.0, 0.0])
    discrete = BitFlippingEnv(n_bits=3, discrete_obs_space=True)
    assert discrete.observation_space["desired_goal"].contains(7)  # SB2's Discrete(2 ** n - 1) could not hold it
    np.testing.assert_array_equal(discrete.compute_reward(np.array([7, 3]), np.array([7, 7]), None), [0.0, -1.0])


@pytest.mark.parametrize("kwargs,space", [(dict(), gym.spaces.MultiBinary), (dict(continuous=True),
                                                                               gym.spaces.MultiBinary),
                                          (dict(discrete_obs_space=True), gym.spaces.MultiDiscrete)])
def test_her_goal_env_wrapper(kwargs, space):
    wrapped = HERGoalEnvWrapper(BitFlippingEnv(n_bits=5, **kwargs))
    assert isinstance(wrapped.observation_space, space)
    obs, _ = wrapped.reset(seed=0)
    assert wrapped.observation_space.contains(obs)
    as_dict = wrapped.convert_obs_to_dict(obs)
    assert list(as_dict) == KEY_ORDER
    np.testing.assert_array_equal(wrapped.convert_dict_to_obs(as_dict), obs)
    # concat[observation, achieved_goal, desired_goal]
    raw = wrapped.unwrapped._get_obs()
    if space is gym.spaces.MultiBinary:
        assert wrapped.observation_space.n == 15 and obs.shape == (15,)
        np.testing.assert_array_equal(obs, np.concatenate([raw[k] for k in KEY_ORDER]))
        np.testing.assert_array_equal(obs[10:], np.ones(5))
        batch = np.stack([obs, 1 - obs])  # batches of flat observations convert both ways too
        np.testing.assert_array_equal(wrapped.convert_obs_to_dict(batch)["achieved_goal"], batch[:, 5:10])
        np.testing.assert_array_equal(wrapped.convert_dict_to_obs(wrapped.convert_obs_to_dict(batch)), batch)
    else:
        np.testing.assert_array_equal(wrapped.observation_space.nvec, [32, 32, 32])
        np.testing.assert_array_equal(obs, [raw[k] for k in KEY_ORDER])
    assert wrapped.compute_reward(as_dict["achieved_goal"], as_dict["desired_goal"], {}) in (0.0, -1.0)
    obs, _, _, _, _ = wrapped.step(wrapped.action_space.sample())
    assert wrapped.observation_space.contains(obs)


def test_her_goal_env_wrapper_box_goals():
    class BoxGoalEnv(gym.Env):
        observation_space = gym.spaces.Dict({
            "desired_goal": gym.spaces.Box(-1.0, 1.0, (2,), np.float64),
            "observation": gym.spaces.Box(-5.0, 5.0, (3,), np.float64),
            "achieved_goal": gym.spaces.Box(-2.0, 2.0, (2,), np.float64)})
        action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)

        def compute_reward(self, achieved_goal, desired_goal, info):
            return -np.linalg.norm(np.asarray(achieved_goal) - desired_goal, axis=-1)

    wrapped = HERGoalEnvWrapper(BoxGoalEnv())
    space = wrapped.observation_space
    # bounds in KEY_ORDER, whatever the order of the Dict (SB2 concatenated them in the Dict's order)
    np.testing.assert_array_equal(space.low, [-5, -5, -5, -2, -2, -1, -1])
    assert space.dtype == np.float32 and space.shape == (7,)
    flat = wrapped.convert_dict_to_obs({"observation": np.arange(3.0), "achieved_goal": [3.0, 4.0],
                                        "desired_goal": [5.0, 6.0]})
    np.testing.assert_array_equal(flat, np.arange(7.0))
    assert flat.dtype == np.float32
    assert wrapped.compute_reward([0.0, 0.0], [3.0, 4.0], None) == pytest.approx(-5.0)


# ------------------------------------------------------------------------------------------ replay wrapper
def _episode(env: HERGoalEnvWrapper, length: int, seed: int = 0, truncate: bool = False):
    """A random episode of flat transitions (obs_t, action, reward, obs_tp1, done, info)."""
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    transitions = []
    for t in range(length):
        action = int(rng.integers(env.action_space.n))
        next_obs, reward, _, _, info = env.step(action)
        last = t == length - 1
        info = dict(info, **({"terminal_observation": next_obs, "TimeLimit.truncated": True} if last and truncate
                             else {}))
        transitions.append((obs, action, reward, next_obs, last and not truncate, info))
        obs = next_obs
    return transitions


@pytest.mark.parametrize("strategy", ["future", "final", "episode", "random"])
def test_replay_wrapper_goal_strategies(strategy):
    env = HERGoalEnvWrapper(BitFlippingEnv(n_bits=6, max_steps=100))
    buffer = ReplayBuffer(10_000)
    wrapper = HindsightExperienceReplayWrapper(buffer, n_sampled_goal=3, goal_selection_strategy=strategy,
                                               wrapped_env=env)
    assert wrapper.goal_selection_strategy == KEY_TO_GOAL_STRATEGY[strategy]
    previous = _episode(env, 5, seed=1)
    for transition in previous:
        wrapper.add(*transition)
    n_before = len(buffer)
    episode = _episode(env, 6, seed=2, truncate=True)  # a time-limit cut (done stays False) also ends the episode
    for i, transition in enumerate(episode):
        wrapper.add(*transition)
        assert len(buffer) == n_before or i == len(episode) - 1  # stored only when the episode ends
    n_virtual = 3 * (len(episode) - 1) if strategy == "future" else 3 * len(episode)
    assert len(buffer) == n_before + len(episode) + n_virtual
    assert wrapper.episode_transitions == []
    stored = buffer.storage[n_before:]
    achieved = [env.convert_obs_to_dict(t[0])["achieved_goal"] for t in episode]
    all_achieved = [env.convert_obs_to_dict(o)["achieved_goal"] for o in buffer._obs_t[:len(buffer)]]
    position = 0
    for t, (obs, action, reward, _next_obs, done, _) in enumerate(episode):
        real = stored[position]
        np.testing.assert_array_equal(real[0], obs)
        assert real[1] == action and real[2] == reward and real[4] == float(done)
        position += 1
        if strategy == "future" and t == len(episode) - 1:
            break
        for virtual in stored[position:position + 3]:
            v_obs, v_next = env.convert_obs_to_dict(virtual[0]), env.convert_obs_to_dict(virtual[3])
            goal = v_obs["desired_goal"]
            np.testing.assert_array_equal(v_next["desired_goal"], goal)
            np.testing.assert_array_equal(v_obs["observation"], env.convert_obs_to_dict(obs)["observation"])
            candidates = {"future": achieved[t + 1:], "final": achieved[-1:], "episode": achieved,
                          "random": all_achieved}[strategy]
            assert any(np.array_equal(goal, c) for c in candidates)
            assert virtual[1] == action and virtual[4] == 0.0
            assert virtual[2] == env.compute_reward(v_next["achieved_goal"], goal, None)
        position += 3


def test_replay_wrapper_does_not_stack_and_accepts_enums():
    env = HERGoalEnvWrapper(BitFlippingEnv(n_bits=4))
    inner = ReplayBuffer(100)
    first = HindsightExperienceReplayWrapper(inner, 2, GoalSelectionStrategy.EPISODE, env)
    second = HindsightExperienceReplayWrapper(first, 2, "episode", env)  # a second learn() call
    assert second.replay_buffer is inner and len(second) == 0 and not second.can_sample(1)
    assert HindsightExperienceReplayWrapper(inner, 2, 2, env).goal_selection_strategy is GoalSelectionStrategy.EPISODE
    with pytest.raises(ValueError, match="unknown goal selection strategy"):
        HindsightExperienceReplayWrapper(inner, 2, "nearest", env)


# ------------------------------------------------------------------------------------------ learning
def test_her_dqn_solves_bit_flipping_8_bits():
    n_bits = 8
    model = HER("MlpPolicy", BitFlippingEnv(n_bits, max_steps=n_bits), DQN, n_sampled_goal=4,
                goal_selection_strategy="future", seed=0, learning_rate=1e-3, learning_starts=200,
                exploration_fraction=0.5, exploration_final_eps=0.05, batch_size=64, target_network_update_freq=200,
                policy_kwargs=dict(layers=[64]))
    before = success_rate(model, BitFlippingEnv(n_bits, max_steps=n_bits))
    model.learn(3000)
    assert model.is_using_her() and model.num_timesteps == 3000
    # 1 real + 4 virtual transitions per step, minus the steps that cannot look into the future (one per episode)
    assert len(model.replay_buffer) > 4 * 3000
    after = success_rate(model, BitFlippingEnv(n_bits, max_steps=n_bits))
    assert before < 0.2 and after >= 0.9, (before, after)


def test_her_sac_improves_on_continuous_bit_flipping():
    n_bits = 4
    env_fn = lambda: BitFlippingEnv(n_bits, continuous=True, max_steps=n_bits)  # noqa: E731
    model = HER("MlpPolicy", env_fn(), SAC, n_sampled_goal=4, goal_selection_strategy="future", seed=0,
                learning_rate=1e-3, learning_starts=100, batch_size=64, ent_coef=0.05,
                policy_kwargs=dict(layers=[64, 64]))
    before = success_rate(model, env_fn())
    model.learn(2000)
    after = success_rate(model, env_fn())
    assert after >= before + 0.3, (before, after)


@pytest.mark.slow
def test_her_sac_learns_continuous_bit_flipping():
    n_bits = 6
    env_fn = lambda: BitFlippingEnv(n_bits, continuous=True, max_steps=n_bits)  # noqa: E731
    model = HER("MlpPolicy", env_fn(), SAC, n_sampled_goal=4, goal_selection_strategy="future", seed=0,
                learning_rate=1e-3, learning_starts=100, batch_size=64, ent_coef=0.05,
                policy_kwargs=dict(layers=[64, 64]))
    model.learn(8000)
    assert success_rate(model, env_fn(), n_episodes=100) >= 0.8


@pytest.mark.parametrize("model_class,kwargs,strategy", [
    (TD3, dict(learning_starts=50, train_freq=50, gradient_steps=20, batch_size=32, random_exploration=0.1), "final"),
    (DDPG, dict(nb_rollout_steps=50, nb_train_steps=20, batch_size=32, random_exploration=0.1,
                normalize_observations=True), "episode"),
    (DDPG, dict(nb_rollout_steps=50, nb_train_steps=20, batch_size=32), "random"),
])
def test_her_over_td3_and_ddpg_runs(model_class, kwargs, strategy):
    model = HER("MlpPolicy", BitFlippingEnv(5, continuous=True, max_steps=5), model_class, n_sampled_goal=2,
                goal_selection_strategy=strategy, seed=0, policy_kwargs=dict(layers=[16]), **kwargs)
    assert isinstance(model.model, model_class) and model.goal_selection_strategy == KEY_TO_GOAL_STRATEGY[strategy]
    model.learn(300)
    assert model.num_timesteps == 300 and model.replay_buffer.goal_selection_strategy.name.lower() == strategy
    assert len(model.replay_buffer) > 300  # virtual transitions were stored
    obs, _ = BitFlippingEnv(5, continuous=True).reset(seed=0)
    action, _ = model.predict(obs)
    assert action.shape == (5,) and np.all(np.abs(action) <= 1)
    batch = {key: np.stack([value, value]) for key, value in obs.items()}
    actions, _ = model.predict(batch)
    np.testing.assert_allclose(actions, np.stack([action, action]), atol=1e-6)
    model.learn(100)  # a second learn call keeps one HER wrapper around the same buffer
    assert isinstance(model.replay_buffer.replay_buffer, ReplayBuffer)


# ------------------------------------------------------------------------------------------ save / load
@pytest.mark.parametrize("model_class,kwargs,continuous", [
    (DQN, dict(learning_starts=50, batch_size=16), False),
    (SAC, dict(learning_starts=50, batch_size=16), True),
    (DDPG, dict(nb_rollout_steps=50, nb_train_steps=10, batch_size=16, normalize_observations=True), True),
])
def test_her_save_load_identical_predictions(tmp_path, model_class, kwargs, continuous):
    env_fn = lambda: BitFlippingEnv(4, continuous=continuous, max_steps=4)  # noqa: E731
    model = HER("MlpPolicy", env_fn(), model_class, n_sampled_goal=3, goal_selection_strategy="episode", seed=0,
                policy_kwargs=dict(layers=[16]), **kwargs)
    model.learn(150)
    observations = [env_fn().reset(seed=i)[0] for i in range(5)]
    expected = [model.predict(obs)[0] for obs in observations]
    model.save(tmp_path / "her")
    loaded = HER.load(tmp_path / "her.zip")  # no env: dict observations are flattened with the stored space
    assert isinstance(loaded.model, model_class) and loaded.model_class is model_class
    assert loaded.n_sampled_goal == 3 and loaded.goal_selection_strategy is GoalSelectionStrategy.EPISODE
    assert loaded.observation_space == model.observation_space and loaded.action_space == model.action_space
    for obs, action in zip(observations, expected):
        np.testing.assert_array_equal(loaded.predict(obs)[0], action)
    for name, value in model.get_parameters().items():
        np.testing.assert_array_equal(loaded.get_parameters()[name], value)
    from sbtf.common import save_util
    data, _, info = save_util.load_from_zip_bytes(save_util.read_file_bytes(str(tmp_path / "her.zip")))
    assert info["algo"] == "HER"
    assert data["model_class"] is model_class and data["goal_selection_strategy"] is GoalSelectionStrategy.EPISODE
    assert isinstance(data["her_obs_space"], gym.spaces.Dict) and data["her_action_space"] == model.action_space
    with pytest.raises(ValueError, match="holds a HER model"):
        model_class.load(tmp_path / "her.zip")
    # with an env, training goes on
    resumed = HER.load(tmp_path / "her.zip", env=env_fn())
    resumed.learn(60)
    assert isinstance(resumed.replay_buffer, HindsightExperienceReplayWrapper)


def test_her_from_data_accepts_names_like_legacy_files():
    """The legacy loader hands over model_class as a class or name and the strategy as a lower-case name."""
    model = HER("MlpPolicy", BitFlippingEnv(3, continuous=True), "td3",
                goal_selection_strategy=GoalSelectionStrategy.FINAL, seed=0, policy_kwargs=dict(layers=[8]))
    assert model.model_class is TD3
    data = model._get_save_data()
    data.update(model_class="TD3", goal_selection_strategy="final")
    rebuilt = HER._from_data(data, model.get_parameters())
    assert rebuilt.model_class is TD3 and rebuilt.goal_selection_strategy is GoalSelectionStrategy.FINAL
    obs = BitFlippingEnv(3, continuous=True).reset(seed=0)[0]
    np.testing.assert_array_equal(rebuilt.predict(obs)[0], model.predict(obs)[0])


# ------------------------------------------------------------------------------------------ errors
def test_her_errors():
    with pytest.raises(ValueError, match="HER only works with Off policy model"):
        HER("MlpPolicy", BitFlippingEnv(3), PPO2)
    with pytest.raises(ValueError, match="goal environment"):
        HER("MlpPolicy", "CartPole-v1", DQN)
    with pytest.raises(ValueError, match="VecEnvWrapper"):
        HER("MlpPolicy", VecCheckNan(DummyVecEnv([lambda: BitFlippingEnv(3)])), DQN)
    with pytest.raises(ValueError, match="one goal environment"):
        HER("MlpPolicy", DummyVecEnv([lambda: BitFlippingEnv(3)] * 2), DQN)
    with pytest.raises(ValueError, match="unknown goal selection strategy"):
        HER("MlpPolicy", BitFlippingEnv(3), DQN, goal_selection_strategy="closest")
    model = HER("MlpPolicy", DummyVecEnv([lambda: BitFlippingEnv(3)]), DQN, policy_kwargs=dict(layers=[8]))
    assert isinstance(model.get_env(), HERGoalEnvWrapper) and model.model.n_envs == 1
    with pytest.raises(AttributeError):
        model.no_such_attribute  # noqa: B018
