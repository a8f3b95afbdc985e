"""The one table of env ids gymnasium renamed or retired (``sbtf.common.gym_compat.ENV_ID_TABLE``): mapped ids have
a registered successor with the spaces the table states; ids whose successor's spaces differ are refused with the
reason, also through ``load(env=...)``."""
import importlib.util
import re
import warnings

import gymnasium
import numpy as np
import pytest

from sbtf.common.gym_compat import ENV_ID_TABLE, RETIRED_ENV_IDS, RetiredEnvIdError, resolve_env_id
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
