"""Proximal Policy Optimization with invalid action masking (sb3-contrib ``MaskablePPO``) on sbtf's core.

MaskablePPO is :class:`sbtf.sb3.ppo.PPO` (its loss, its compiled update: ``n_epochs`` passes over shuffled
minibatches of ``batch_size``, early stopping on ``target_kl``, in one call) with masked categorical distributions:
each step of a rollout reads the env's ``action_masks()``, actions are drawn from the masked distribution and the
masks are stored with the rollout, so the train step evaluates the same masked log-probabilities. What it replaces
of PPO: the policy (:class:`~sbtf.contrib.common.maskable.policies.MaskableActorCriticPolicy`), the runner, the train
step's inputs (the masks) and the evaluation of the actions.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import gymnasium as gym
import numpy as np
import tensorflow as tf

from sbtf.common.fileio import model_schema as ms
from sbtf.contrib.common.maskable.buffers import MaskableRolloutBatch, MaskableRolloutRunner
from sbtf.contrib.common.maskable.policies import (MaskableActorCriticCnnPolicy, MaskableActorCriticPolicy,
                                                   MaskableMultiInputActorCriticPolicy)
from sbtf.sb3.common.policies import make_policy_optimizer
from sbtf.sb3.ppo.ppo import PPO
from sbtf.common.arg_checks import check_hyperparameters

__all__ = ["MaskablePPO"]


class MaskablePPO(PPO):
    """
    Proximal Policy Optimization algorithm (PPO) (clip version) with Invalid Action Masking (sb3-contrib's
    arguments and defaults).

    Paper: https://arxiv.org/abs/1707.06347, masking: https://arxiv.org/abs/2006.14171

    :param policy: (str or class) ``"MlpPolicy"``, ``"CnnPolicy"`` or a ``MaskableActorCriticPolicy`` subclass
    :param env: (gymnasium.Env, VecEnv or str) the environment; it (or an ``ActionMasker`` wrapper) has
        ``action_masks()``
    :param learning_rate: (float or callable) the learning rate, or a function of the remaining progress (1 -> 0)
    :param n_steps: (int) steps per environment per update (the rollout is ``n_steps * n_envs``)
    :param batch_size: (int) minibatch size (None: the whole rollout)
    :param n_epochs: (int) number of passes over the rollout per update
    :param gamma: (float) discount factor
    :param gae_lambda: (float) factor of the Generalized Advantage Estimator
    :param clip_range: (float or callable) clipping parameter of the policy ratio
    :param clip_range_vf: (float or callable) clipping parameter of the value function (None: no clipping)
    :param normalize_advantage: (bool) normalise the advantages of each minibatch
    :param ent_coef: (float) entropy coefficient
    :param vf_coef: (float) value function coefficient
    :param max_grad_norm: (float) the maximum global norm of the gradients
    :param rollout_buffer_class: (type) None (sbtf's ``RolloutBuffer``, with the masks beside it)
    :param rollout_buffer_kwargs: (dict) None
    :param target_kl: (float) stop an update's epochs early when the approximate KL divergence of a minibatch goes
        beyond ``1.5 * target_kl`` (None: never)
    :param stats_window_size: (int) the number of episodes the ``rollout/`` means are taken over
    :param tensorboard_log: (str) TensorBoard folder (None: none)
    :param policy_kwargs: (dict) arguments of the policy (``net_arch``, ``activation_fn``, ...)
    :param verbose: (int) 0 none, 1 training information
    :param seed: (int) seed of the random generators
    :param device: (str) ignored (TensorFlow places the operations)
    :param _init_setup_model: (bool) build the networks now
    """

    policy_base = MaskableActorCriticPolicy
    policy_aliases = {"MlpPolicy": MaskableActorCriticPolicy, "CnnPolicy": MaskableActorCriticCnnPolicy,
                      "MultiInputPolicy": MaskableMultiInputActorCriticPolicy}
    _supported_action_spaces = (gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)
    _save_schema = dict(
        learning_rate=ms.Schedule(), n_steps=ms.Integer(1, ms.MAX_ROLLOUT), batch_size=ms.Integer(1),
        n_epochs=ms.Integer(1), gamma=ms.Real(), gae_lambda=ms.Real(), clip_range=ms.Schedule(),
        clip_range_vf=ms.Nullable(ms.Schedule()), normalize_advantage=ms.Flag(), ent_coef=ms.Real(),
        vf_coef=ms.Real(), max_grad_norm=ms.Real(), target_kl=ms.Nullable(ms.Real()),
        stats_window_size=ms.Integer(1))

    def __init__(self, policy, env, learning_rate=3e-4, n_steps: int = 2048, batch_size: Optional[int] = 64,
                 n_epochs: int = 10, gamma: float = 0.99, gae_lambda: float = 0.95, clip_range=0.2,
                 clip_range_vf=None, normalize_advantage: bool = True, ent_coef: float = 0.0, vf_coef: float = 0.5,
                 max_grad_norm: float = 0.5, rollout_buffer_class: Optional[type] = None,
                 rollout_buffer_kwargs: Optional[Dict[str, Any]] = None, target_kl: Optional[float] = None,
                 stats_window_size: int = 100, tensorboard_log: Optional[str] = None,
                 policy_kwargs: Optional[dict] = None, verbose: int = 0, seed: Optional[int] = None,
                 device: str = "auto", _init_setup_model: bool = True):
        check_hyperparameters(type(self).__name__, locals())
        self._use_masking = True
        super().__init__(policy, env, learning_rate=learning_rate, n_steps=n_steps, batch_size=batch_size,
                         n_epochs=n_epochs, gamma=gamma, gae_lambda=gae_lambda, clip_range=clip_range,
                         clip_range_vf=clip_range_vf, normalize_advantage=normalize_advantage, ent_coef=ent_coef,
                         vf_coef=vf_coef, max_grad_norm=max_grad_norm, use_sde=False, sde_sample_freq=-1,
                         rollout_buffer_class=rollout_buffer_class, rollout_buffer_kwargs=rollout_buffer_kwargs,
                         target_kl=target_kl, stats_window_size=stats_window_size, tensorboard_log=tensorboard_log,
                         policy_kwargs=policy_kwargs, verbose=verbose, seed=seed, device=device,
                         _init_setup_model=_init_setup_model)

    # ------------------------------------------------------------------ what differs from PPO
    def _make_policy(self, n_env: int, n_steps: int, n_batch: Optional[int]) -> MaskableActorCriticPolicy:
        if not (isinstance(self.policy_class, type) and issubclass(self.policy_class, MaskableActorCriticPolicy)):
            raise ValueError("Policy must subclass MaskableActorCriticPolicy")
        return self.policy_class(None, self.observation_space, self.action_space, n_env, n_steps, n_batch,
                                 reuse=False, **self.policy_kwargs)

    def _make_optimizer(self):
        return make_policy_optimizer(self._variables, "Adam", {"eps": 1e-5})  # sb3-contrib: th.optim.Adam, eps=1e-5

    def _make_runner(self) -> MaskableRolloutRunner:
        return MaskableRolloutRunner(env=self.env, model=self, n_steps=self.n_steps, gamma=self.gamma,
                                     gae_lambda=self.gae_lambda)

    def _train_inputs(self, n_batch: int) -> Dict[str, tf.TensorSpec]:
        dist = self.policy_tf.dist
        vec = tf.TensorSpec((n_batch,), tf.float32)
        return {"obs": self.policy_tf.obs_signature(n_batch),
                "actions": tf.TensorSpec((n_batch,) + dist.action_shape, tf.int64),
                "advantages": vec, "returns": vec, "old_values": vec, "old_log_probs": vec,
                "action_masks": tf.TensorSpec((n_batch, dist.n_logits), tf.bool)}

    def _train_feed(self, batch: MaskableRolloutBatch) -> Dict[str, np.ndarray]:
        return {**super()._train_feed(batch), "action_masks": batch.action_masks}

    def _evaluate_actions(self, data: Dict[str, tf.Tensor]) -> Tuple[tf.Tensor, tf.Tensor, Optional[tf.Tensor]]:
        """The masked log-likelihoods and entropy of the actions, and the values."""
        policy = self.policy_tf
        logits, values = policy.network_tf(data["obs"])
        masks = data["action_masks"]
        return values, policy.dist.log_prob_tf(logits, data["actions"], masks), policy.dist.entropy_tf(logits, masks)

    def _on_learn_start(self, progress, callback) -> None:
        super()._on_learn_start(progress, callback)
        self.runner.use_masking = self._use_masking

    # ------------------------------------------------------------------ acting
    def predict(self, observation, state=None, episode_start=None, deterministic: bool = False,
                action_masks: Optional[np.ndarray] = None, mask=None):
        """
        The model's action(s) for an observation (or a batch), drawn from the masked distribution.

        :param observation: (np.ndarray) the observation(s)
        :param state: (None) no recurrent state (kept for the common signature)
        :param episode_start: (None) unused (feed-forward policy)
        :param deterministic: (bool) the most likely valid action instead of a sample
        :param action_masks: (np.ndarray) booleans, one per choice of each action component (flat), per observation;
            None: no masking
        :param mask: (None) stable-baselines 2's name of ``episode_start``
        :return: (np.ndarray, None) the action(s) and the (absent) next state
        """
        observation, vectorized = self._check_obs(observation)
        masks = None
        if action_masks is not None:
            masks = self.policy_tf.dist.check_masks(action_masks, observation.shape[0])
        actions, _, _ = self.policy_tf.step_masked(observation, masks, deterministic=deterministic)
        return (actions if vectorized else np.asarray(actions[0])), None

    def _proba_outputs(self, observation, state, mask):
        if isinstance(self.action_space, gym.spaces.MultiBinary):  # two logits per bit: P(bit = 1)
            probs = self.policy_tf.proba_step(observation)
            return probs.reshape(probs.shape[0], -1, 2)[:, :, 1]
        return super()._proba_outputs(observation, state, mask)

    def _export_extra_inputs(self) -> Dict[str, tuple]:
        """The export takes the action masks as a second input (``(batch, n_choices)`` booleans)."""
        return {"action_masks": ((None, self.policy_tf.dist.n_logits), "bool")}

    def _export_outputs(self, observation, action_masks=None) -> Dict[str, tf.Tensor]:
        """The exported graph: the most likely valid action, the masked probabilities and the value."""
        policy = self.policy_tf
        logits, value = policy.network_tf(observation)
        return {"action": policy.dist.mode_tf(logits, action_masks),
                "probabilities": policy.dist.probabilities_tf(logits, action_masks), "value": value}

    def learn(self, total_timesteps, callback=None, log_interval: int = 1, tb_log_name: str = "MaskablePPO",
              reset_num_timesteps: bool = True, use_masking: bool = True, progress_bar: bool = False):
        """
        Train for ``total_timesteps`` environment steps (sb3-contrib's signature and defaults).

        :param total_timesteps: (int) the number of environment steps to train for
        :param callback: (callable, [BaseCallback] or BaseCallback) called at every step
        :param log_interval: (int) the number of updates between log blocks (verbose >= 1)
        :param tb_log_name: (str) the name of the run for TensorBoard
        :param reset_num_timesteps: (bool) whether to reset ``num_timesteps``
        :param use_masking: (bool) read and apply the env's action masks (False: train without masks)
        :param progress_bar: (bool) show a progress bar (tqdm)
        :return: the trained model (``self``)
        """
        self._use_masking = bool(use_masking)
        return self._learn(total_timesteps, callback, log_interval, tb_log_name, reset_num_timesteps, progress_bar)
