"""DDPG's two ways to run a cycle's ``nb_train_steps`` gradient steps (same maths: ``DDPG._one_step_tf``).

* fused (the default): the whole cycle (gradient steps, parameter-noise adaptions, Pop-Art rescaling, target
  updates) is **one** compiled ``TrainStep`` on stacked minibatches, with ``MpiAdam``'s in-graph update; under MPI
  (the ``"mpi"`` variant) the gradients, the parameter-noise distances and the Pop-Art return statistics are summed
  over the ranks inside the call (``Allreduce`` through ``tf.numpy_function``, in program order; no XLA);
* per step (``_per_step_updates=True``, SB2's structure): one compiled call for the gradients, the ``Allreduce`` in
  Python, one compiled call applying both ``MpiAdam`` steps and the soft target update.
"""
from __future__ import annotations

from typing import Dict, List, Tuple

import numpy as np
import tensorflow as tf

from sbtf.common.compile.fast_call import TrainStep
from sbtf.common.mpi_util import allreduce_sum
from sbtf.common.algo.off_policy_ops import polyak_update
from sbtf.common.algo.off_policy_train import TrainStepCache
from sbtf.ddpg.popart import rescale_critic_outputs


class DDPGTraining:
    """Mixin of ``DDPG``: the fused and the per-step training paths."""

    # ------------------------------------------------------------------ MPI inside compiled calls
    def _np_allreduce_sum(self, value: np.ndarray) -> np.ndarray:
        return allreduce_sum(value, self.comm)

    def _np_allreduce_mean(self, value: np.ndarray) -> np.ndarray:
        return (allreduce_sum(value, self.comm) / self.nworkers).astype(value.dtype, copy=False)

    def _tf_allreduce(self, tensor, mean: bool = True):
        """
        Sum (or mean) of ``tensor`` over the MPI ranks, from inside a compiled function: an ``Allreduce`` run by
        ``tf.numpy_function`` (stateful, so TensorFlow keeps the program order of these collective calls).
        """
        fn = self._np_allreduce_mean if mean else self._np_allreduce_sum
        out = tf.numpy_function(fn, [tensor], tensor.dtype, stateful=True)
        out.set_shape(tensor.shape)
        return out

    # ------------------------------------------------------------------ fused cycle
    def _train_step_cache(self, mpi: bool) -> TrainStepCache:
        if mpi:
            if self._train_steps_mpi is None:
                self._train_steps_mpi = TrainStepCache(self._build_cycle_step)
            return self._train_steps_mpi
        return self._train_steps

    def _build_cycle_step(self, n_steps: int, variant=None) -> TrainStep:
        """
        ``n_steps`` gradient steps (with their parameter-noise adaptions) in one compiled call; ``variant="mpi"``
        averages the gradients and the parameter-noise distances, and sums the Pop-Art statistics, over the MPI ranks
        at every step (``Allreduce`` inside the call, so it is not XLA-compiled).
        """
        mpi = variant == "mpi"
        policy = self.policy_tf
        n_adapt = len(self._adapt_points(n_steps))
        interval = max(1, int(self.param_noise_adaption_interval))
        k_b = (n_steps, int(self.batch_size))
        obs_dtype = tf.as_dtype(policy.obs_dtype)
        obs_shape = tuple(policy.obs_shape)
        spec = self.param_noise
        desired = float(spec.desired_action_stddev) if spec is not None else 0.0
        coefficient = float(spec.adoption_coefficient) if spec is not None else 1.0
        inputs = {"obs": tf.TensorSpec(k_b + obs_shape, obs_dtype),
                  "next_obs": tf.TensorSpec(k_b + obs_shape, obs_dtype),
                  "actions": tf.TensorSpec(k_b + (policy.n_act,), tf.float32),
                  "rewards": tf.TensorSpec(k_b, tf.float32),
                  "dones": tf.TensorSpec(k_b, tf.float32), "actor_lr": tf.TensorSpec((), tf.float32),
                  "critic_lr": tf.TensorSpec((), tf.float32), "param_noise_std": tf.TensorSpec((), tf.float32),
                  # stateless-RNG seeds below 2 ** 24 (exact in float32, so they travel in the packed vector)
                  "seeds": tf.TensorSpec((max(n_adapt, 1), 2), tf.float32)}
        if n_adapt:
            inputs["adapt_obs"] = tf.TensorSpec((n_adapt, k_b[1]) + obs_shape, obs_dtype)

        def train(obs, next_obs, actions, rewards, dones, actor_lr, critic_lr, param_noise_std, seeds,
                  adapt_obs=None):
            seeds = tf.cast(seeds, tf.int64)

            def adapt(k, std, distances):
                """SB2's adaption before gradient step ``k`` (k % interval == 0): perturb, measure, scale the noise."""
                index = k // interval
                distance = self._tf_adapt(adapt_obs[index], std, seeds[index], mpi=mpi)
                distances = tf.tensor_scatter_nd_update(distances, tf.reshape(index, (1, 1)),
                                                        tf.reshape(distance, (1,)))
                return tf.where(distance > desired, std / coefficient, std * coefficient), distances

            def step(k, totals, std, distances):
                # explicit order (the collective calls of the MPI variant must run in the same order on every
                # rank): the previous step's updates, then this step's adaption, then its gradient step
                if n_adapt:
                    with tf.control_dependencies([totals]):
                        std, distances = tf.cond(tf.equal(k % interval, 0), lambda: adapt(k, std, distances),
                                                 lambda: (tf.identity(std), tf.identity(distances)))
                with tf.control_dependencies([totals, std, distances]):
                    totals = totals + self._one_step_tf(obs[k], actions[k], rewards[k], next_obs[k], dones[k],
                                                        actor_lr, critic_lr, mpi=mpi)
                return totals, std, distances

            totals = tf.zeros((2,), tf.float32)
            distances = tf.zeros((max(n_adapt, 1),), tf.float32)
            std = param_noise_std
            if n_steps == 1:
                totals, std, distances = step(tf.constant(0), totals, std, distances)
            else:
                _, totals, std, distances = tf.while_loop(
                    lambda k, *_: k < n_steps, lambda k, t, s, d: (k + 1,) + step(k, t, s, d),
                    (tf.constant(0), totals, std, distances), parallel_iterations=1)
            totals = totals / float(n_steps)
            return {"critic_loss": totals[0], "actor_loss": totals[1], "distances": distances,
                    "param_noise_std": std}

        networks = [policy, self.target_policy] + ([self.adaptive_param_noise_actor] if n_adapt else [])
        return TrainStep(train, inputs, networks=networks, jit_compile=(not mpi) and self._use_xla(policy),
                         name="ddpg_train_mpi" if mpi else "ddpg_train")

    def _sample_train_batches(self, n_steps: int, n_adapt: int):
        rb, env = self.replay_buffer, self._vec_normalize_env
        batch = rb.sample_batch(self.batch_size * n_steps, env=env)
        adapt_obs = rb.sample_batch(self.batch_size * n_adapt, env=env).observations if n_adapt else None
        return batch, adapt_obs

    def _train_fused(self, n_steps: int) -> Tuple[np.ndarray, np.ndarray]:
        """
        ``n_steps`` gradient steps in one compiled call; returns (mean [critic, actor] losses, distances). Under MPI
        (or with ``_mpi_graph``) the call is the ``"mpi"`` variant, whose ``Allreduce`` run inside it.
        """
        mpi = self.nworkers > 1 or self._mpi_graph
        step = self._train_step_cache(mpi).get(n_steps, "mpi" if mpi else None)
        n_adapt = len(self._adapt_points(n_steps))
        batch, adapt_obs = self._sample_train_batches(n_steps, n_adapt)
        obs_shape = (n_steps, self.batch_size) + tuple(self.policy_tf.obs_shape)
        inputs = dict(obs=batch.observations.reshape(obs_shape), next_obs=batch.next_observations.reshape(obs_shape),
                      actions=batch.actions, rewards=batch.rewards, dones=batch.dones, actor_lr=self.actor_lr,
                      critic_lr=self.critic_lr,
                      param_noise_std=self.param_noise.current_stddev if self.param_noise is not None else 0.0,
                      seeds=np.random.randint(0, 2 ** 24, size=(max(n_adapt, 1), 2)))
        if n_adapt:
            inputs["adapt_obs"] = adapt_obs.reshape((n_adapt,) + obs_shape[1:])
        self._flush_stats()
        out = step(**inputs)
        self._last_graph_stddev = float(out["param_noise_std"])
        distances = out["distances"][:n_adapt]
        if self.param_noise is not None:
            # the same sequence of adapt() calls as SB2's, with the distances computed in the compiled call
            for distance in distances:
                self.param_noise.adapt(float(distance))
        if self.ret_rms is not None and self.enable_popart:
            self.ret_rms.pull()
        return np.array([out["critic_loss"], out["actor_loss"]]), distances

    # ------------------------------------------------------------------ per-step training (SB2's structure)
    def _step_functions(self) -> Dict[str, TrainStep]:
        """
        The compiled calls of one gradient step: ``grads`` (target Q, both losses and their flat gradients), then,
        after the ranks' gradients are averaged with one ``Allreduce``, ``apply`` (both ``MpiAdam`` steps with the
        averaged gradients and the soft target update). With Pop-Art the target Q comes first (``target_q``), so that
        the return statistics can be updated over the ranks and the critics rescaled (``popart``) before the
        gradients are taken.
        """
        if self._step_fns is None:
            policy = self.policy_tf
            batch_obs = policy.obs_signature()
            vec = tf.TensorSpec((None,), tf.float32)
            scalar = tf.TensorSpec((), tf.float32)
            actions = tf.TensorSpec((None, policy.n_act), tf.float32)
            n_actor = self.actor_optimizer.size
            nets = (policy, self.target_policy)

            def grads_out(obs, actions, target_q):
                actor_grad, critic_grad, critic_loss, actor_loss = self._tf_grads(obs, actions, target_q)
                return {"flat_grad": tf.concat([actor_grad, critic_grad], axis=0), "critic_loss": critic_loss,
                        "actor_loss": actor_loss}

            def grads(obs, actions, rewards, next_obs, dones):
                return grads_out(obs, actions, tf.stop_gradient(self._tf_target_q(next_obs, rewards, dones)))

            def grads_given_target(obs, actions, target_q):
                return grads_out(obs, actions, target_q)

            def target_q(next_obs, rewards, dones):
                return {"target_q": self._tf_target_q(next_obs, rewards, dones)}

            def popart(old_mean, old_std):
                rescale_critic_outputs(nets, self.ret_rms, old_mean, old_std)
                return {}

            def apply(flat_grad, actor_lr, critic_lr):
                self.actor_optimizer.apply_flat_grad(flat_grad[:n_actor], actor_lr)
                self.critic_optimizer.apply_flat_grad(flat_grad[n_actor:], critic_lr)
                polyak_update(self._target_vars, self._source_vars, float(self.tau))
                return {}

            def target_update():
                polyak_update(self._target_vars, self._source_vars, float(self.tau))
                return {}

            n_params = n_actor + self.critic_optimizer.size
            self._step_fns = {
                "grads": TrainStep(grads, {"obs": batch_obs, "actions": actions, "rewards": vec, "next_obs": batch_obs,
                                           "dones": vec}, name="ddpg_grads"),
                "apply": TrainStep(apply, {"flat_grad": tf.TensorSpec((n_params,), tf.float32), "actor_lr": scalar,
                                           "critic_lr": scalar}, name="ddpg_apply"),
                "target_update": TrainStep(target_update, {}, name="ddpg_target_update"),
            }
            if self.normalize_returns and self.enable_popart:
                self._step_fns["target_q"] = TrainStep(target_q, {"next_obs": batch_obs, "rewards": vec,
                                                                  "dones": vec}, name="ddpg_target_q")
                self._step_fns["grads_given_target"] = TrainStep(
                    grads_given_target, {"obs": batch_obs, "actions": actions,
                                         "target_q": tf.TensorSpec((None, 1), tf.float32)}, name="ddpg_grads")
                self._step_fns["popart"] = TrainStep(popart, {"old_mean": scalar, "old_std": scalar},
                                                     name="ddpg_popart")
        return self._step_fns

    def _train_step(self, step=None, writer=None, log=False, batch=None) -> Tuple[float, float]:
        """
        One gradient step with the gradients averaged over the MPI ranks (SB2's ``_train_step``): the flat actor and
        critic gradients of this rank's minibatch are averaged over the ranks (one ``Allreduce``, as
        ``MpiAdam.update`` does) and applied with the ``MpiAdam`` optimisers' update, then the targets move by ``tau``.
        Every 100 updates ``learn()`` checks that the ranks' parameters agree (as ``MpiAdam.update`` did).

        :param step: (int) the step number for TensorBoard (unused)
        :param writer: unused (TensorBoard scalars are written per cycle)
        :param log: (bool) unused
        :param batch: (tuple or ReplayBatch) a minibatch (obs0, actions, rewards, obs1, terminals1); sampled when None
        :return: (float, float) critic loss, actor loss
        """
        fns = self._step_functions()
        if batch is None:
            batch = self.replay_buffer.sample_batch(self.batch_size, env=self._vec_normalize_env)
        if isinstance(batch, tuple):
            obs0, actions, rewards, obs1, terminals1 = batch
        else:
            obs0, actions, rewards = batch.observations, batch.actions, batch.rewards
            obs1, terminals1 = batch.next_observations, batch.dones
        policy = self.policy_tf
        obs0 = policy._prepare_obs(obs0)
        obs1 = policy._prepare_obs(obs1)
        actions = np.asarray(actions, np.float32)
        rewards = np.asarray(rewards, np.float32).reshape(-1)
        terminals1 = np.asarray(terminals1, np.float32).reshape(-1)
        self._flush_stats()
        if self.normalize_returns and self.enable_popart:
            target_q = fns["target_q"](next_obs=obs1, rewards=rewards, dones=terminals1)["target_q"]
            old_mean, old_std = float(self.ret_rms.mean_np()), float(self.ret_rms.std_np())
            self.ret_rms.update(target_q.flatten())  # summed over the ranks
            self.ret_rms.flush()
            fns["popart"](old_mean=old_mean, old_std=old_std)
            out = fns["grads_given_target"](obs=obs0, actions=actions, target_q=target_q)
        else:
            out = fns["grads"](obs=obs0, actions=actions, rewards=rewards, next_obs=obs1, dones=terminals1)
        flat_grad = out["flat_grad"]
        # the mean gradient over the ranks (MpiAdam.update's averaging, for both optimisers in one Allreduce)
        if self.nworkers > 1:
            flat_grad = allreduce_sum(flat_grad, self.comm) / self.nworkers
        fns["apply"](flat_grad=flat_grad, actor_lr=self.actor_lr, critic_lr=self.critic_lr)
        return float(out["critic_loss"]), float(out["actor_loss"])

    def _update_target_net(self) -> None:
        """Soft update of the target networks: ``target <- (1 - tau) * target + tau * model``."""
        self._step_functions()["target_update"]()

    def _train_per_step(self, n_steps: int) -> Tuple[np.ndarray, np.ndarray]:
        """The cycle's gradient steps one by one (MPI): same batches and order as the fused call."""
        adapt_points = self._adapt_points(n_steps)
        batch, adapt_obs = self._sample_train_batches(n_steps, len(adapt_points))
        seeds = np.random.randint(0, 2 ** 24, size=(max(len(adapt_points), 1), 2))
        size = self.batch_size
        losses: List[Tuple[float, float]] = []
        distances: List[float] = []
        for k in range(n_steps):
            if k in adapt_points:
                index = adapt_points.index(k)
                distances.append(self._adapt_param_noise(adapt_obs[index * size:(index + 1) * size],
                                                         seed=seeds[index]))
            part = slice(k * size, (k + 1) * size)
            losses.append(self._train_step(batch=(batch.observations[part], batch.actions[part],
                                                  batch.rewards[part], batch.next_observations[part],
                                                  batch.dones[part])))
        return np.mean(np.asarray(losses, np.float64), axis=0), np.asarray(distances)


__all__ = ["DDPGTraining"]
