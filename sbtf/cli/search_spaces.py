"""Hyperparameter search spaces of ``sbtf optimize``: the rl-baselines-zoo's (``utils/hyperparams_opt.py`` of the
stable-baselines 2 zoo), written as functions of an Optuna trial that return hyperparameters in the format of the
shipped YAML files (``noise_type`` / ``noise_std`` instead of noise objects, ``policy_kwargs`` as a string), so that
the best ones can be written to a YAML file that ``sbtf train --hyperparams`` reads.

Where the zoo had no sampler (dqn), the space follows the zoo's style over the stable-baselines 2 arguments.
"""
from __future__ import annotations

from typing import Any, Callable, Dict

GAMMAS = [0.9, 0.95, 0.98, 0.99, 0.995, 0.999, 0.9999]
LAMBDAS = [0.8, 0.9, 0.92, 0.95, 0.98, 0.99, 1.0]


def sample_ppo2_params(trial: Any) -> Dict[str, Any]:
    """PPO2: the zoo's sampler (``nminibatches`` from a sampled minibatch size: ``n_steps // batch_size``)."""
    batch_size = trial.suggest_categorical("batch_size", [32, 64, 128, 256])
    n_steps = trial.suggest_categorical("n_steps", [16, 32, 64, 128, 256, 512, 1024, 2048])
    return {
        "n_steps": n_steps,
        "nminibatches": 1 if n_steps < batch_size else n_steps // batch_size,
        "gamma": trial.suggest_categorical("gamma", GAMMAS),
        "learning_rate": trial.suggest_float("lr", 1e-5, 1.0, log=True),
        "ent_coef": trial.suggest_float("ent_coef", 1e-8, 0.1, log=True),
        "cliprange": trial.suggest_categorical("cliprange", [0.1, 0.2, 0.3, 0.4]),
        "noptepochs": trial.suggest_categorical("noptepochs", [1, 5, 10, 20, 30, 50]),
        "lam": trial.suggest_categorical("lambda", LAMBDAS),
    }


def sample_a2c_params(trial: Any) -> Dict[str, Any]:
    """A2C (and ACKTR, which takes the same arguments): the zoo's sampler."""
    return {
        "gamma": trial.suggest_categorical("gamma", GAMMAS),
        "n_steps": trial.suggest_categorical("n_steps", [5, 16, 32, 64, 128, 256]),
        "lr_schedule": trial.suggest_categorical("lr_schedule", ["linear", "constant"]),
        "learning_rate": trial.suggest_float("lr", 1e-5, 1.0, log=True),
        "ent_coef": trial.suggest_float("ent_coef", 1e-8, 0.1, log=True),
        "vf_coef": trial.suggest_float("vf_coef", 0.0, 1.0),
    }


def sample_trpo_params(trial: Any) -> Dict[str, Any]:
    """TRPO: the zoo's sampler."""
    return {
        "gamma": trial.suggest_categorical("gamma", GAMMAS),
        "timesteps_per_batch": trial.suggest_categorical("timesteps_per_batch",
                                                         [16, 32, 64, 128, 256, 512, 1024, 2048]),
        "max_kl": trial.suggest_float("max_kl", 1e-8, 1.0, log=True),
        "entcoeff": trial.suggest_float("ent_coef", 1e-8, 0.1, log=True),
        "lam": trial.suggest_categorical("lambda", LAMBDAS),
        "cg_damping": trial.suggest_float("cg_damping", 1e-5, 1.0, log=True),
        "cg_iters": trial.suggest_categorical("cg_iters", [1, 10, 20, 30, 50]),
        "vf_stepsize": trial.suggest_float("vf_stepsize", 1e-5, 1.0, log=True),
        "vf_iters": trial.suggest_categorical("vf_iters", [1, 3, 5, 10, 20]),
    }


def sample_sac_params(trial: Any) -> Dict[str, Any]:
    """SAC: the zoo's sampler (``target_entropy`` is sampled only with ``ent_coef: 'auto'``)."""
    ent_coef = trial.suggest_categorical("ent_coef", ["auto", 0.5, 0.1, 0.05, 0.01, 0.0001])
    target_entropy: Any = "auto"
    if ent_coef == "auto":
        target_entropy = trial.suggest_categorical("target_entropy", ["auto", -1, -10, -20, -50, -100])
    return {
        "gamma": trial.suggest_categorical("gamma", GAMMAS),
        "learning_rate": trial.suggest_float("lr", 1e-5, 1.0, log=True),
        "batch_size": trial.suggest_categorical("batch_size", [16, 32, 64, 128, 256, 512]),
        "buffer_size": trial.suggest_categorical("buffer_size", [int(1e4), int(1e5), int(1e6)]),
        "learning_starts": trial.suggest_categorical("learning_starts", [0, 1000, 10000, 20000]),
        "train_freq": trial.suggest_categorical("train_freq", [1, 10, 100, 300]),
        "gradient_steps": trial.suggest_categorical("gradient_steps", [1, 2, 5]),
        "ent_coef": ent_coef,
        "target_entropy": target_entropy,
    }


def sample_td3_params(trial: Any) -> Dict[str, Any]:
    """TD3: the zoo's sampler (``gradient_steps = train_freq``; Gaussian or Ornstein-Uhlenbeck action noise)."""
    train_freq = trial.suggest_categorical("train_freq", [1, 10, 100, 1000, 2000])
    return {
        "gamma": trial.suggest_categorical("gamma", GAMMAS),
        "learning_rate": trial.suggest_float("lr", 1e-5, 1.0, log=True),
        "batch_size": trial.suggest_categorical("batch_size", [16, 32, 64, 100, 128, 256, 512]),
        "buffer_size": trial.suggest_categorical("buffer_size", [int(1e4), int(1e5), int(1e6)]),
        "train_freq": train_freq,
        "gradient_steps": train_freq,
        "noise_type": trial.suggest_categorical("noise_type", ["ornstein-uhlenbeck", "normal"]),
        "noise_std": trial.suggest_float("noise_std", 0.0, 1.0),
    }


def sample_ddpg_params(trial: Any) -> Dict[str, Any]:
    """DDPG: the zoo's sampler (one learning rate for actor and critic; layer norm with parameter noise)."""
    learning_rate = trial.suggest_float("lr", 1e-5, 1.0, log=True)
    noise_type = trial.suggest_categorical("noise_type", ["ornstein-uhlenbeck", "normal", "adaptive-param"])
    params: Dict[str, Any] = {
        "gamma": trial.suggest_categorical("gamma", GAMMAS),
        "actor_lr": learning_rate,
        "critic_lr": learning_rate,
        "batch_size": trial.suggest_categorical("batch_size", [16, 32, 64, 128, 256]),
        "memory_limit": trial.suggest_categorical("memory_limit", [int(1e4), int(1e5), int(1e6)]),
        "noise_type": noise_type,
        "noise_std": trial.suggest_float("noise_std", 0.0, 1.0),
        "normalize_observations": trial.suggest_categorical("normalize_observations", [True, False]),
        "normalize_returns": trial.suggest_categorical("normalize_returns", [True, False]),
    }
    if noise_type == "adaptive-param":
        params["policy_kwargs"] = "dict(layer_norm=True)"
    return params


def sample_dqn_params(trial: Any) -> Dict[str, Any]:
    """DQN (no sampler in the stable-baselines 2 zoo): the zoo's style over stable-baselines 2's DQN arguments."""
    return {
        "gamma": trial.suggest_categorical("gamma", GAMMAS),
        "learning_rate": trial.suggest_float("lr", 1e-5, 1e-1, log=True),
        "batch_size": trial.suggest_categorical("batch_size", [16, 32, 64, 100, 128, 256, 512]),
        "buffer_size": trial.suggest_categorical("buffer_size", [int(1e4), int(5e4), int(1e5), int(1e6)]),
        "exploration_final_eps": trial.suggest_float("exploration_final_eps", 0.0, 0.2),
        "exploration_fraction": trial.suggest_float("exploration_fraction", 0.0, 0.5),
        "target_network_update_freq": trial.suggest_categorical("target_network_update_freq",
                                                                [1, 500, 1000, 5000, 10000]),
        "learning_starts": trial.suggest_categorical("learning_starts", [0, 1000, 5000, 10000]),
        "train_freq": trial.suggest_categorical("train_freq", [1, 4, 8, 16]),
        "prioritized_replay": trial.suggest_categorical("prioritized_replay", [True, False]),
    }


def sample_her_params(trial: Any, model_class: str) -> Dict[str, Any]:
    """HER: the wrapped algorithm's space plus ``n_sampled_goal`` (and ``random_exploration`` for sac / ddpg)."""
    params = dict(HYPERPARAMS_SAMPLER[model_class](trial))
    if model_class in ("sac", "ddpg"):
        params["random_exploration"] = trial.suggest_float("random_exploration", 0.0, 1.0)
    params["n_sampled_goal"] = trial.suggest_categorical("n_sampled_goal", [1, 2, 4, 6, 8])
    return params


#: algorithm -> sampler(trial) -> hyperparameters (HER: :func:`sample_her_params` with its ``model_class``)
HYPERPARAMS_SAMPLER: Dict[str, Callable[[Any], Dict[str, Any]]] = {
    "ppo2": sample_ppo2_params,
    "a2c": sample_a2c_params,
    "acktr": sample_a2c_params,
    "trpo": sample_trpo_params,
    "sac": sample_sac_params,
    "td3": sample_td3_params,
    "ddpg": sample_ddpg_params,
    "dqn": sample_dqn_params,
}

#: the algorithms ``sbtf optimize`` can tune
SEARCHABLE_ALGOS = tuple(sorted(HYPERPARAMS_SAMPLER)) + ("her",)
