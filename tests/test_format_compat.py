"""Files saved by earlier sbtf versions (format version 1) still load and act exactly as when they were saved."""
from __future__ import annotations

import os

import numpy as np
import pytest

import sbtf

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "sbtf_format_v1")
ALGOS = ("A2C", "ACER", "ACKTR", "PPO1", "PPO2", "TRPO", "DQN", "SAC", "TD3", "DDPG", "HER")


@pytest.mark.parametrize("name", ALGOS)
def test_version_1_file_loads_and_acts_identically(name):
    expected = np.load(os.path.join(FIXTURES, f"{name}_expected.npz"))
    if "obs" in expected.files:
        obs = expected["obs"]
    else:
        obs = {key[len("obs_"):]: expected[key] for key in expected.files if key.startswith("obs_")}
    model = getattr(sbtf, name).load(os.path.join(FIXTURES, f"{name}.zip"))
    actions = model.predict(obs, deterministic=True)[0]
    if np.issubdtype(expected["actions"].dtype, np.floating):
        # the fixture's actions were computed on another machine: the weights load bit-exact, but NumPy/BLAS may
        # round the last bit of a float32 matrix product differently on another CPU (seen: 1.2e-7 on SAC's tanh)
        np.testing.assert_allclose(actions, expected["actions"], rtol=1e-6, atol=1e-6)
    else:
        np.testing.assert_array_equal(actions, expected["actions"])
