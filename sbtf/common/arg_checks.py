"""
Hyperparameter checks shared by every algorithm's constructor: a value out of its valid range is refused at once, with
the range, instead of failing later inside ``learn()`` (e.g. ``PPO2(n_steps=0)`` dividing by zero).

The rules are keyed by parameter name: the same name means the same kind of quantity in every algorithm of sbtf
(stable-baselines 2, stable-baselines3 and sb3-contrib). A value that is not a number (a schedule, ``"auto"``, None)
is left to the algorithm.
"""
from __future__ import annotations

import math
import numbers
from typing import Any, Callable, Dict, Mapping, Optional

__all__ = ["check_hyperparameters", "check_total_timesteps", "HYPERPARAMETER_RULES"]


class _Rule:
    """A valid range: ``check(value)`` is the text of the range when ``value`` is out of it, else None."""

    def __init__(self, description: str, valid: Callable[[float], bool], integer: bool = False):
        self.description = description
        self.valid = valid
        self.integer = integer

    def check(self, value: Any) -> Optional[str]:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            return None  # schedules, "auto", None, tuples (SB3's train_freq): the algorithm's own business
        number = float(value)
        if math.isnan(number):
            return self.description
        if self.integer and (math.isinf(number) or number != int(number)):
            return "an integer " + self.description
        return None if self.valid(number) else self.description


def _at_least(minimum: int) -> _Rule:
    return _Rule(f">= {minimum}", lambda v: v >= minimum, integer=True)


_UNIT = _Rule("in [0, 1]", lambda v: 0.0 <= v <= 1.0)
_POSITIVE = _Rule("> 0", lambda v: v > 0.0)
_NON_NEGATIVE = _Rule(">= 0", lambda v: v >= 0.0)
_OPEN_UNIT = _Rule("in (0, 1)", lambda v: 0.0 < v < 1.0)

#: parameter name -> valid range, for every algorithm's constructor
HYPERPARAMETER_RULES: Dict[str, _Rule] = {
    # sizes and counts
    **{name: _at_least(1) for name in (
        "n_steps", "batch_size", "nminibatches", "noptepochs", "n_epochs", "buffer_size", "timesteps_per_actorbatch",
        "timesteps_per_batch", "optim_epochs", "optim_batchsize", "nb_train_steps", "nb_rollout_steps",
        "target_update_interval", "target_network_update_freq", "policy_delay", "n_delta", "n_top", "cg_iters",
        "cg_max_steps", "vf_iters", "n_critic_updates", "line_search_max_iter", "g_step", "d_step", "kfac_update",
        "n_eval_episodes", "sub_sampling_factor", "stats_window_size", "train_freq")},
    **{name: _at_least(0) for name in ("learning_starts", "replay_start", "replay_ratio",
                                       "top_quantiles_to_drop_per_net")},
    "gradient_steps": _at_least(-1),  # -1: as many gradient steps as env steps (stable-baselines3)
    # discounts, mixing factors, probabilities
    **{name: _UNIT for name in (
        "gamma", "lam", "gae_lambda", "tau", "exploration_fraction", "exploration_initial_eps", "exploration_final_eps",
        "random_exploration", "alpha", "rprop_alpha", "prioritized_replay_alpha", "prioritized_replay_beta0")},
    "line_search_shrinking_factor": _OPEN_UNIT,
    # step sizes and trust regions (numbers only: schedules are callables; SB2's cliprange_vf < 0 turns clipping off)
    **{name: _POSITIVE for name in (
        "actor_lr", "critic_lr", "optim_stepsize", "vf_stepsize", "d_stepsize", "max_kl",
        "delta_std", "cliprange", "clip_range", "clip_param", "clip_range_vf", "max_grad_norm",
        "target_kl")},
    # learning_rate 0 freezes the weights (no crash) and is in real files: rl-baselines3-zoo's A2C Pendulum-v1 agent
    # stores learning_rate 0.0 (the end of its linear schedule); stable-baselines3 accepts it. Negative is refused.
    "learning_rate": _NON_NEGATIVE,
    # loss weights
    **{name: _NON_NEGATIVE for name in ("ent_coef", "vf_coef", "entcoeff", "q_coef", "cg_damping", "kfac_clip",
                                        "adversary_entcoeff")},
}


def check_hyperparameters(algo: str, values: Mapping[str, Any]) -> None:
    """
    Refuse hyperparameters out of their valid range (see ``HYPERPARAMETER_RULES``); names without a rule and values
    that are not numbers are left alone. Constructors call it first, with their ``locals()``.

    :param algo: (str) the algorithm's name, for the message
    :param values: (Mapping) parameter name -> value
    :raises ValueError: naming the parameter, its valid range and the value given
    """
    for name, value in values.items():
        rule = HYPERPARAMETER_RULES.get(name)
        problem = rule.check(value) if rule is not None else None
        if problem is not None:
            raise ValueError(f"{algo}: {name} must be {problem}, got {value!r}.")


def check_total_timesteps(total_timesteps: Any) -> None:
    """
    Refuse a negative ``learn(total_timesteps)`` (0 stays a no-op, as in stable-baselines3).

    :param total_timesteps: (int) the argument of ``learn()``
    :raises ValueError: when it is negative or not an integer
    """
    valid = not isinstance(total_timesteps, bool) and isinstance(total_timesteps, numbers.Real) \
        and math.isfinite(float(total_timesteps)) and float(total_timesteps) == int(total_timesteps) \
        and total_timesteps >= 0
    if not valid:
        raise ValueError(f"learn(): total_timesteps must be an integer >= 0 (the number of env steps to train for), "
                         f"got {total_timesteps!r}.")
