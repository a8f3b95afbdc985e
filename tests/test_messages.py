"""Messages a newcomer meets (issue #32): space mismatches name the space and show both, no load noise."""
import gymnasium as gym
import pytest

from sbtf import PPO2
from sbtf.common.space_checks import env_space_mismatch_message
from sbtf.sb3 import PPO


@pytest.fixture(scope="module")
def cartpole_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("models")
    PPO2("MlpPolicy", "CartPole-v1", n_steps=16, nminibatches=1).save(folder / "ppo2.zip")
    PPO("MlpPolicy", "CartPole-v1", n_steps=16, batch_size=16).save(folder / "ppo.zip")
    return folder


def _check_both_spaces_named(message: str) -> None:
    assert message.startswith("The observation space of the env Box(")
    assert "(3,), float32) differs from the model's Box(" in message and "(4,), float32)" in message
    assert "the action space of the env Box(-2.0, 2.0, (1,), float32) differs from the model's Discrete(2)" in message
    assert "time feature" not in message


@pytest.mark.parametrize("algo, name", [(PPO2, "ppo2.zip"), (PPO, "ppo.zip")])
def test_load_with_another_env_names_both_spaces(cartpole_files, algo, name):
    with pytest.raises(ValueError) as info:
        algo.load(cartpole_files / name, env=gym.make("Pendulum-v1"))
    _check_both_spaces_named(str(info.value))


@pytest.mark.parametrize("algo, name", [(PPO2, "ppo2.zip"), (PPO, "ppo.zip")])
def test_set_env_with_another_env_names_both_spaces(cartpole_files, algo, name):
    model = algo.load(cartpole_files / name)
    with pytest.raises(ValueError) as info:
        model.set_env(gym.make("Pendulum-v1"))
    _check_both_spaces_named(str(info.value))


def test_only_the_action_space_differs():
    model = PPO("MlpPolicy", "CartPole-v1", n_steps=16, batch_size=16)
    env = gym.make("CartPole-v1")
    env.action_space = gym.spaces.Discrete(3)
    with pytest.raises(ValueError) as info:
        model.set_env(env)
    assert str(info.value).startswith("The action space of the env Discrete(3) differs from the model's Discrete(2).")
    assert "observation space" not in str(info.value)


def test_mismatch_message_keeps_the_hint_only_for_an_observation_mismatch():
    obs3, obs4 = gym.spaces.Box(-1, 1, (3,)), gym.spaces.Box(-1, 1, (4,))
    act = gym.spaces.Discrete(2)
    assert env_space_mismatch_message(obs3, obs4, act, act, False, False) is None
    assert env_space_mismatch_message(obs3, obs4, act, act, True, False, " HINT").endswith("float32). HINT")
    both = env_space_mismatch_message(obs3, obs4, gym.spaces.Discrete(3), act, True, True, " HINT")
    assert "HINT" not in both and "train a new model on this env" in both


@pytest.mark.parametrize("algo, name", [(PPO2, "ppo2.zip"), (PPO, "ppo.zip")])
def test_load_without_env_is_silent_and_learn_says_what_to_do(cartpole_files, algo, name, capsys):
    model = algo.load(cartpole_files / name, verbose=1)
    assert "without an environment" not in capsys.readouterr().out
    with pytest.raises(ValueError, match=r"this model has no environment to train on .* pass env= to load\(\), or "
                                         r"call model.set_env\(env\) before learn\(\)"):
        model.learn(16)


def _build_warnings(make) -> list:
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        make()
    return [str(w.message) for w in caught if "build()" in str(w.message) or "unbuilt state" in str(w.message)]


def test_gsde_policies_build_without_a_keras_warning():
    from sbtf import PPO2

    assert _build_warnings(lambda: PPO("MlpPolicy", "Pendulum-v1", use_sde=True, n_steps=16, batch_size=16)) == []
    assert _build_warnings(lambda: PPO2("MlpPolicy", "Pendulum-v1", use_sde=True, n_steps=16, nminibatches=1)) == []


def test_contrib_extractor_policies_build_without_a_keras_warning():
    from sbtf.contrib import MaskablePPO, RecurrentPPO
    from sbtf.contrib.common.envs import InvalidActionEnvDiscrete

    env = InvalidActionEnvDiscrete(dim=10, n_invalid_actions=3)
    assert _build_warnings(lambda: MaskablePPO("MlpPolicy", env, n_steps=16, batch_size=16)) == []
    assert _build_warnings(lambda: RecurrentPPO("MlpLstmPolicy", "CartPole-v1", n_steps=16, batch_size=16)) == []


def test_batch_size_larger_than_the_rollout_says_so():
    from sbtf.sb3.common.on_policy_algorithm import warn_truncated_minibatch

    with pytest.warns(UserWarning) as record:
        warn_truncated_minibatch(128, 32, 1)
    message = str(record[0].message)
    assert message.startswith("The mini-batch size 128 is larger than the `RolloutBuffer` (`n_steps * n_envs = 32`")
    assert "Pass a `batch_size` of at most 32" in message and "after every 0" not in message
    with pytest.warns(UserWarning, match="after every 1 untruncated mini-batches, there will be a truncated "
                                         "mini-batch of size 16"):
        warn_truncated_minibatch(48, 64, 1)
