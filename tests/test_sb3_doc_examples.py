"""stable-baselines3's documentation examples, run with only the import lines changed (``stable_baselines3`` ->
``sbtf.sb3`` / the sbtf module holding the name) and PyTorch layers written as Keras ones: PPO, A2C, DQN, SAC, TD3,
DDPG, HER, a custom ``BaseFeaturesExtractor`` (CNN), a Dict-observation extractor and a ``CombinedExtractor``
subclass, an Optuna objective, VecNormalize save/load with a separate eval env, a callback calling ``env_method``.
Timesteps are cut to keep the default suite fast; each test checks what the example relies on."""
from __future__ import annotations

import os

import gymnasium as gym
import numpy as np
import pytest

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def test_ppo_example(tmp_path):
    from sbtf.sb3 import PPO  # was: from stable_baselines3 import PPO
    from sbtf.common.env_util import make_vec_env

    vec_env = make_vec_env("CartPole-v1", n_envs=4)
    model = PPO("MlpPolicy", vec_env, n_steps=64, batch_size=64, verbose=0)
    model.learn(total_timesteps=512)
    model.save(tmp_path / "ppo_cartpole")
    del model
    model = PPO.load(tmp_path / "ppo_cartpole")
    obs = vec_env.reset()
    for _ in range(20):
        action, _states = model.predict(obs)
        obs, rewards, dones, info = vec_env.step(action)
    assert action.shape == (4,) and model.num_timesteps == 512


def test_a2c_example(tmp_path):
    from sbtf.sb3 import A2C
    from sbtf.common.env_util import make_vec_env

    vec_env = make_vec_env("CartPole-v1", n_envs=4)
    model = A2C("MlpPolicy", vec_env, verbose=0)
    model.learn(total_timesteps=400)
    model.save(tmp_path / "a2c_cartpole")
    del model
    model = A2C.load(tmp_path / "a2c_cartpole")
    obs = vec_env.reset()
    action, _states = model.predict(obs)
    assert vec_env.action_space.contains(int(action[0])) and model.n_steps == 5  # SB3's A2C default


def test_dqn_example(tmp_path):
    from sbtf.sb3 import DQN

    env = gym.make("CartPole-v1")
    model = DQN("MlpPolicy", env, learning_starts=100, verbose=0)
    model.learn(total_timesteps=300, log_interval=4)
    model.save(tmp_path / "dqn_cartpole")
    del model
    model = DQN.load(tmp_path / "dqn_cartpole")
    obs, info = env.reset()
    for _ in range(30):
        action, _states = model.predict(obs, deterministic=True)
        obs, reward, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            obs, info = env.reset()
    assert model.exploration_final_eps == 0.05 and model.target_update_interval == 10000


def test_sac_example(tmp_path):
    from sbtf.sb3 import SAC

    env = gym.make("Pendulum-v1")
    model = SAC("MlpPolicy", env, learning_starts=50, verbose=0)
    model.learn(total_timesteps=120, log_interval=4)
    model.save(tmp_path / "sac_pendulum")
    del model
    model = SAC.load(tmp_path / "sac_pendulum")
    obs, info = env.reset()
    action, _states = model.predict(obs, deterministic=True)
    assert action.shape == (1,) and -2 <= float(action[0]) <= 2


@pytest.mark.parametrize("algo", ["TD3", "DDPG"])
def test_td3_ddpg_example(algo, tmp_path):
    import sbtf.sb3
    from sbtf.common.noise import NormalActionNoise

    model_class = getattr(sbtf.sb3, algo)
    env = gym.make("Pendulum-v1")
    # The noise objects for TD3 / DDPG
    n_actions = env.action_space.shape[-1]
    action_noise = NormalActionNoise(mean=np.zeros(n_actions), sigma=0.1 * np.ones(n_actions))
    model = model_class("MlpPolicy", env, action_noise=action_noise, learning_starts=50, verbose=0)
    model.learn(total_timesteps=120, log_interval=10)
    vec_env = model.get_env()
    model.save(tmp_path / f"{algo.lower()}_pendulum")
    del model
    model = model_class.load(tmp_path / f"{algo.lower()}_pendulum")
    obs = vec_env.reset()
    action, _states = model.predict(obs)
    obs, rewards, dones, info = vec_env.step(action)
    assert action.shape == (1, 1)


def test_her_example(tmp_path):
    from sbtf.sb3 import DDPG, DQN, SAC, TD3, HerReplayBuffer
    from sbtf.sb3.common.envs import BitFlippingEnv
    from sbtf.sb3.her.goal_selection_strategy import GoalSelectionStrategy

    model_class = DQN  # works also with SAC, DDPG and TD3
    n_bits = 15
    env = BitFlippingEnv(n_bits=n_bits, continuous=model_class in [DDPG, SAC, TD3], max_steps=n_bits)
    goal_selection_strategy = "future"  # equivalent to GoalSelectionStrategy.FUTURE
    model = model_class("MultiInputPolicy", env, replay_buffer_class=HerReplayBuffer,
                        replay_buffer_kwargs=dict(n_sampled_goal=4, goal_selection_strategy=goal_selection_strategy),
                        learning_starts=60, verbose=0)
    model.learn(200)
    model.save(tmp_path / "her_bit_env")
    model = model_class.load(tmp_path / "her_bit_env", env=env)
    obs, info = env.reset()
    for _ in range(20):
        action, _ = model.predict(obs, deterministic=True)
        obs, reward, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            obs, info = env.reset()
    assert model.replay_buffer.goal_selection_strategy == GoalSelectionStrategy.FUTURE


class _SmallImageEnv(gym.Env):
    """Random 36x36 RGB images, reward 1 for action 0: a small stand-in for the docs' Atari env."""

    observation_space = gym.spaces.Box(0, 255, (36, 36, 3), np.uint8)
    action_space = gym.spaces.Discrete(3)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.observation_space.sample(), {}

    def step(self, action):
        self.t += 1
        return self.observation_space.sample(), float(action == 0), False, self.t >= 20, {}


def test_custom_cnn_features_extractor():
    import keras
    import tensorflow as tf
    from sbtf.sb3 import PPO
    from sbtf.common.extractors import BaseFeaturesExtractor  # was: stable_baselines3.common.torch_layers

    class CustomCNN(BaseFeaturesExtractor):
        """:param observation_space: (gym.Space)
        :param features_dim: (int) Number of features extracted."""

        def __init__(self, observation_space: gym.spaces.Box, features_dim: int = 256):
            super().__init__(observation_space, features_dim)
            self.cnn = keras.Sequential([
                keras.layers.Conv2D(32, 8, strides=4, activation="relu"),
                keras.layers.Conv2D(64, 4, strides=2, activation="relu"),
                keras.layers.Flatten(),
            ])
            self.linear = keras.layers.Dense(features_dim, activation=tf.nn.relu)

        def call(self, observations):
            return self.linear(self.cnn(observations))

    policy_kwargs = dict(features_extractor_class=CustomCNN, features_extractor_kwargs=dict(features_dim=128))
    model = PPO("CnnPolicy", _SmallImageEnv(), policy_kwargs=policy_kwargs, n_steps=32, batch_size=16, n_epochs=2,
                verbose=0)
    model.learn(64)
    extractor = model.policy.features_extractor
    assert isinstance(extractor, CustomCNN) and extractor.features_dim == 128
    action, _ = model.predict(_SmallImageEnv().observation_space.sample())
    assert 0 <= int(action) < 3


class _ImageAndVectorEnv(gym.Env):
    """Dict observations {"image": 36x36x1 uint8 (NatureCNN's smallest input), "vector": 3 floats}; reward 1 for the
    action matching the sign of vector[0]."""

    observation_space = gym.spaces.Dict({"image": gym.spaces.Box(0, 255, (36, 36, 1), np.uint8),
                                         "vector": gym.spaces.Box(-1, 1, (3,), np.float32)})
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self.obs = self.observation_space.sample()
        return self.obs, {}

    def step(self, action):
        reward = float(int(action) == int(self.obs["vector"][0] > 0))
        self.t += 1
        self.obs = self.observation_space.sample()
        return self.obs, reward, False, self.t >= 16, {}


def test_custom_combined_extractor_for_dict_observations():
    import keras
    import tensorflow as tf
    from sbtf.sb3 import PPO
    from sbtf.common.extractors import BaseFeaturesExtractor

    class CustomCombinedExtractor(BaseFeaturesExtractor):
        def __init__(self, observation_space: gym.spaces.Dict):
            # We do not know features-dim here before going over all the items, so put something dummy for now.
            super().__init__(observation_space, features_dim=1)
            self.extractors = {}
            total_concat_size = 0
            # We need to know size of the output of this extractor, so go over all the spaces and compute output
            for key, subspace in observation_space.spaces.items():
                if key == "image":
                    # Max-pool by 4, then flatten (channels last in TensorFlow)
                    self.extractors[key] = keras.Sequential([keras.layers.MaxPool2D(4), keras.layers.Flatten()])
                    total_concat_size += subspace.shape[0] // 4 * subspace.shape[1] // 4 * subspace.shape[2]
                elif key == "vector":
                    # Run through a simple MLP
                    self.extractors[key] = keras.layers.Dense(16)
                    total_concat_size += 16
            # Update the features dim manually
            self._features_dim = total_concat_size

        def call(self, observations):
            encoded_tensor_list = [extractor(observations[key]) for key, extractor in self.extractors.items()]
            return tf.concat(encoded_tensor_list, axis=1)

    model = PPO("MultiInputPolicy", _ImageAndVectorEnv(), n_steps=32, batch_size=16, n_epochs=2,
                policy_kwargs=dict(features_extractor_class=CustomCombinedExtractor), verbose=0)
    model.learn(64)
    assert model.policy.features_extractor.features_dim == 9 * 9 * 1 + 16
    action, _ = model.predict(_ImageAndVectorEnv().observation_space.sample(), deterministic=True)
    assert int(action) in (0, 1)


def test_combined_extractor_subclass():
    from sbtf.sb3 import SAC
    from sbtf.common.extractors import CombinedExtractor

    class SmallCombined(CombinedExtractor):
        """The default Dict extractor with a 32-feature CNN per image key."""

        def __init__(self, observation_space: gym.spaces.Dict):
            super().__init__(observation_space, cnn_output_dim=32)

    class ContinuousImageAndVectorEnv(_ImageAndVectorEnv):
        action_space = gym.spaces.Box(-1, 1, (1,), np.float32)

        def step(self, action):
            return super().step(int(action[0] > 0))

    model = SAC("MultiInputPolicy", ContinuousImageAndVectorEnv(), learning_starts=20, batch_size=16,
                buffer_size=200, policy_kwargs=dict(features_extractor_class=SmallCombined), verbose=0)
    model.learn(40)
    extractor = model.policy.actor.features_extractor.layer  # the user's layer inside sbtf's named scope
    assert isinstance(extractor, SmallCombined) and extractor.features_dim == 32 + 3
    action, _ = model.predict(ContinuousImageAndVectorEnv().observation_space.sample(), deterministic=True)
    assert action.shape == (1,) and -1 <= float(action[0]) <= 1


def test_optuna_objective_building_ppo_and_evaluate_policy():
    optuna = pytest.importorskip("optuna")
    from sbtf.sb3 import PPO
    from sbtf.common.evaluation import evaluate_policy

    def objective(trial: "optuna.Trial") -> float:
        learning_rate = trial.suggest_float("learning_rate", 1e-5, 1e-2, log=True)
        gamma = trial.suggest_categorical("gamma", [0.98, 0.99, 0.999])
        model = PPO("MlpPolicy", "CartPole-v1", learning_rate=learning_rate, gamma=gamma, n_steps=64,
                    batch_size=32, n_epochs=2, verbose=0)
        model.learn(128)
        mean_reward, _ = evaluate_policy(model, model.get_env(), n_eval_episodes=3, warn=False)
        return mean_reward

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.RandomSampler(seed=0))
    study.optimize(objective, n_trials=2)
    assert len(study.trials) == 2 and all(t.state == optuna.trial.TrialState.COMPLETE for t in study.trials)
    assert study.best_value >= 8  # CartPole episodes last at least 8 steps


def test_vec_normalize_save_load_with_a_separate_eval_env(tmp_path):
    from sbtf.sb3 import PPO
    from sbtf.common.vec_env import DummyVecEnv, VecNormalize

    vec_env = DummyVecEnv([lambda: gym.make("Pendulum-v1")])
    # Automatically normalize the input features and reward
    vec_env = VecNormalize(vec_env, norm_obs=True, norm_reward=True, clip_obs=10.0)
    model = PPO("MlpPolicy", vec_env, n_steps=64, batch_size=32, n_epochs=1)
    model.learn(total_timesteps=128)
    # Don't forget to save the VecNormalize statistics when saving the agent
    log_dir = str(tmp_path)
    model.save(os.path.join(log_dir, "ppo_pendulum"))
    stats_path = os.path.join(log_dir, "vec_normalize.pkl")
    vec_env.save(stats_path)
    trained_mean = vec_env.obs_rms.mean.copy()
    del model, vec_env

    # Load the saved statistics
    vec_env = DummyVecEnv([lambda: gym.make("Pendulum-v1")])
    vec_env = VecNormalize.load(stats_path, vec_env)
    # do not update them at test time
    vec_env.training = False
    # reward normalization is not needed at test time
    vec_env.norm_reward = False
    # Load the agent
    model = PPO.load(os.path.join(log_dir, "ppo_pendulum"), env=vec_env)
    np.testing.assert_allclose(vec_env.obs_rms.mean, trained_mean)
    assert model.get_vec_normalize_env() is vec_env
    obs = vec_env.reset()
    for _ in range(5):
        action, _ = model.predict(obs, deterministic=True)
        obs, reward, done, info = vec_env.step(action)
    np.testing.assert_allclose(vec_env.obs_rms.mean, trained_mean)  # frozen at test time
    raw = vec_env.get_original_obs()
    np.testing.assert_allclose(obs, np.clip((raw - trained_mean) / np.sqrt(vec_env.obs_rms.var + vec_env.epsilon),
                                            -10, 10), rtol=1e-5, atol=1e-6)


class _DifficultyEnv(gym.Env):
    """CartPole-like toy whose difficulty a callback sets through ``env_method``."""

    observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self):
        self.difficulty = 0

    def set_difficulty(self, level: int) -> None:
        self.difficulty = level

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.t += 1
        return np.zeros(2, np.float32), 1.0, False, self.t >= 10, {}


def test_callback_calling_env_method():
    from sbtf.sb3 import A2C
    from sbtf.common.callbacks import BaseCallback
    from sbtf.common.env_util import make_vec_env

    class CurriculumCallback(BaseCallback):
        """Raises the envs' difficulty every ``every`` steps through ``training_env.env_method``."""

        def __init__(self, every: int, verbose: int = 0):
            super().__init__(verbose)
            self.every = every
            self.levels = []

        def _on_step(self) -> bool:
            if self.num_timesteps % self.every == 0:
                level = self.num_timesteps // self.every
                self.training_env.env_method("set_difficulty", level)
                self.levels.append(self.training_env.get_attr("difficulty"))
            return True

    vec_env = make_vec_env(_DifficultyEnv, n_envs=2)
    callback = CurriculumCallback(every=20)
    A2C("MlpPolicy", vec_env, n_steps=5).learn(100, callback=callback)
    assert callback.levels == [[level, level] for level in range(1, 6)]
    assert vec_env.get_attr("difficulty") == [5, 5]
