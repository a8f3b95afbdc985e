"""Behaviour cloning (stable-baselines 2's ``pretrain``): the part of ``sbtf.common.base_class.BaseRLModel`` that
fits the policy to an expert dataset, as a mixin of it."""
from __future__ import annotations

from typing import Optional

import gymnasium as gym
import numpy as np
import tensorflow as tf

from sbtf.common.compile.weight_tracking import track_writes


class PretrainMixin:
    """``pretrain(dataset, ...)``; mixed into ``BaseRLModel``, whose attributes it uses."""

    # ------------------------------------------------------------------ behaviour cloning
    def _pretrain_output(self, obs: tf.Tensor) -> tf.Tensor:
        """What behaviour cloning fits: logits (Discrete) or the deterministic action (Box)."""
        raise NotImplementedError(f"{type(self).__name__} does not support pretrain()")

    def _pretrain_variables(self) -> list:
        return self.policy_tf.trainable_variables

    def pretrain(self, dataset, n_epochs: int = 10, learning_rate: float = 1e-4, adam_epsilon: float = 1e-8,
                 val_interval: Optional[int] = None):
        """
        Pretrain a model using behaviour cloning: supervised learning given an expert dataset.

        :param dataset: (ExpertDataset) dataset manager
        :param n_epochs: (int) number of iterations on the training set
        :param learning_rate: (float) learning rate
        :param adam_epsilon: (float) the epsilon value for the adam optimizer
        :param val_interval: (int) report training and validation losses every n epochs (default: n_epochs // 10)
        :return: (BaseRLModel) the pretrained model
        """
        from sbtf.common.optimizers import Adam

        continuous = isinstance(self.action_space, gym.spaces.Box)
        discrete = isinstance(self.action_space, gym.spaces.Discrete)
        if not (continuous or discrete):
            raise NotImplementedError(f"Error: pretrain only supports Box and Discrete action spaces, got "
                                      f"{self.action_space}.")
        if getattr(self.policy_tf, "recurrent", False):
            raise NotImplementedError("Error: pretrain is not supported for recurrent policies.")
        if val_interval is None:
            val_interval = max(int(n_epochs / 10), 1)
        variables = self._pretrain_variables()
        optimizer = Adam(variables, epsilon=adam_epsilon)
        obs_spec = self.policy_tf.obs_signature()
        act_spec = tf.TensorSpec((None,) + (self.action_space.shape if continuous else ()),
                                 tf.float32 if continuous else tf.int64)

        def _loss(obs, actions):
            out = self._pretrain_output(obs)
            if continuous:
                return tf.reduce_mean(tf.square(out - actions))
            return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=actions, logits=out))

        @tf.function(input_signature=[obs_spec, act_spec, tf.TensorSpec((), tf.float32)], autograph=False)
        def train_step(obs, actions, lr):
            with tf.GradientTape() as tape:
                loss = _loss(obs, actions)
            optimizer.apply(tape.gradient(loss, variables), lr)
            return loss

        val_step = tf.function(_loss, input_signature=[obs_spec, act_spec], autograph=False)
        train_step = track_writes(train_step)  # each call marks the acting copies of what it trains stale

        def _prepare(obs, actions):
            obs = np.asarray(obs).astype(self.policy_tf.obs_dtype).reshape((-1,) + self.policy_tf.obs_shape)
            if continuous:
                actions = np.asarray(actions, np.float32).reshape((-1,) + self.action_space.shape)
            else:
                actions = np.asarray(actions).astype(np.int64).reshape(-1)
            return obs, actions

        if self.verbose > 0:
            print("Pretraining with Behavior Cloning...")
        lr = tf.constant(learning_rate, tf.float32)
        for epoch_idx in range(int(n_epochs)):
            train_loss = 0.0
            n_train = max(len(dataset.train_loader), 1)
            for _ in range(len(dataset.train_loader)):
                obs, actions = _prepare(*dataset.get_next_batch("train"))
                train_loss += float(train_step(obs, actions, lr))
            train_loss /= n_train
            if self.verbose > 0 and (epoch_idx + 1) % val_interval == 0:
                val_loss = 0.0
                n_val = max(len(dataset.val_loader), 1)
                for _ in range(len(dataset.val_loader)):
                    obs, actions = _prepare(*dataset.get_next_batch("val"))
                    val_loss += float(val_step(obs, actions))
                val_loss /= n_val
                print(f"==== Training progress {100 * (epoch_idx + 1) / n_epochs:.2f}% ====")
                print(f"Epoch {epoch_idx + 1}")
                print(f"Training loss: {train_loss:.6f}, Validation loss: {val_loss:.6f}")
                print()
        self._on_parameters_loaded()
        if self.verbose > 0:
            print("Pretraining done.")
        return self
