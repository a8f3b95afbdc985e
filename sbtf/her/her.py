"""Hindsight Experience Replay (stable-baselines 2.x ``HER``) over DQN, SAC, DDPG and TD3.

``HER(policy, env, model_class, n_sampled_goal=4, goal_selection_strategy='future', *args, **kwargs)`` wraps the goal
environment in ``HERGoalEnvWrapper`` (flat observations ``concat[observation, achieved_goal, desired_goal]``), builds
``model_class(policy, wrapped_env, *args, **kwargs)`` and trains it with its replay buffer wrapped in
``HindsightExperienceReplayWrapper``. Attributes that HER does not have itself are the wrapped model's
(``her.num_timesteps``, ``her.replay_buffer``, ...). ``predict`` accepts dict observations.
"""
from __future__ import annotations

import functools
import importlib
from typing import Any, Optional

from sbtf.common import save_util
from sbtf.common.fileio import model_schema
from sbtf.common.base_class import BaseRLModel, OffPolicyRLModel
from sbtf.common.file_errors import ModelDataError
from sbtf.common.vec_env import VecEnv, VecEnvWrapper
from sbtf.her.replay_buffer import GoalSelectionStrategy, HindsightExperienceReplayWrapper, goal_selection_strategy_from
from sbtf.her.utils import GoalObsConverter, HERGoalEnvWrapper

_MODEL_CLASSES = {"DQN": "sbtf.deepq", "SAC": "sbtf.sac", "TD3": "sbtf.td3", "DDPG": "sbtf.ddpg"}


class UnsupportedHEREnvError(ValueError, AssertionError):
    """
    HER was given an environment it cannot wrap (a VecEnv wrapper such as ``VecNormalize``, or several envs).
    Both a ``ValueError`` (sbtf's convention) and an ``AssertionError`` (what stable-baselines 2's ``assert`` raised,
    so SB2 code catching it keeps working).
    """


def _resolve_model_class(model_class: Any) -> type:
    """The off-policy class from a class or its name (``"SAC"``, ``"sac"``, ``"sbtf.sac.sac.SAC"``)."""
    if isinstance(model_class, str):
        name = model_class.rsplit(".", 1)[-1].upper()
        if name not in _MODEL_CLASSES:
            raise ValueError(f"Error: HER's model_class must be one of {sorted(_MODEL_CLASSES)}, got {model_class!r}.")
        model_class = getattr(importlib.import_module(_MODEL_CLASSES[name]), name)
    if not (isinstance(model_class, type) and issubclass(model_class, OffPolicyRLModel)):
        raise ValueError(f"Error: HER only works with Off policy model (such as DDPG, SAC, TD3 and DQN), got "
                         f"{model_class!r}.")
    return model_class


#: the keys a HER file stores besides the wrapped model's
_HER_SCHEMA = {
    "n_sampled_goal": model_schema.Integer(0),
    "goal_selection_strategy": model_schema.EnumValue(GoalSelectionStrategy),
    "model_class": model_schema.AlgorithmClass(),
    "her_obs_space": model_schema.Nullable(model_schema.Space()),
    "her_action_space": model_schema.Nullable(model_schema.Space()),
}


class HER(BaseRLModel):
    """
    Hindsight Experience Replay (HER) https://arxiv.org/abs/1707.01495

    :param policy: (BasePolicy or str) The policy model to use (MlpPolicy, CnnPolicy, CnnLstmPolicy, ...)
    :param env: (Gym environment or str) The environment to learn from (if registered in Gym, can be str): a goal
        environment (Dict observations with ``observation``, ``achieved_goal``, ``desired_goal`` and
        ``compute_reward``), a ``HERGoalEnvWrapper`` of one, or a one-env ``DummyVecEnv`` of one
    :param model_class: (OffPolicyRLModel) The off policy RL model to apply Hindsight Experience Replay
        currently supported: DQN, DDPG, SAC, TD3
    :param n_sampled_goal: (int) number of virtual transitions per real transition (k in the paper)
    :param goal_selection_strategy: (GoalSelectionStrategy or str) 'future', 'final', 'episode' or 'random'
    :param args: positional arguments of ``model_class`` after ``(policy, env)``
    :param kwargs: keyword arguments of ``model_class``
    """

    def __init__(self, policy, env, model_class, n_sampled_goal=4, goal_selection_strategy='future', *args,
                 **kwargs):
        # HER holds no networks of its own: BaseRLModel.__init__ (which would wrap the env in a DummyVecEnv) is not
        # called; everything that is not set here is looked up on the wrapped model (__getattr__).
        self.__dict__["model"] = None
        self.model_class = _resolve_model_class(model_class)
        self.policy = policy
        self.verbose = kwargs.get("verbose", 0)
        self.replay_wrapper = None
        self.n_sampled_goal = int(n_sampled_goal)
        self.goal_selection_strategy = goal_selection_strategy_from(goal_selection_strategy)
        self.env = None
        # Save dict observation space (used for checks at loading time)
        self.observation_space = None
        self.action_space = None
        if env is not None:
            env = self._single_goal_env(env)
            self._create_replay_wrapper(env)
        self.model = self.model_class(policy, self.env, *args, **kwargs)

    # ------------------------------------------------------------------ environment
    @staticmethod
    def _single_goal_env(env):
        if isinstance(env, VecEnvWrapper):
            raise UnsupportedHEREnvError("Error: HER does not support VecEnvWrapper (e.g. VecNormalize); pass the goal "
                                         "env itself.")
        if isinstance(env, VecEnv):
            envs = getattr(env, "envs", None)
            if envs is None or len(envs) != 1:
                raise UnsupportedHEREnvError(f"Error: HER trains on one goal environment; got a "
                                             f"{type(env).__name__} with {env.num_envs} envs.")
            env = envs[0]
        return env

    def _create_replay_wrapper(self, env):
        """
        Wrap the environment in a HERGoalEnvWrapper
        if needed and create the replay buffer wrapper.
        """
        if not isinstance(env, HERGoalEnvWrapper):
            env = HERGoalEnvWrapper(env)
        self.env = env
        self.observation_space = env.env.observation_space
        self.action_space = env.action_space
        self.replay_wrapper = functools.partial(HindsightExperienceReplayWrapper,
                                                n_sampled_goal=self.n_sampled_goal,
                                                goal_selection_strategy=self.goal_selection_strategy,
                                                wrapped_env=self.env)

    def set_env(self, env):
        """
        Set a new goal environment (same spaces).

        :param env: (gymnasium.Env) a goal env, its ``HERGoalEnvWrapper`` or a one-env ``DummyVecEnv`` of it
        """
        if env is None:
            self.model.set_env(None)
            return
        env = self._single_goal_env(env)
        old_space = self.observation_space
        self._create_replay_wrapper(env)
        if old_space is not None and old_space != self.observation_space:
            from sbtf.common.base_class import _spaces_equal
            if not (list(old_space.spaces) == list(self.observation_space.spaces) and all(
                    _spaces_equal(old_space.spaces[k], self.observation_space.spaces[k]) for k in old_space.spaces)):
                from sbtf.common.space_checks import env_space_mismatch_message

                raise ValueError(env_space_mismatch_message(self.observation_space, old_space, None, None, True, False))
        self.model.set_env(self.env)

    def get_env(self):
        """
        The goal env HER trains on (None when loaded without one).

        :return: (gym.Env) the env
        """
        return self.env

    # ------------------------------------------------------------------ the wrapped model
    def __getattr__(self, attr):
        """
        Wrap the RL model.

        :param attr: (str)
        :return: (Any)
        """
        if attr.startswith("__") or attr == "model":
            raise AttributeError(attr)
        model = self.__dict__.get("model")
        if model is None:
            raise AttributeError(f"'HER' object has no attribute {attr!r} (no wrapped model yet)")
        return getattr(model, attr)

    def setup_model(self):
        """Nothing to build: the wrapped model was built when HER was created (or loaded)."""

    def get_parameter_list(self):
        """
        The wrapped model's parameters (tf.Variables), in stable-baselines 2's order.

        :return: (list) the variables
        """
        return self.model.get_parameter_list()

    def get_parameters(self):
        """
        The wrapped model's parameters by stable-baselines 2 name.

        :return: (OrderedDict) name -> np.ndarray
        """
        return self.model.get_parameters()

    def load_parameters(self, load_path_or_dict, exact_match: bool = True) -> None:
        """
        Load parameters into the wrapped model.

        :param load_path_or_dict: (str or dict or list) a model file, a dict name -> array, or a list of arrays
        :param exact_match: (bool) every parameter must be given (dict) / the list must be complete
        """
        self.model.load_parameters(load_path_or_dict, exact_match=exact_match)

    def set_random_seed(self, seed: Optional[int]) -> None:
        """
        Seed the wrapped model's random generators.

        :param seed: (int or None) the seed
        """
        self.model.set_random_seed(seed)

    def get_vec_normalize_env(self):
        """
        The wrapped model's VecNormalize wrapper, if its env has one.

        :return: (VecNormalize or None)
        """
        return self.model.get_vec_normalize_env()

    def pretrain(self, dataset, n_epochs: int = 10, learning_rate: float = 1e-4, adam_epsilon: float = 1e-8,
                 val_interval: Optional[int] = None):
        """
        Pretrain the wrapped model by behaviour cloning.

        :param dataset: (ExpertDataset) dataset manager
        :param n_epochs: (int) number of iterations on the training set
        :param learning_rate: (float) learning rate
        :param adam_epsilon: (float) the epsilon value for the adam optimizer
        :param val_interval: (int) report training and validation losses every n epochs (default: n_epochs // 10)
        :return: (BaseRLModel) this HER model
        """
        self.model.pretrain(dataset, n_epochs=n_epochs, learning_rate=learning_rate, adam_epsilon=adam_epsilon,
                            val_interval=val_interval)
        return self

    def learn(self, total_timesteps, callback=None, log_interval=100, tb_log_name="HER", reset_num_timesteps=True,
              **kwargs):
        """
        Train the wrapped model with hindsight experience replay.

        :param total_timesteps: (int) The total number of samples to train on
        :param callback: (callable, [BaseCallback] or BaseCallback) called at every step
        :param log_interval: (int) see the wrapped model's ``learn``
        :param tb_log_name: (str) the name of the run for tensorboard log
        :param reset_num_timesteps: (bool) whether or not to reset the current timestep number (used in logging)
        :param kwargs: other arguments of the wrapped model's ``learn`` (e.g. ``progress_bar``)
        :return: (HER) this model
        """
        if self.env is None:
            raise ValueError("Error: this model has no environment to train on (it was loaded or made without one): "
                             "pass env= to load(), or call model.set_env(env) before learn().")
        self.model.learn(total_timesteps, callback=callback, log_interval=log_interval, tb_log_name=tb_log_name,
                         reset_num_timesteps=reset_num_timesteps, replay_wrapper=self.replay_wrapper, **kwargs)
        return self

    # ------------------------------------------------------------------ predict
    def _converter(self):
        if self.env is not None:
            return self.env
        if self.observation_space is None:
            raise ValueError("You must either pass an env to HER or wrap your env using HERGoalEnvWrapper")
        converter = self.__dict__.get("_goal_converter")
        if converter is None:
            converter = GoalObsConverter(self.observation_space)
            self.__dict__["_goal_converter"] = converter
        return converter

    def _check_obs(self, observation):
        """Flatten a dict observation (or a batch of them) as ``concat[observation, achieved_goal, desired_goal]``."""
        if isinstance(observation, dict):
            return self._converter().convert_dict_to_obs(observation)
        return observation

    def predict(self, observation, state=None, mask=None, deterministic=True):
        """
        Get the model's action(s) from an observation.

        :param observation: (dict or np.ndarray) a dict observation of the goal env (or a batch: arrays with a
            leading axis), or an already flattened one
        :param state: (np.ndarray) the last states (unused)
        :param mask: (np.ndarray) the last masks (unused)
        :param deterministic: (bool) whether or not to return deterministic actions
        :return: (np.ndarray, None) the action(s) and None
        """
        return self.model.predict(self._check_obs(observation), state, mask, deterministic)

    def action_probability(self, observation, state=None, mask=None, actions=None, logp=False):
        """
        The wrapped model's ``action_probability`` for a goal env's dict observation (or a batch of them).

        :param observation: (dict) ``observation``, ``achieved_goal``, ``desired_goal``
        :param state: (np.ndarray) the last states (unused: no recurrent policy)
        :param mask: (np.ndarray) the last masks (unused)
        :param actions: (np.ndarray) actions whose probability to compute, or None
        :param logp: (bool) return log-probabilities
        :return: what the wrapped model returns (None for SAC, TD3 and DDPG)
        """
        return self.model.action_probability(self._check_obs(observation), state, mask, actions, logp)

    # ------------------------------------------------------------------ save / load
    def _get_save_data(self) -> dict:
        data = self.model._get_save_data()
        data['n_sampled_goal'] = self.n_sampled_goal
        data['goal_selection_strategy'] = self.goal_selection_strategy
        data['model_class'] = self.model_class
        data['her_obs_space'] = self.observation_space
        data['her_action_space'] = self.action_space
        return data

    def save(self, save_path, cloudpickle: bool = False) -> None:
        """
        Save the model (the wrapped model's data and parameters, plus HER's keys) to a zip file, atomically.

        :param save_path: (str or file-like) where to save
        :param cloudpickle: (bool) ignored: sbtf always writes its zip format
        """
        if getattr(self.model, "rank", 0) != 0:  # MPI (DDPG): only rank 0 writes
            return
        save_util.save_to_zip(save_path, self._get_save_data(), self.model.get_parameters(), meta={"algo": "HER"})

    @classmethod
    def _from_data(cls, data: dict, params, env=None, **kwargs):
        """
        Build a HER model from a data dict (the wrapped model's keys plus ``model_class`` (class or name),
        ``n_sampled_goal``, ``goal_selection_strategy`` (name or enum), ``her_obs_space``, ``her_action_space``).
        """
        trusted = kwargs.get("_trusted_keys", frozenset())
        her_keys = {key: data[key] for key in _HER_SCHEMA if key in data}
        her_keys, _ = model_schema.check_data(_HER_SCHEMA, her_keys, trusted)
        data = {**{k: v for k, v in data.items() if k not in _HER_SCHEMA}, **her_keys}
        try:
            model_class = _resolve_model_class(data.pop("model_class", None))
        except ValueError as exc:
            raise ModelDataError(f"'model_class' in the HER model file: {exc}") from exc
        n_sampled_goal = data.pop("n_sampled_goal", 4)
        strategy = data.pop("goal_selection_strategy", "future")
        her_obs_space = data.pop("her_obs_space", None)
        her_action_space = data.pop("her_action_space", None)
        model = model_class._from_data(data, params, env=None, **kwargs)
        her = cls(policy=data.get("policy"), env=None, model_class=model_class, n_sampled_goal=n_sampled_goal,
                  goal_selection_strategy=strategy, _init_setup_model=False)
        her.model = model
        her.verbose = model.verbose
        her.observation_space = her_obs_space
        her.action_space = her_action_space if her_action_space is not None else model.action_space
        if env is not None:
            her.set_env(env)
        return her


__all__ = ["HER", "GoalSelectionStrategy"]
