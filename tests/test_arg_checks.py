"""Invalid hyperparameters are refused in the constructor with the valid range, for every algorithm (issue #32)."""
import numpy as np
import pytest

from sbtf import algorithms
from sbtf.common.arg_checks import HYPERPARAMETER_RULES, check_hyperparameters, check_total_timesteps


def _cls(registry, name):
    return next(algo for algo in registry.values() if algo.name == name).load()


def _env_for(name: str) -> str:
    return "CartPole-v1" if name in ("PPO2", "A2C", "ACER", "ACKTR", "PPO1", "TRPO", "GAIL", "DQN", "PPO", "QRDQN",
                                     "MaskablePPO", "RecurrentPPO", "ARS") else "Pendulum-v1"


# (registry, algorithm, bad keyword arguments, expected message)
CASES = [
    (algorithms.ALGORITHMS, "PPO2", {"n_steps": 0}, "PPO2: n_steps must be >= 1, got 0."),
    (algorithms.ALGORITHMS, "PPO2", {"nminibatches": 0}, "PPO2: nminibatches must be >= 1, got 0."),
    (algorithms.ALGORITHMS, "PPO2", {"noptepochs": -1}, "PPO2: noptepochs must be >= 1, got -1."),
    (algorithms.ALGORITHMS, "PPO2", {"gamma": 1.5}, "PPO2: gamma must be in [0, 1], got 1.5."),
    (algorithms.ALGORITHMS, "PPO2", {"learning_rate": -0.001}, "PPO2: learning_rate must be >= 0, got -0.001."),
    (algorithms.ALGORITHMS, "DDPG", {"actor_lr": 0.0}, "DDPG: actor_lr must be > 0, got 0.0."),
    (algorithms.ALGORITHMS, "PPO2", {"n_steps": 2.5}, "PPO2: n_steps must be an integer >= 1, got 2.5."),
    (algorithms.ALGORITHMS, "A2C", {"n_steps": 0}, "A2C: n_steps must be >= 1, got 0."),
    (algorithms.ALGORITHMS, "ACER", {"buffer_size": 0}, "ACER: buffer_size must be >= 1, got 0."),
    (algorithms.ALGORITHMS, "ACKTR", {"gamma": -0.1}, "ACKTR: gamma must be in [0, 1], got -0.1."),
    (algorithms.ALGORITHMS, "DQN", {"batch_size": 0}, "DQN: batch_size must be >= 1, got 0."),
    (algorithms.ALGORITHMS, "DQN", {"buffer_size": 0}, "DQN: buffer_size must be >= 1, got 0."),
    (algorithms.ALGORITHMS, "SAC", {"batch_size": -32}, "SAC: batch_size must be >= 1, got -32."),
    (algorithms.ALGORITHMS, "TD3", {"tau": 2.0}, "TD3: tau must be in [0, 1], got 2.0."),
    (algorithms.ALGORITHMS, "DDPG", {"batch_size": 0}, "DDPG: batch_size must be >= 1, got 0."),
    (algorithms.ALGORITHMS, "PPO1", {"optim_batchsize": 0}, "PPO1: optim_batchsize must be >= 1, got 0."),
    (algorithms.ALGORITHMS, "TRPO", {"timesteps_per_batch": 0}, "TRPO: timesteps_per_batch must be >= 1, got 0."),
    (algorithms.SB3_ALGORITHMS, "PPO", {"n_epochs": 0}, "PPO: n_epochs must be >= 1, got 0."),
    (algorithms.SB3_ALGORITHMS, "PPO", {"batch_size": -64}, "PPO: batch_size must be >= 1, got -64."),
    (algorithms.SB3_ALGORITHMS, "A2C", {"gae_lambda": 1.2}, "A2C: gae_lambda must be in [0, 1], got 1.2."),
    (algorithms.SB3_ALGORITHMS, "DQN", {"learning_starts": -1}, "DQN: learning_starts must be >= 0, got -1."),
    (algorithms.SB3_ALGORITHMS, "SAC", {"buffer_size": 0}, "SAC: buffer_size must be >= 1, got 0."),
    (algorithms.SB3_ALGORITHMS, "TD3", {"policy_delay": 0}, "TD3: policy_delay must be >= 1, got 0."),
    (algorithms.SB3_ALGORITHMS, "DDPG", {"gamma": 2}, "DDPG: gamma must be in [0, 1], got 2."),
    (algorithms.CONTRIB_ALGORITHMS, "ARS", {"n_delta": 0}, "ARS: n_delta must be >= 1, got 0."),
    (algorithms.CONTRIB_ALGORITHMS, "MaskablePPO", {"n_steps": 0}, "MaskablePPO: n_steps must be >= 1, got 0."),
    (algorithms.CONTRIB_ALGORITHMS, "RecurrentPPO", {"n_epochs": 0}, "RecurrentPPO: n_epochs must be >= 1, got 0."),
    (algorithms.CONTRIB_ALGORITHMS, "QRDQN", {"batch_size": 0}, "QRDQN: batch_size must be >= 1, got 0."),
    (algorithms.CONTRIB_ALGORITHMS, "TQC", {"top_quantiles_to_drop_per_net": -1},
     "TQC: top_quantiles_to_drop_per_net must be >= 0, got -1."),
    (algorithms.CONTRIB_ALGORITHMS, "TRPO", {"n_steps": 0}, "TRPO: n_steps must be >= 1, got 0."),
]


@pytest.mark.parametrize("registry, name, kwargs, message", CASES,
                         ids=[f"{c[1]}-{next(iter(c[2]))}" for c in CASES])
def test_constructor_refuses_an_invalid_hyperparameter(registry, name, kwargs, message):
    with pytest.raises(ValueError) as info:
        _cls(registry, name)("MlpPolicy", _env_for(name), **kwargs)
    assert str(info.value) == message


def test_every_algorithm_checks_its_constructor_arguments():
    """Each constructor refuses the first of its own parameters that has a rule (no algorithm forgets the call)."""
    import inspect

    bad_value = {">= 1": 0, ">= 0": -1, ">= -1": -2, "in [0, 1]": 1.5, "> 0": 0.0, "in (0, 1)": 1.0}
    for registry in (algorithms.ALGORITHMS, algorithms.SB3_ALGORITHMS, algorithms.CONTRIB_ALGORITHMS):
        for name in sorted({algo.name for algo in registry.values()}):
            if name == "HER":  # HER passes its keyword arguments to the model class, which checks them
                continue
            cls = _cls(registry, name)
            params = [p for p in inspect.signature(cls.__init__).parameters if p in HYPERPARAMETER_RULES]
            assert params, name
            param = params[0]
            value = bad_value[HYPERPARAMETER_RULES[param].description]
            with pytest.raises(ValueError, match=f"^{name}: {param} must be "):
                cls("MlpPolicy", _env_for(name), **{param: value}, _init_setup_model=False)


def test_valid_values_and_non_numbers_pass():
    check_hyperparameters("X", {"gamma": 0.0, "n_steps": np.int64(5), "learning_rate": lambda _: 1e-3,
                                "ent_coef": "auto", "clip_range_vf": None, "train_freq": (1, "episode"),
                                "gradient_steps": -1, "buffer_size": 1e6, "unknown_name": -5})
    with pytest.raises(ValueError, match=r"^X: gamma must be in \[0, 1\], got nan\.$"):
        check_hyperparameters("X", {"gamma": float("nan")})


def test_her_model_kwargs_are_checked():
    from sbtf import HER, SAC
    from sbtf.common.bit_flipping_env import BitFlippingEnv

    with pytest.raises(ValueError, match=r"^SAC: batch_size must be >= 1, got 0\.$"):
        HER("MlpPolicy", BitFlippingEnv(4, continuous=True, max_steps=4), SAC, batch_size=0)


@pytest.mark.parametrize("registry, name", [(algorithms.ALGORITHMS, "PPO2"), (algorithms.SB3_ALGORITHMS, "SAC"),
                                            (algorithms.ALGORITHMS, "PPO1")])
def test_learn_refuses_negative_total_timesteps(registry, name):
    model = _cls(registry, name)("MlpPolicy", _env_for(name))
    with pytest.raises(ValueError, match=r"^learn\(\): total_timesteps must be an integer >= 0 .*got -5\.$"):
        model.learn(total_timesteps=-5)
    assert model.learn(total_timesteps=0) is model and model.num_timesteps == 0


def test_total_timesteps_check():
    check_total_timesteps(0)
    check_total_timesteps(np.int64(10))
    check_total_timesteps(1e4)
    for bad in (-1, 2.5, float("inf"), "100", None):
        with pytest.raises(ValueError, match="total_timesteps must be an integer >= 0"):
            check_total_timesteps(bad)
