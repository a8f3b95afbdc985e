"""The one table of env ids gymnasium renamed or retired (``sbtf.common.envs.gym_compat.ENV_ID_TABLE``): mapped ids have
a registered successor with the spaces the table states; ids whose successor's spaces differ are refused with the
reason, also through ``load(env=...)``."""
import importlib.util
import re
import warnings

import gymnasium
import numpy as np
import pytest

from sbtf.common.envs.gym_compat import ENV_ID_TABLE, RETIRED_ENV_IDS, RetiredEnvIdError, resolve_env_id
from sbtf.sb3 import PPO

_STATED = re.compile(r"observe (\d+) values and take (\d+) actions")


def _dims(space: gymnasium.Space) -> int:
    return int(space.n) if isinstance(space, gymnasium.spaces.Discrete) else int(np.prod(space.shape))


@pytest.mark.parametrize("old", sorted(old for old, change in ENV_ID_TABLE.items() if change.successor))
def test_successors_have_the_stated_spaces(old):
    change = ENV_ID_TABLE[old]
    spec = gymnasium.registry[change.successor]
    assert "mujoco_py" not in str(getattr(spec.entry_point, "__name__", spec.entry_point))
    stated = _STATED.search(change.why)
    if stated is None:
        return  # images / discrete states: stated in words
    if "mujoco" in str(spec.entry_point) and importlib.util.find_spec("mujoco") is None:
        pytest.skip("MuJoCo is not installed: its envs cannot be made here")
    env = gymnasium.make(change.successor)
    try:
        assert (_dims(env.observation_space), _dims(env.action_space)) == tuple(int(x) for x in stated.groups())
    finally:
        env.close()


def test_mujoco_py_ids_map_to_v4_and_ant_is_refused():
    for old in ("HalfCheetah-v3", "Hopper-v2", "Humanoid-v3", "Reacher-v2"):
        with pytest.warns(UserWarning, match=rf"'{old}' was retired by gymnasium; using its successor"):
            assert resolve_env_id(old) == old.rsplit("-", 1)[0] + "-v4"
    for old in ("Ant-v2", "Ant-v3"):
        assert old not in RETIRED_ENV_IDS
        with pytest.raises(RetiredEnvIdError, match=r"observes 111 values.*use_contact_forces=True"):
            resolve_env_id(old)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert resolve_env_id("BipedalWalker-v3") == "BipedalWalker-v3"  # still current: not remapped


def test_load_with_a_renamed_env_id(tmp_path):
    model = PPO("MlpPolicy", "LunarLander-v3", n_steps=16, batch_size=16, policy_kwargs=dict(net_arch=[8]))
    model.save(tmp_path / "lander.zip")
    with pytest.warns(UserWarning, match="LunarLander-v2.*LunarLander-v3"):
        loaded = PPO.load(tmp_path / "lander.zip", env="LunarLander-v2")
    assert loaded.get_env().envs[0].unwrapped.spec.id == "LunarLander-v3"
    with pytest.raises(RetiredEnvIdError, match="Ant-v2 observes 111 values"):
        PPO.load(tmp_path / "lander.zip", env="Ant-v2")


_CONFIG = "!!python/object/apply:collections.OrderedDict\n- - - n_envs\n    - 1\n  - - policy\n    - MlpPolicy\n"


def test_enjoy_plays_an_rl_zoo_run_of_a_renamed_id(tmp_path, capsys):
    """An RL-Zoo3 run folder named after LunarLander-v2 (an SB3 zip written by real stable-baselines3,
    tests/data/sb3/ppo_lunar.zip) plays on LunarLander-v3; Ant-v2 is refused with the reason."""
    from pathlib import Path

    from sbtf.cli import main

    run = tmp_path / "ppo" / "LunarLander-v2_1"
    (run / "LunarLander-v2").mkdir(parents=True)
    (run / "LunarLander-v2.zip").write_bytes((Path(__file__).parent / "data" / "sb3" / "ppo_lunar.zip").read_bytes())
    (run / "LunarLander-v2" / "config.yml").write_text(_CONFIG)
    code = main(["enjoy", "--algo", "ppo", "--env", "LunarLander-v2", "-f", str(tmp_path), "-n", "120", "--seed", "0"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "LunarLander-v2.zip" in captured.out and "on LunarLander-v3" in captured.out
    assert re.search(r"Episode 1: return -?[\d.]+", captured.out)
    code = main(["enjoy", "--algo", "ppo", "--env", "Ant-v2", "-f", str(tmp_path), "-n", "10"])
    assert code == 2
    assert "Ant-v2 observes 111 values" in capsys.readouterr().err
