"""Generative Adversarial Imitation Learning (stable-baselines 2.x ``GAIL``, ``gail/model.py``): TRPO on a learned
reward (see ``sbtf.trpo_mpi.TRPO`` and ``sbtf.gail.adversary.TransitionClassifier``)."""
from __future__ import annotations

from sbtf.trpo_mpi import TRPO


class GAIL(TRPO):
    """
    Generative Adversarial Imitation Learning (GAIL)

    .. warning::

        Images are not yet handled properly by the current implementation


    :param policy: (ActorCriticPolicy or str) The policy model to use (MlpPolicy, CnnPolicy, ...; not recurrent)
    :param env: (Gym environment or str) The environment to learn from (if registered in Gym, can be str)
    :param expert_dataset: (ExpertDataset) the dataset manager
    :param gamma: (float) the discount value
    :param timesteps_per_batch: (int) the number of timesteps to run per batch (horizon)
    :param max_kl: (float) the Kullback-Leibler loss threshold
    :param cg_iters: (int) the number of iterations for the conjugate gradient calculation
    :param lam: (float) GAE factor
    :param entcoeff: (float) the weight for the entropy loss
    :param cg_damping: (float) the compute gradient dampening factor
    :param vf_stepsize: (float) the value function stepsize
    :param vf_iters: (int) the value function's number iterations for learning
    :param hidden_size_adversary: (int) the hidden dimension for the MLP of the discriminator
    :param adversary_entcoeff: (float) entropy regularisation coefficient of the discriminator
    :param g_step: (int) number of steps to train policy in each epoch
    :param d_step: (int) number of steps to train discriminator in each epoch
    :param d_stepsize: (float) the reward giver stepsize
    :param verbose: (int) the verbosity level: 0 none, 1 training information, 2 tensorflow debug
    :param _init_setup_model: (bool) Whether or not to build the network at the creation of the instance
    :param kwargs: the other arguments of ``TRPO`` (``gamma``, ``timesteps_per_batch``, ``max_kl``, ..., ``seed``)

    Saved files hold TRPO's parameters (``model/...``, ``oldpi/model/...``) and the discriminator's
    (``adversary/...``); the discriminator's observation statistics are not saved (as SB2) and neither is the expert
    dataset (SB2 pickled it into the file): to continue training a loaded model, pass it again,
    ``GAIL.load(path, env, expert_dataset=dataset)``.
    """

    def __init__(self, policy, env, expert_dataset=None, hidden_size_adversary=100, adversary_entcoeff=1e-3,
                 g_step=3, d_step=1, d_stepsize=3e-4, verbose=0, _init_setup_model=True, **kwargs):
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

    def _get_save_data(self) -> dict:
        data = super()._get_save_data()
        data["expert_dataset"] = None  # not saved: see the class docstring
        return data

    def learn(self, total_timesteps, callback=None, log_interval=100, tb_log_name="GAIL", reset_num_timesteps=True):
        """
        Train the generator (TRPO on the discriminator's reward) and the discriminator.

        :param total_timesteps: (int) The total number of samples to train on (summed over MPI ranks)
        :param callback: (callable, [BaseCallback] or BaseCallback) called at every step
        :param log_interval: (int) unused, as in SB2
        :param tb_log_name: (str) the name of the run for tensorboard log
        :param reset_num_timesteps: (bool) whether or not to reset the current timestep number (used in logging)
        :return: (GAIL) the trained model
        """
        return super().learn(total_timesteps, callback, log_interval, tb_log_name, reset_num_timesteps)


__all__ = ["GAIL"]
