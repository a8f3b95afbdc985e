"""Record expert trajectories in the stable-baselines 2.x expert-dataset format (see :class:`ExpertDataset`)."""
from __future__ import annotations

import os
import tempfile
import warnings
from typing import Dict

import gymnasium
import numpy as np
from gymnasium import spaces

from sbtf.gail.dataset.dataset import save_image


def _is_rl_model(model) -> bool:
    """True for sbtf models (``BaseRLModel`` or anything with the model API ``predict``/``learn``/``get_env``)."""
    try:
        from sbtf.common.base_class import BaseRLModel  # pylint: disable=import-outside-toplevel
    except ImportError:
        BaseRLModel = None
    if BaseRLModel is not None and isinstance(model, BaseRLModel):
        return True
    return all(callable(getattr(model, name, None)) for name in ("predict", "learn", "get_env"))


def _is_vec_env(env) -> bool:
    """True for envs with the SB2 VecEnv API (``reset() -> obs``, ``step() -> (obs, rews, dones, infos)``)."""
    try:
        from sbtf.common.vec_env import VecEnv  # pylint: disable=import-outside-toplevel
    except ImportError:
        VecEnv = None
    if VecEnv is not None and isinstance(env, VecEnv):
        return True
    return hasattr(env, "num_envs") and all(callable(getattr(env, name, None))
                                            for name in ("reset", "step", "step_async", "step_wait"))


def _wrap_env(env):
    try:
        from sbtf.common.envs.gym_compat import wrap_env  # pylint: disable=import-outside-toplevel
    except ImportError as exc:
        raise ImportError("Recording from an env id or an old-gym-API env needs sbtf.common.envs.gym_compat.wrap_env, "
                          "which could not be imported; pass a gymnasium env instead") from exc
    return wrap_env(env)


def _prepare_env(env):
    """
    :return: (env, owns_env, is_vec_env); ``owns_env`` is True when the env was created here.
    """

    if isinstance(env, str):
        return _wrap_env(env), True, False
    if isinstance(env, gymnasium.Env):
        return env, False, False
    if isinstance(env, gymnasium.vector.VectorEnv):
        raise TypeError("gymnasium vector envs are not supported: pass a single env or an sbtf VecEnv")
    if _is_vec_env(env):
        return env, False, True
    if callable(getattr(env, "reset", None)) and callable(getattr(env, "step", None)):
        # An env following the old gym API (reset() -> obs, 4-tuple step): adapt it.
        return _wrap_env(env), False, False
    raise TypeError(f"env must be an env id, a gymnasium env or a VecEnv, got {type(env).__name__}")


def _single_action(action, action_space):
    """Turn what the expert returned into an action for a single (non-vectorised) env."""
    if isinstance(action_space, spaces.Discrete):
        arr = np.asarray(action)
        if arr.size != 1:
            raise ValueError(f"The expert returned an action of shape {arr.shape} for a Discrete action space")
        return int(arr.reshape(-1)[0])
    arr = np.asarray(action, dtype=action_space.dtype)
    if arr.size != int(np.prod(action_space.shape)):
        raise ValueError(f"The expert returned an action of shape {arr.shape}, "
                         f"the action space has shape {action_space.shape}")
    return arr.reshape(action_space.shape)


def _vec_action(action, action_space, num_envs):
    """Turn what the expert returned into a batch of actions for a VecEnv."""
    if isinstance(action_space, spaces.Discrete):
        arr = np.asarray(action).reshape(-1)
        if arr.size != num_envs:
            raise ValueError(f"The expert returned {arr.size} Discrete actions for {num_envs} envs")
        return arr.astype(np.int64)
    arr = np.asarray(action, dtype=action_space.dtype)
    if arr.size != num_envs * int(np.prod(action_space.shape)):
        raise ValueError(f"The expert returned an action of shape {arr.shape} for {num_envs} env(s) "
                         f"with action shape {action_space.shape}")
    return arr.reshape((num_envs,) + tuple(action_space.shape))


def _atomic_savez(path: str, arrays: Dict[str, np.ndarray]) -> None:
    """``np.savez`` to ``path`` through a temporary file in the same folder and ``os.replace``."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp_path = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(path) + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as file_handler:
            np.savez(file_handler, **arrays)
            file_handler.flush()
            os.fsync(file_handler.fileno())
        os.replace(tmp_path, path)
    except BaseException:
        if os.path.exists(tmp_path):
            os.unlink(tmp_path)
        raise


def generate_expert_traj(model, save_path=None, env=None, n_timesteps=0,
                         n_episodes=100, image_folder='recorded_images'):
    """
    Train expert controller (if needed) and record expert trajectories.

    .. note::

        only Box and Discrete spaces are supported for now.

    Image observations (``uint8`` Box of shape ``(H, W, 1|3|4)``) are written as lossless png
    files to ``<dirname(save_path)>/<image_folder>/<step>.png`` and ``obs`` holds their paths
    (SB2 used jpg, which changes the pixels). Without a ``save_path`` they are kept as arrays.
    The actions come from ``model.predict(obs)`` (stochastic, as in SB2) or ``model(obs)``;
    a VecEnv gives the expert the whole batch of observations and only its first env is recorded.
    Envs created here (from an env id) are closed at the end; envs passed in are left open.

    :param model: (RL model or callable) The expert model, if it needs to be trained,
        then you need to pass ``n_timesteps > 0``.
    :param save_path: (str) Path without the extension where the expert dataset will be saved
        (ex: 'expert_cartpole' -> creates 'expert_cartpole.npz').
        If not specified, it will not save, and just return the generated expert trajectories.
        This parameter must be specified for image-based environments.
    :param env: (gymnasium.Env or VecEnv or str) The environment, if not defined then it tries to use the model
        environment.
    :param n_timesteps: (int) Number of training timesteps
    :param n_episodes: (int) Number of trajectories (episodes) to record
    :param image_folder: (str) When using images, folder that will be used to record images.
    :return: (dict) the generated expert trajectories.
    """
    is_rl_model = _is_rl_model(model)
    if not is_rl_model and not callable(model):
        raise TypeError(f"model must be an sbtf model or a callable obs -> action, got {type(model).__name__}")
    if int(n_episodes) <= 0:
        raise ValueError(f"n_episodes must be positive, got {n_episodes}")
    n_episodes = int(n_episodes)

    # Retrieve the environment using the RL model
    if env is None and is_rl_model:
        env = model.get_env()
    if env is None:
        raise ValueError("You must set the env in the model or pass it to the function.")

    env, owns_env, is_vec_env = _prepare_env(env)
    try:
        return _record(model, is_rl_model, env, is_vec_env, save_path, n_timesteps, n_episodes, image_folder)
    finally:
        if owns_env:
            env.close()


def _record(model, is_rl_model, env, is_vec_env, save_path, n_timesteps, n_episodes, image_folder):
    num_envs = int(env.num_envs) if is_vec_env else 1
    if num_envs > 1:
        warnings.warn("You are using multiple envs, only the data from the first one will be recorded.")

    obs_space, action_space = env.observation_space, env.action_space
    if not isinstance(obs_space, (spaces.Box, spaces.Discrete)):
        raise TypeError(f"Observation space type not supported: {obs_space} (only Box and Discrete)")
    if not isinstance(action_space, (spaces.Box, spaces.Discrete)):
        raise TypeError(f"Action space type not supported: {action_space} (only Box and Discrete)")

    if save_path is not None:
        save_path = os.fspath(save_path)

    # Check if we need to record images
    looks_like_image = (isinstance(obs_space, spaces.Box) and len(obs_space.shape) == 3
                        and obs_space.dtype == np.uint8)
    record_images = looks_like_image and obs_space.shape[-1] in (1, 3, 4)
    if record_images and save_path is None:
        warnings.warn("Observations are images but no save path was specified, so will save in numpy archive; "
                      "this can lead to higher memory usage.")
        record_images = False
    if looks_like_image and not record_images and obs_space.shape[-1] not in (1, 3, 4):
        warnings.warn("The observations looks like images (shape = {}) "
                      "but the number of channel > 4, so it will be saved in the numpy archive "
                      "which can lead to high memory usage".format(obs_space.shape))

    if record_images:
        image_folder = os.path.join(os.path.dirname(save_path), image_folder)
        os.makedirs(image_folder, exist_ok=True)
        print("=" * 10)
        print("Images will be recorded to {}/".format(image_folder))
        print("Image shape: {}".format(obs_space.shape))
        print("=" * 10)

    if n_timesteps > 0:
        if is_rl_model:
            model.learn(n_timesteps)
        else:
            warnings.warn("n_timesteps > 0 is ignored: the expert is a plain callable, not an sbtf model")

    actions = []
    observations = []
    rewards = []
    episode_returns = np.zeros((n_episodes,))
    episode_starts = [True]

    ep_idx = 0
    reward_sum = 0.0
    idx = 0
    # state and mask for recurrent policies
    state, mask = None, None
    if is_vec_env:
        obs = env.reset()
        mask = [True for _ in range(num_envs)]
    else:
        obs, _ = env.reset()

    while ep_idx < n_episodes:
        obs_ = np.asarray(obs)[0] if is_vec_env else np.asarray(obs)
        if record_images:
            image_path = os.path.join(image_folder, "{}.png".format(idx))
            save_image(image_path, obs_)
            observations.append(image_path)
        else:
            observations.append(np.array(obs_, copy=True))

        if is_rl_model:
            action, state = model.predict(obs, state=state, mask=mask)
        else:
            action = model(obs)

        if is_vec_env:
            env_action = _vec_action(action, action_space, num_envs)
            obs, reward, done, _ = env.step(env_action)
            done = bool(np.asarray(done).reshape(-1)[0])
            reward = float(np.asarray(reward).reshape(-1)[0])
            mask = [done for _ in range(num_envs)]
            recorded_action = env_action[0]
        else:
            env_action = _single_action(action, action_space)
            obs, reward, terminated, truncated, _ = env.step(env_action)
            done = bool(terminated or truncated)
            reward = float(reward)
            recorded_action = env_action

        actions.append(recorded_action)
        rewards.append(reward)
        episode_starts.append(done)
        reward_sum += reward
        idx += 1
        if done:
            if not is_vec_env:  # VecEnvs reset themselves
                obs, _ = env.reset()
                # Reset the state in case of a recurrent policy
                state = None
            episode_returns[ep_idx] = reward_sum
            reward_sum = 0.0
            ep_idx += 1

    if record_images:
        observations = np.array(observations, dtype=str)
    elif isinstance(obs_space, spaces.Discrete):
        observations = np.asarray(observations, dtype=np.int64).reshape((-1, 1))
    else:
        observations = np.asarray(observations, dtype=obs_space.dtype).reshape((-1,) + tuple(obs_space.shape))

    if isinstance(action_space, spaces.Discrete):
        actions = np.asarray(actions, dtype=np.int64).reshape((-1, 1))
    else:
        actions = np.asarray(actions, dtype=action_space.dtype).reshape((-1,) + tuple(action_space.shape))

    rewards = np.asarray(rewards, dtype=np.float64)
    episode_starts = np.asarray(episode_starts[:-1], dtype=bool)

    assert len(observations) == len(actions) == len(rewards) == len(episode_starts)

    numpy_dict = {
        'actions': actions,
        'obs': observations,
        'rewards': rewards,
        'episode_returns': episode_returns,
        'episode_starts': episode_starts
    }  # type: Dict[str, np.ndarray]

    for key, val in numpy_dict.items():
        print(key, val.shape)

    if save_path is not None:
        target = save_path if save_path.endswith(".npz") else save_path + ".npz"
        _atomic_savez(target, numpy_dict)

    return numpy_dict
