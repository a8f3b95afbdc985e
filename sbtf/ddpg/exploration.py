"""How DDPG acts and explores: the actor's action (NumPy fast path, or one compiled call), action noise, random
actions and adaptive parameter noise (SB2's ``_policy``, ``_reset``, ``_adapt_param_noise``).

With parameter noise a copy of the actor (``noise/``) acts, re-perturbed with the current standard deviation at the
start of every episode; every ``param_noise_adaption_interval`` gradient steps another copy (``noise_adapt/``) is
perturbed and the noise is scaled by ``adoption_coefficient`` towards ``desired_action_stddev`` (the RMS distance
between perturbed and unperturbed actions, averaged over the MPI ranks).
"""
from __future__ import annotations

from typing import List, Tuple

import numpy as np
import tensorflow as tf

from sbtf.common.compile.fast_call import TrainStep
from sbtf.common.math_util import scale_action, unscale_action
from sbtf.ddpg.running_stats import denormalize, denormalize_np


class DDPGExploration:
    """Mixin of ``DDPG``: acting, action noise, random exploration and parameter noise."""

    # ------------------------------------------------------------------ compiled helpers
    def _compiled(self, name: str) -> TrainStep:
        """The compiled helper ``name`` (``act``, ``perturb``, ``adapt``, ``stats``), built on first use."""
        steps = self._compiled_steps
        if name not in steps:
            policy = self.policy_tf
            scalar, seed_spec = tf.TensorSpec((), tf.float32), tf.TensorSpec((2,), tf.int64)
            if name == "perturb":
                targets = self.param_noise_actor.actor_variables()

                def perturb(std, seed):
                    self._tf_perturb(targets, std, seed)
                    return {}
                steps[name] = TrainStep(perturb, {"std": scalar, "seed": seed_spec},
                                        name="ddpg_perturb")
            elif name == "adapt":
                def adapt(obs, std, seed):
                    return {"distance": self._tf_adapt(obs, std, seed)}
                steps[name] = TrainStep(adapt, {"obs": policy.obs_signature(), "std": scalar, "seed": seed_spec},
                                        name="ddpg_adapt_param_noise")
            elif name == "stats":
                def stats(obs, actions):
                    return {"stats": self._tf_stats(obs, actions)}
                steps[name] = TrainStep(stats, {"obs": policy.obs_signature(),
                                                "actions": tf.TensorSpec((None, policy.n_act), tf.float32)},
                                        name="ddpg_stats")
            elif name == "act":
                def act(obs):
                    action, noisy, q_value = self._tf_act(obs)
                    return {"action": action, "noisy_action": noisy, "q_value": q_value}
                steps[name] = TrainStep(act, {"obs": policy.obs_signature()}, name="ddpg_act")
            else:
                raise KeyError(name)
        return steps[name]

    # ------------------------------------------------------------------ acting
    def _tf_act(self, obs):
        """(actor action, perturbed actor action or actor action, actor-Q) for a batch of raw observations (TF)."""
        policy = self.policy_tf
        low, high = float(self.return_range[0]), float(self.return_range[1])
        nobs = policy.normalize_obs_tf(obs)
        action = policy.actor(nobs)
        noisy = self.param_noise_actor.actor(nobs) if self.param_noise_actor is not None else action
        q_value = denormalize(tf.clip_by_value(policy.critic(nobs, action), low, high), self.ret_rms)
        return action, noisy, q_value

    def _policy(self, obs, apply_noise=True, compute_q=True):
        """
        Get the actions and critic output, from a given observation (SB2's ``_policy``).

        :param obs: ([float] or [int]) a batch of observations
        :param apply_noise: (bool) enable the noise (perturbed actor with parameter noise, plus action noise)
        :param compute_q: (bool) compute the critic output
        :return: ([float], [float]) the actions in [-1, 1], shape (batch, n_act), and the critic values (batch, 1)
            or None
        """
        policy = self.policy_tf
        obs = policy._prepare_obs(obs)
        use_perturbed = self.param_noise is not None and apply_noise
        q_value = None
        if policy.acts_in_numpy:
            nobs = policy.normalize_obs_np(obs)
            action = self.param_noise_actor.actor_np(nobs) if use_perturbed else policy.actor_np(nobs)
            if compute_q:
                actor_action = policy.actor_np(nobs) if use_perturbed else action
                low, high = self.return_range
                q_value = denormalize_np(np.clip(policy.critic_np(nobs, actor_action), low, high), self.ret_rms)
        else:
            self._flush_stats()
            out = self._compiled("act")(obs=obs)
            action = out["noisy_action"] if use_perturbed else out["action"]
            q_value = out["q_value"] if compute_q else None
        action = np.array(action, dtype=np.float32).reshape((obs.shape[0], policy.n_act))
        if self.action_noise is not None and apply_noise:
            noise = np.stack([np.asarray(self.action_noise()).reshape(-1) for _ in range(obs.shape[0])])
            action = action + noise
        action = np.clip(action, -1, 1)
        return action, q_value

    def _select_actions(self, obs: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """The learn loop's exploration: the noisy actor's action, or (``random_exploration``) a random one."""
        action, q_value = self._policy(obs, apply_noise=True, compute_q=self.verbose >= 1)
        action = action[0]
        if self.rank == 0 and self.render:
            self.env.render()
        # Randomly sample actions from a uniform distribution with a probability self.random_exploration (HER + DDPG)
        if np.random.rand() < self.random_exploration:
            # actions sampled from the action space are in env units: the algorithm works in [-1, 1]
            unscaled_action = self.action_space.sample()
            action = scale_action(self.action_space, unscaled_action).astype(np.float32)
        else:
            unscaled_action = unscale_action(self.action_space, action)
        self._epoch.actions.append(action)
        if q_value is not None:
            self._epoch.qs.append(float(np.ravel(q_value)[0]))
        return action[None], np.asarray(unscaled_action)[None]

    def _reset(self) -> None:
        """Reset internal state after an episode is complete: action noise, and a new perturbed actor."""
        if self.action_noise is not None:
            self.action_noise.reset()
        if self.param_noise is not None:
            seed = np.random.randint(0, 2 ** 24, size=(2,)).astype(np.int64)
            self._compiled("perturb")(std=self.param_noise.current_stddev, seed=seed)

    # ------------------------------------------------------------------ parameter noise
    def _adapt_points(self, n_steps: int) -> List[int]:
        """The gradient steps of a cycle before which the parameter noise adapts."""
        if self.param_noise is None:
            return []
        return list(range(0, n_steps, max(1, int(self.param_noise_adaption_interval))))

    def _tf_perturb(self, targets: list, std, seed) -> None:
        """``targets <- actor + N(0, std)`` for every perturbable actor variable (SB2: all but LayerNorm)."""
        mask = self.policy_tf.perturbable_mask()
        for i, (target, source, noisy) in enumerate(zip(targets, self._actor_vars, mask)):
            if noisy:
                noise = tf.random.stateless_normal(tf.shape(source), seed=seed + tf.constant([0, i], tf.int64),
                                                   stddev=std)
                target.assign(source + noise)
            else:
                target.assign(source)

    def _tf_adapt(self, adapt_obs, std, seed, mpi: bool = False):
        """Perturb ``noise_adapt/`` with ``std``; the RMS distance between its actions and the actor's (the mean over
        the ranks with ``mpi``)."""
        self._tf_perturb(self.adaptive_param_noise_actor.actor_variables(), std, seed)
        nobs = self.policy_tf.normalize_obs_tf(adapt_obs)
        diff = self.policy_tf.actor(nobs) - self.adaptive_param_noise_actor.actor(nobs)
        distance = tf.sqrt(tf.reduce_mean(tf.square(diff)))
        return self._tf_allreduce(distance, mean=True) if mpi else distance

    def _adapt_param_noise(self, adapt_obs=None, seed=None) -> float:
        """
        Perturb a separate copy of the actor (``noise_adapt/``) with the current standard deviation, measure the
        distance between its actions and the actor's on a minibatch (averaged over the MPI ranks) and adapt the
        standard deviation (SB2's ``_adapt_param_noise``).

        :param adapt_obs: (np.ndarray) the observations (a minibatch is sampled when None)
        :param seed: ((2,) int array) seed of the perturbation (drawn from NumPy's generator when None)
        :return: (float) the mean distance
        """
        if self.param_noise is None:
            return 0.
        if adapt_obs is None:
            adapt_obs = self.replay_buffer.sample_batch(self.batch_size, env=self._vec_normalize_env).observations
        self._flush_stats()
        if seed is None:
            seed = np.random.randint(0, 2 ** 24, size=(2,))
        seed = np.asarray(seed, np.int64).reshape(2)
        out = self._compiled("adapt")(obs=self.policy_tf._prepare_obs(adapt_obs),
                                      std=self.param_noise.current_stddev, seed=seed)
        mean_distance = float(self.comm.allreduce(float(out["distance"]))) / self.nworkers
        self.param_noise.adapt(mean_distance)
        return mean_distance


__all__ = ["DDPGExploration"]
