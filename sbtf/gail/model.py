"""Generative Adversarial Imitation Learning (stable-baselines 2.x ``GAIL``, ``gail/model.py``): TRPO on a learned
reward (see ``sbtf.trpo_mpi.TRPO`` and ``sbtf.gail.adversary.TransitionClassifier``)."""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from sbtf.gail.dataset.dataset import ExpertDataset
from sbtf.gail.adversary import TransitionClassifier
from sbtf.trpo_mpi import TRPO
from sbtf.common.arg_checks import check_hyperparameters

#: the keys of a saved expert dataset (``GAIL`` files store the dataset's arrays, never the object)
_DATASET_ARRAYS = ("obs", "actions", "episode_starts", "episode_returns", "rewards")


def expert_dataset_to_data(dataset: Optional[ExpertDataset]) -> Optional[dict]:
    """
    The arrays and settings of an expert dataset as plain data for a model file (None stays None).

    :param dataset: (ExpertDataset) the dataset GAIL learns from
    :return: (dict) ``obs``, ``actions``, ``episode_starts``, ``episode_returns`` (and ``rewards``) with
        ``batch_size`` and ``randomize``
    """
    if dataset is None:
        return None
    observations = np.asarray(dataset.observations)
    data = {
        # image datasets hold file paths: stored as a list of strings
        "obs": observations if observations.dtype.kind in "biuf" else [str(p) for p in observations.reshape(-1)],
        "actions": np.asarray(dataset.actions),
        "episode_starts": np.asarray(dataset.episode_starts, dtype=np.int8),
        "episode_returns": np.asarray(dataset.returns, dtype=np.float64),
        "batch_size": int(dataset.batch_size),
        "randomize": bool(dataset.randomize),
    }
    if dataset.rewards is not None:
        data["rewards"] = np.asarray(dataset.rewards)
    return data


def expert_dataset_from_data(data: Any) -> Any:
    """
    Rebuild the expert dataset a GAIL file stores (``expert_dataset_to_data``); any other value is returned as is
    (an ``ExpertDataset``, None).

    :param data: (dict or ExpertDataset or None) the stored value
    :return: (ExpertDataset or None)
    """
    if not isinstance(data, dict):
        return data
    missing = [key for key in _DATASET_ARRAYS[:4] if key not in data]
    if missing:
        raise ValueError(f"The expert dataset stored in this GAIL file lacks {missing}; the file is corrupted. Pass "
                         "GAIL.load(..., expert_dataset=ExpertDataset(...)) to use a dataset of your own.")
    traj_data = {key: np.asarray(data[key]) for key in _DATASET_ARRAYS if key in data}
    return ExpertDataset(traj_data=traj_data, batch_size=int(data.get("batch_size", 64)),
                         randomize=bool(data.get("randomize", True)), verbose=0)


class GAIL(TRPO):
    """
    Generative Adversarial Imitation Learning (GAIL)

    .. warning::

        Images are not yet handled properly by the current implementation


    :param policy: (ActorCriticPolicy or str) The policy model to use (MlpPolicy, CnnPolicy, ...; not recurrent)
    :param env: (Gym environment or str) The environment to learn from (if registered in Gym, can be str)
    :param expert_dataset: (ExpertDataset) the dataset manager
    :param hidden_size_adversary: (int) the hidden dimension for the MLP of the discriminator
    :param adversary_entcoeff: (float) entropy regularisation coefficient of the discriminator
    :param g_step: (int) number of steps to train policy in each epoch
    :param d_step: (int) number of steps to train discriminator in each epoch
    :param d_stepsize: (float) the reward giver stepsize
    :param verbose: (int) the verbosity level: 0 none, 1 training information, 2 tensorflow debug
    :param _init_setup_model: (bool) Whether or not to build the network at the creation of the instance
    :param kwargs: the other arguments of ``TRPO`` (``gamma``, ``timesteps_per_batch``, ``max_kl``, ..., ``seed``):
        ``gamma`` (float) the discount value;
        ``timesteps_per_batch`` (int) the number of timesteps to run per batch (horizon);
        ``max_kl`` (float) the Kullback-Leibler loss threshold;
        ``cg_iters`` (int) the number of iterations for the conjugate gradient calculation;
        ``lam`` (float) GAE factor;
        ``entcoeff`` (float) the weight for the entropy loss;
        ``cg_damping`` (float) the compute gradient dampening factor;
        ``vf_stepsize`` (float) the value function stepsize;
        ``vf_iters`` (int) the value function's number iterations for learning

    Saved files hold TRPO's parameters (``model/...``, ``oldpi/model/...``) and the discriminator's
    (``adversary/...``); the discriminator's observation statistics are not saved (as SB2). The expert dataset is
    saved as data (its arrays and batch settings, where SB2 pickled the object), so ``GAIL.load(path, env).learn()``
    continues training; ``GAIL.load(path, env, expert_dataset=dataset)`` replaces it.
    """

    def __init__(self, policy, env, expert_dataset=None, hidden_size_adversary=100, adversary_entcoeff=1e-3,
                 g_step=3, d_step=1, d_stepsize=3e-4, verbose=0, _init_setup_model=True, **kwargs):
        check_hyperparameters(type(self).__name__, locals())
        super().__init__(policy, env, verbose=verbose, _init_setup_model=False, **kwargs)
        self.using_gail = True
        self.expert_dataset = expert_dataset
        self.g_step = g_step
        self.d_step = d_step
        self.d_stepsize = d_stepsize
        self.hidden_size_adversary = hidden_size_adversary
        self.adversary_entcoeff = adversary_entcoeff
        if _init_setup_model:
            self.setup_model()

    def _check_spaces(self, observation_space, action_space) -> None:
        import gymnasium as gym  # pylint: disable=import-outside-toplevel

        super()._check_spaces(observation_space, action_space)
        if not isinstance(action_space, (gym.spaces.Box, gym.spaces.Discrete)):
            raise NotImplementedError(f"Error: GAIL does not support action space {action_space!r} "
                                      f"({type(action_space).__name__}); supported action spaces: Box, Discrete.")
        if not isinstance(observation_space, gym.spaces.Box):
            raise NotImplementedError(f"Error: GAIL does not support observation space {observation_space!r} "
                                      f"({type(observation_space).__name__}); supported observation spaces: Box.")

    def _make_reward_giver(self) -> TransitionClassifier:
        """The discriminator (SB2's ``TransitionClassifier``), built from the GAIL arguments."""
        return TransitionClassifier(self.observation_space, self.action_space, self.hidden_size_adversary,
                                    entcoeff=self.adversary_entcoeff, comm=self.comm)

    def _get_save_data(self) -> dict:
        data = super()._get_save_data()
        data["expert_dataset"] = expert_dataset_to_data(self.expert_dataset)
        return data

    @classmethod
    def _from_data(cls, data: dict, params, env=None, _trusted_keys: frozenset = frozenset(), **kwargs):
        data = dict(data)
        data["expert_dataset"] = expert_dataset_from_data(data.get("expert_dataset"))
        return super()._from_data(data, params, env=env, _trusted_keys=_trusted_keys, **kwargs)

    def learn(self, total_timesteps, callback=None, log_interval=100, tb_log_name="GAIL", reset_num_timesteps=True,
              progress_bar: bool = False):
        """
        Train the generator (TRPO on the discriminator's reward) and the discriminator.

        :param total_timesteps: (int) The total number of samples to train on (summed over MPI ranks)
        :param callback: (callable, [BaseCallback] or BaseCallback) called at every step
        :param log_interval: (int) unused, as in SB2
        :param tb_log_name: (str) the name of the run for tensorboard log
        :param reset_num_timesteps: (bool) whether or not to reset the current timestep number (used in logging)
        :param progress_bar: (bool) show a progress bar (tqdm)
        :return: (GAIL) the trained model
        """
        return super().learn(total_timesteps, callback, log_interval, tb_log_name, reset_num_timesteps, progress_bar)


__all__ = ["GAIL", "expert_dataset_to_data", "expert_dataset_from_data"]
