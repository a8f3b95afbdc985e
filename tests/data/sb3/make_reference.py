"""Generate the stable-baselines3 reference agents of ``tests/data/sb3`` (run with PyTorch and stable-baselines3
in a separate venv, never sbtf's own environment)::

    python -m venv /tmp/sb3venv
    /tmp/sb3venv/bin/pip install torch stable-baselines3 box2d pygame
    /tmp/sb3venv/bin/python tests/data/sb3/make_reference.py [NAME ...]   # all agents, or only those named

Each agent trains a few steps on a small env of ``reference_envs.py`` (so its optimizers hold state), is saved as
``<name>.zip`` by SB3, and SB3's own outputs on fixed inputs go to ``reference.json`` (deterministic actions, values
and log-probabilities, Q-values, critic values), its optimizers' per-parameter state to ``optimizer_state.npz``
(``<name>/<optimizer>/<parameter>/<exp_avg|exp_avg_sq|square_avg|step>``). For the agents of ``STEP_CHECK``, the
saved zip is loaded back by SB3 and its optimizer takes one step on the gradient of a fixed loss (the sum of the
Q-values / values on the reference inputs) at the file's learning rate: the parameters after it are stored as
``step_check/<name>/<parameter>`` and the learning rate as ``reference.json``'s ``step_check_lr``, so that sbtf's
continuation from the restored state can be compared with PyTorch's.
"""
from __future__ import annotations

import json
import os
import sys

import numpy as np
import torch as th

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from reference_envs import make_env  # noqa: E402
from stable_baselines3 import A2C, DQN, PPO, SAC  # noqa: E402
from stable_baselines3.common.sb2_compat.rmsprop_tf_like import RMSpropTFLike  # noqa: E402

SMALL_CNN = dict(features_extractor_kwargs=dict(features_dim=16))
AGENTS = {
    # name: (class, policy, env name, constructor kwargs, steps)
    "ppo_cnn": (PPO, "CnnPolicy", "image", dict(n_steps=32, batch_size=16, n_epochs=2,
                                                policy_kwargs=dict(net_arch=dict(pi=[16], vf=[16]), **SMALL_CNN)), 64),
    "dqn_cnn": (DQN, "CnnPolicy", "gray", dict(buffer_size=200, learning_starts=16, train_freq=4, batch_size=8,
                                               target_update_interval=24,
                                               policy_kwargs=dict(net_arch=[16], **SMALL_CNN)), 64),
    "ppo_dict_separate": (PPO, "MultiInputPolicy", "dict_image", dict(
        n_steps=32, batch_size=16, n_epochs=2, policy_kwargs=dict(
            share_features_extractor=False, net_arch=dict(pi=[16], vf=[8]),
            features_extractor_kwargs=dict(cnn_output_dim=8))), 64),
    "dqn_dict": (DQN, "MultiInputPolicy", "dict_vector", dict(buffer_size=200, learning_starts=16, train_freq=4,
                                                              batch_size=8, policy_kwargs=dict(net_arch=[16])), 64),
    "sac_dict": (SAC, "MultiInputPolicy", "dict_vector_box", dict(buffer_size=200, learning_starts=16, batch_size=8,
                                                                  policy_kwargs=dict(net_arch=[16])), 48),
    "a2c_rmsprop": (A2C, "MlpPolicy", "cartpole", dict(n_steps=8, policy_kwargs=dict(net_arch=[16])), 80),
    "a2c_rmsprop_tf_like": (A2C, "MlpPolicy", "cartpole", dict(n_steps=8, policy_kwargs=dict(
        net_arch=[16], optimizer_class=RMSpropTFLike, optimizer_kwargs=dict(alpha=0.99, eps=1e-5))), 40),
    "sac_dict_image_shared": (SAC, "MultiInputPolicy", "dict_image", dict(
        buffer_size=200, learning_starts=16, batch_size=8, policy_kwargs=dict(
            net_arch=[16], share_features_extractor=True, features_extractor_kwargs=dict(cnn_output_dim=8))), 40),
    # played from an RL-Zoo run folder under its old id LunarLander-v2 (tests/test_env_id_table.py)
    "ppo_lunar": (PPO, "MlpPolicy", "lunar", dict(n_steps=32, batch_size=16, n_epochs=1,
                                                  policy_kwargs=dict(net_arch=[8])), 32),
}
N_INPUTS = 6
STEP_CHECK = ("dqn_dict", "a2c_rmsprop", "ppo_cnn")


def _inputs(env, seed: int):
    space = env.observation_space
    space.seed(seed)
    samples = [space.sample() for _ in range(N_INPUTS)]
    if isinstance(samples[0], dict):
        return {key: np.stack([s[key] for s in samples]) for key in samples[0]}
    return np.stack(samples)


def _jsonable(obs):
    if isinstance(obs, dict):
        return {key: value.tolist() for key, value in obs.items()}
    return obs.tolist()


def _optimizers(model):
    policy = model.policy
    found = {}
    for attr in ("optimizer",):
        if getattr(policy, attr, None) is not None:
            found["policy.optimizer"] = (policy.optimizer, dict(policy.named_parameters()))
    if hasattr(policy, "actor") and getattr(policy.actor, "optimizer", None) is not None:
        found["actor.optimizer"] = (policy.actor.optimizer,
                                    {f"actor.{k}": v for k, v in policy.actor.named_parameters()})
        found["critic.optimizer"] = (policy.critic.optimizer,
                                     {f"critic.{k}": v for k, v in policy.critic.named_parameters()})
    if getattr(model, "ent_coef_optimizer", None) is not None:
        found["ent_coef_optimizer"] = (model.ent_coef_optimizer, {"log_ent_coef": model.log_ent_coef})
    return found


def _optimizer_state(name, model, out):
    for opt_name, (optimizer, named) in _optimizers(model).items():
        by_id = {id(p): n for n, p in named.items()}
        for group in optimizer.param_groups:
            for param in group["params"]:
                state = optimizer.state.get(param, {})
                for key, value in state.items():
                    out[f"{name}/{opt_name}/{by_id[id(param)]}/{key}"] = np.asarray(
                        value.detach().cpu().numpy() if th.is_tensor(value) else value, dtype=np.float32)


def _step_check(cls, name, obs, out) -> float:
    """One step of the reloaded agent's optimizer on d(sum of Q-values or values)/d(parameters); the parameters
    after it go to ``out``; returns the learning rate used (the file's)."""
    loaded = cls.load(os.path.join(HERE, f"{name}.zip"), device="cpu")
    obs_t, _ = loaded.policy.obs_to_tensor(obs)
    optimizer = loaded.policy.optimizer
    optimizer.zero_grad()
    loss = loaded.q_net(obs_t).sum() if cls is DQN else loaded.policy.predict_values(obs_t).sum()
    loss.backward()
    optimizer.step()
    for key, value in loaded.policy.state_dict().items():
        out[f"step_check/{name}/{key}"] = value.detach().cpu().numpy()
    return float(optimizer.param_groups[0]["lr"])


def main(names) -> None:
    th.manual_seed(0)
    reference = {"stable_baselines3": __import__("stable_baselines3").__version__, "torch": th.__version__,
                 "agents": {}}
    optimizer_state = {}
    if names:  # update only these agents' files and entries
        with open(os.path.join(HERE, "reference.json"), encoding="utf-8") as handle:
            reference["agents"] = json.load(handle)["agents"]
        optimizer_state = dict(np.load(os.path.join(HERE, "optimizer_state.npz")))
        optimizer_state = {k: v for k, v in optimizer_state.items()
                           if k.split("/")[0] not in names and not (k.startswith("step_check/") and
                                                                     k.split("/")[1] in names)}
    for index, (name, (cls, policy, env_name, kwargs, steps)) in enumerate(AGENTS.items()):
        if names and name not in names:
            continue
        env = make_env(env_name)
        model = cls(policy, env, seed=index, device="cpu", **kwargs)
        model.learn(steps)
        model.save(os.path.join(HERE, f"{name}.zip"))
        obs = _inputs(env, 100 + index)
        actions, _ = model.predict(obs, deterministic=True)
        entry = {"class": cls.__name__, "env": env_name, "obs": _jsonable(obs),
                 "deterministic_actions": np.asarray(actions).tolist()}
        with th.no_grad():
            obs_t, _ = model.policy.obs_to_tensor(obs)
            if cls in (PPO, A2C):
                entry["values"] = model.policy.predict_values(obs_t).numpy().ravel().tolist()
                dist = model.policy.get_distribution(obs_t)
                entry["log_prob_of_deterministic_actions"] = dist.log_prob(th.as_tensor(actions)).numpy().tolist()
            if cls is DQN:
                entry["q_values"] = model.q_net(obs_t).numpy().tolist()
            if cls is SAC:
                scaled = th.as_tensor(model.policy.scale_action(actions), dtype=th.float32)
                entry["critic_q_of_scaled_deterministic_actions"] = th.cat(
                    model.critic(obs_t, scaled), dim=1).numpy().tolist()
        if name in STEP_CHECK:
            entry["step_check_lr"] = _step_check(cls, name, obs, optimizer_state)
        reference["agents"][name] = entry
        _optimizer_state(name, model, optimizer_state)
    with open(os.path.join(HERE, "reference.json"), "w", encoding="utf-8") as handle:
        json.dump(reference, handle)
    np.savez_compressed(os.path.join(HERE, "optimizer_state.npz"), **optimizer_state)


if __name__ == "__main__":
    main(sys.argv[1:])
