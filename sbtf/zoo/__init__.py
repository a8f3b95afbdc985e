"""Playing and converting rl-baselines-zoo agent folders (``trained_agents/ALGO/ENV_ID.pkl`` + ``ENV_ID/config.yml``).

::

    from sbtf.zoo import load_zoo_agent

    agent = load_zoo_agent("rl-baselines-zoo/trained_agents", "sac", "Pendulum-v0")
    returns, lengths = agent.evaluate(n_episodes=10)   # the zoo's deterministic/stochastic choice
    obs = agent.env.reset()
    action, _ = agent.model.predict(obs, deterministic=agent.deterministic)

:func:`load_zoo_agent` builds the env as the zoo's ``enjoy.py`` did (config.yml read safely, retired gym ids
mapped to gymnasium's, TimeFeatureWrapper, VecNormalize statistics per the zoo's rule, Atari wrapping,
frame stacking); :func:`convert_zoo_folder` writes the agent as an sbtf run folder that ``sbtf enjoy`` plays.
This package does not import TensorFlow until a model is loaded.
"""
from sbtf.zoo.agent import (ZOO_ALGOS, ZOO_DETERMINISTIC_ALGOS, ZOO_TIME_FEATURE_ENVS, ZooAgent, ZooPaths,
                            load_zoo_agent, locate_zoo_agent, zoo_deterministic)
from sbtf.zoo.config import ZooSettings, read_zoo_yaml, zoo_settings
from sbtf.zoo.convert import convert_zoo_folder, write_run_folder
from sbtf.zoo.errors import (ConfigLimitError, MissingTimeFeatureError, ObservationMismatchError, UnsafeConfigError,
                             ZooConfigError, ZooError, ZooFolderError)

__all__ = [
    "load_zoo_agent", "locate_zoo_agent", "ZooAgent", "ZooPaths", "zoo_deterministic", "convert_zoo_folder",
    "write_run_folder", "read_zoo_yaml", "zoo_settings", "ZooSettings", "ZOO_ALGOS", "ZOO_DETERMINISTIC_ALGOS",
    "ZOO_TIME_FEATURE_ENVS", "ZooError", "ZooFolderError", "ZooConfigError", "UnsafeConfigError", "ConfigLimitError",
    "ObservationMismatchError", "MissingTimeFeatureError",
]
