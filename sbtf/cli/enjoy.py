"""``sbtf enjoy``: load a trained agent (and its VecNormalize statistics) and play it: the return of each episode,
their mean +/- std, optionally a GIF.

It plays an sbtf run folder (``LOG_FOLDER/<algo>/<ENV_ID>_<N>``, or ``--model PATH``) rebuilt from its
``config.yml`` -- honouring ``zoo.yml`` when the run was converted from an rl-baselines-zoo agent -- or, with
``--folder``, an rl-baselines-zoo folder as the zoo played it (:func:`sbtf.zoo.load_zoo_agent`).
"""
from __future__ import annotations

import argparse
import inspect
import os
import sys
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

import gymnasium
import numpy as np

from sbtf.cli.envs import (EnvSettings, env_settings, import_gym_packages, make_atari_vec_env, make_env,
                           resolve_env)
from sbtf.cli.errors import FILE_READ_ERRORS, CLIError, file_error
from sbtf.cli.hyperparams import algo_name, load_algorithm, load_default_hyperparams, positive_int
from sbtf.cli.plugins import register_subcommand
from sbtf.cli.runs import add_common_arguments, find_run_dir, safe_name
from sbtf.cli.zoo_folders import ZooRecord, add_zoo_arguments, open_zoo_agent, read_zoo_record
from sbtf.common.file_errors import ModelFileError, describe_value
from sbtf.common.envs.gym_compat import RETIRED_ENV_IDS
from sbtf.common.fileio.safe_yaml import read_yaml
from sbtf.common.vec_env import VecFrameStack
from sbtf.common.vec_env.vec_video_recorder import VIDEO_INSTALL_HINT
from sbtf.contrib.common.maskable.utils import get_action_masks, is_masking_supported
from sbtf.zoo.agent import ATARI_FRAME_STACK

#: steps played without -n and --episodes (the zoo's enjoy.py default)
DEFAULT_PLAY_STEPS = 1000
#: with --episodes N and no -n, at most this many steps per episode asked for
STEPS_PER_EPISODE_CAP = 10000


def add_enjoy_arguments(parser: argparse.ArgumentParser) -> None:
    """
    Add ``sbtf enjoy``'s flags to ``parser`` (the common ones included).

    :param parser: the subcommand's parser
    """
    add_common_arguments(parser)
    parser.add_argument("--exp-id", type=int, default=None, metavar="N",
                        help="run number (LOG_FOLDER/<algo>/<ENV_ID>_<N>); 0: the latest (default). With --folder: "
                             "the run of a zoo log folder (ZOO_FOLDER/<algo>/<ENV_ID>_<N>/); default: the "
                             "trained_agents layout")
    parser.add_argument("-n", "--n-timesteps", type=positive_int, default=None, metavar="STEPS",
                        help="maximum number of steps to play (default: {}; with --episodes N: {} x N)".format(
                            DEFAULT_PLAY_STEPS, STEPS_PER_EPISODE_CAP))
    parser.add_argument("--episodes", type=int, default=None, metavar="N", help="stop after N episodes")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--deterministic", dest="deterministic", action="store_true", default=None,
                       help="deterministic actions (default; for --folder and runs converted from the zoo: the "
                            "zoo's choice, deterministic for dqn, ddpg, sac, her, td3 only)")
    group.add_argument("--stochastic", dest="deterministic", action="store_false",
                       help="sample actions from the policy")
    parser.add_argument("--gif", default=None, metavar="OUT.gif",
                        help="write the played frames as an animated GIF (the env is made with render_mode="
                             "'rgb_array')")
    parser.add_argument("--video", default=None, metavar="OUT.mp4",
                        help="write the played frames as an mp4 video (H.264; needs the video extra: pip install "
                             "'sbtf[video]'; the env is made with render_mode='rgb_array'); can go with --gif")
    parser.add_argument("--render", action="store_true", help="show the env in a window (render_mode='human')")
    parser.add_argument("--load-best", action="store_true", help="play best_model.zip instead of the final model")
    parser.add_argument("--model", default=None, metavar="PATH",
                        help="model file to play (instead of looking it up in LOG_FOLDER); vecnormalize.pkl and "
                             "config.yml next to it are used")
    add_zoo_arguments(parser, "play an rl-baselines-zoo folder (trained_agents/: <algo>/<ENV_ID>.pkl and "
                              "<ENV_ID>/config.yml) as the zoo played it: its env wrappers, normalisation, frame "
                              "stacking and deterministic choice")


def _write_gif(images: List[Any], path: str, fps: float) -> None:
    """Write RGB frames (uint8 arrays) as an animated GIF (Pillow, adaptive palette) at ``fps``."""
    from PIL import Image  # pylint: disable=import-outside-toplevel

    frames = [Image.fromarray(image).convert("P", palette=Image.ADAPTIVE) for image in images]
    # GIF frame durations are in 1/100 s (and viewers slow down anything shorter than 2/100 s)
    duration = 10 * max(int(round(100.0 / fps)), 2)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    frames[0].save(path, format="GIF", save_all=True, append_images=frames[1:], duration=duration, loop=0)


def make_play_env(env_id: str, stats_dir: str, settings: EnvSettings, seed: Optional[int],
                  render_mode: Optional[str] = None, atari: bool = False) -> Any:
    """
    The env ``enjoy`` plays in: one monitored env as at training time, with the run's VecNormalize statistics
    (``stats_dir/vecnormalize.pkl``, frozen: ``training=False``, ``norm_reward=False``) and frame stacking.

    :param env_id: (str) a registered env id
    :param stats_dir: (str) the run folder (or the folder of the model file)
    :param settings: (EnvSettings) from the run's config.yml
    :param seed: (int)
    :param render_mode: (str) gymnasium render mode ('rgb_array' for a GIF, 'human' for a window)
    :param atari: (bool) a DeepMind-wrapped Atari env with 4 stacked frames (a zoo Atari agent, see ``zoo.yml``)
    :return: (VecEnv)
    """
    if atari:  # as the zoo played Atari agents: one DeepMind-wrapped env, 4 stacked frames
        env = VecFrameStack(make_atari_vec_env(env_id, 1, seed, EnvSettings(), render_mode=render_mode),
                            ATARI_FRAME_STACK)
    else:
        env = make_env(env_id, 1, seed, settings, render_mode=render_mode)
    stats_path = os.path.join(stats_dir, "vecnormalize.pkl")
    if os.path.isfile(stats_path):
        from sbtf.common.vec_env import VecNormalize  # pylint: disable=import-outside-toplevel
        try:
            env = VecNormalize.load(stats_path, env)
        except (ModelFileError,) + FILE_READ_ERRORS as exc:
            env.close()
            raise file_error(exc, "cannot use {}".format(stats_path)) from exc
        env.training = False
        env.norm_reward = False
        print("Normalizing observations with the statistics of {}".format(stats_path))
    elif settings.normalize:
        print("sbtf: warning: the run was trained with normalize but {} is missing: observations are not "
              "normalized".format(stats_path), file=sys.stderr)
    if settings.frame_stack > 0:
        env = VecFrameStack(env, settings.frame_stack)
    return env


@dataclass
class PlaySession:
    """What ``enjoy`` plays: the model, its env and how to act."""

    model: Any
    env: Any
    model_path: str
    env_id: str
    deterministic: bool
    #: a DeepMind-wrapped Atari env: a done without the Monitor's episode record is a lost life, not an episode
    atari: bool = False


def _check_play_arguments(args: argparse.Namespace) -> None:
    if (args.gif or args.video) and args.render:
        raise CLIError("--{} and --render cannot be used together (an env renders in one mode)".format(
            "gif" if args.gif else "video"))
    if args.video:
        _check_video_writer()
    if args.episodes is not None and args.episodes < 1:
        raise CLIError("--episodes must be at least 1, got {}".format(args.episodes))
    if args.n_timesteps is None:
        args.n_timesteps = DEFAULT_PLAY_STEPS if args.episodes is None else STEPS_PER_EPISODE_CAP * args.episodes
    if args.folder is not None:
        for flag, given in (("--model", args.model), ("--load-best", args.load_best)):
            if given:
                raise CLIError("{} cannot be used with --folder (a zoo folder names its model itself)".format(flag))
    elif args.time_feature is not None:
        raise CLIError("--{}time-feature applies to a zoo folder: use it with --folder".format(
            "" if args.time_feature else "no-"))


def _check_video_writer() -> None:
    """Fail before playing when no library can write the mp4 file."""
    import importlib.util  # pylint: disable=import-outside-toplevel

    if importlib.util.find_spec("imageio_ffmpeg") is None and importlib.util.find_spec("moviepy") is None:
        raise CLIError("--video needs a video writer: {}".format(VIDEO_INSTALL_HINT), exit_code=1)


def _open_run(args: argparse.Namespace, algo: str, render_mode: Optional[str]) -> PlaySession:
    """The model and env of an sbtf run folder (``-f LOG_FOLDER`` / ``--exp-id`` / ``--load-best`` / ``--model``)."""
    env_id = resolve_env(args.env, algo, sorted(load_default_hyperparams(algo)))
    name = safe_name(env_id)
    if args.model:
        model_path = args.model
        if not os.path.isfile(model_path) and os.path.isfile(model_path + ".zip"):
            model_path += ".zip"
        if not os.path.isfile(model_path):
            raise CLIError("--model: file {} not found".format(args.model))
        stats_dir = os.path.dirname(os.path.abspath(model_path))
        if os.path.basename(stats_dir) == "checkpoints" and not os.path.isfile(os.path.join(stats_dir, "config.yml")):
            stats_dir = os.path.dirname(stats_dir)  # a checkpoint of a run: the run's config and statistics
    else:
        stats_dir, name = _find_run_of(args, algo, env_id)
        model_path = os.path.join(stats_dir, "best_model.zip" if args.load_best else "{}.zip".format(name))
        if not os.path.isfile(model_path):
            what = "best model (was the run evaluated? see --eval-freq)" if args.load_best else "model"
            raise CLIError("no {} in {}: {} not found".format(what, stats_dir, os.path.basename(model_path)))

    zoo3_dir = os.path.join(stats_dir, name)
    if not os.path.isfile(os.path.join(stats_dir, "config.yml")) and os.path.isfile(
            os.path.join(zoo3_dir, "config.yml")):
        stats_dir = zoo3_dir  # an RL-Zoo3 run: <ENV>_<N>/<ENV>/config.yml, vecnormalize.pkl beside the model's folder
    config: Dict[str, Any] = {}
    config_path = os.path.join(stats_dir, "config.yml")
    if os.path.isfile(config_path):
        config = read_yaml(config_path)  # data only, bounded; a ModelFileError is one line from the command
    env_kwargs_path = os.path.join(stats_dir, "env_kwargs.yml")  # an RL-Zoo3 run's env keyword arguments
    if isinstance(config, dict) and not config.get("env_kwargs") and os.path.isfile(env_kwargs_path):
        config = dict(config, env_kwargs=read_yaml(env_kwargs_path) or {})  # checked by env_settings
    settings = env_settings(config, getattr(args, "allow_wrapper", ()), config_path)
    record = read_zoo_record(stats_dir)
    deterministic = _deterministic_choice(args.deterministic, record)
    algo_class = _sb3_class_for_file(load_algorithm(algo), model_path)

    env = make_play_env(env_id, stats_dir, settings, args.seed, render_mode=render_mode, atari=record.atari)
    try:
        # predict-only: no env attached (ACER and recurrent policies cannot take an env with another number of
        # envs than at training time; playing needs only the observations)
        model = algo_class.load(model_path)
    except (ModelFileError,) + FILE_READ_ERRORS as exc:
        env.close()
        raise file_error(exc, "cannot load {} (--algo {})".format(model_path, algo)) from exc
    return PlaySession(model=model, env=env, model_path=model_path, env_id=env_id, deterministic=deterministic,
                       atari=record.atari)


def _find_run_of(args: argparse.Namespace, algo: str, env_id: str) -> Tuple[str, str]:
    """``(run folder, file name)`` of the run of ``env_id``, or of an id gymnasium renamed to it (an RL-Zoo run of
    ``LunarLander-v2`` played on ``LunarLander-v3``; see ``sbtf.common.envs.gym_compat.ENV_ID_TABLE``)."""
    names = [safe_name(env_id)] + [safe_name(old) for old in [args.env.strip().rpartition(":")[2]] + sorted(
        old for old, new in RETIRED_ENV_IDS.items() if new == env_id) if old != env_id]
    first_error = None
    for name in dict.fromkeys(names):
        try:
            return find_run_dir(args.log_folder, algo, name, args.exp_id or 0), name
        except CLIError as exc:
            first_error = first_error or exc
    raise first_error


def _sb3_class_for_file(algo_class: type, model_path: str) -> type:
    """
    The class that plays ``model_path``: an RL-Zoo3 run's model is a stable-baselines3 zip (``data`` and
    ``policy.pth``), played by the ``sbtf.sb3`` / ``sbtf.contrib`` class of the same name (``--algo a2c`` names
    stable-baselines 2's A2C, the zoo's ``a2c`` folder holds SB3's); any other file keeps ``algo_class``.
    """
    sb3_roots = ("sbtf.sb3.", "sbtf.contrib.")
    if algo_class.__module__.startswith(sb3_roots):
        return algo_class
    from sbtf import algorithms  # pylint: disable=import-outside-toplevel
    from sbtf.common.fileio.safe_zip import open_zip  # pylint: disable=import-outside-toplevel

    try:
        with open_zip(model_path, "model file") as archive:
            names = set(archive.namelist())
    except (ModelFileError,) + FILE_READ_ERRORS:
        return algo_class  # loading reports what is wrong with the file
    if "data" not in names or "policy.pth" not in names:
        return algo_class
    for entry in algorithms.all_algorithms():
        if entry.name == algo_class.__name__ and entry.target.startswith(sb3_roots):
            print("{} is a stable-baselines3 model: playing it with {}".format(model_path, entry.target))
            return entry.load()
    return algo_class


def _deterministic_choice(flag: Optional[bool], record: ZooRecord) -> bool:
    """``--deterministic`` / ``--stochastic`` when given, else the zoo's choice recorded in zoo.yml, else True."""
    if flag is not None:
        return flag
    if record.deterministic is not None:
        print("Using the rl-baselines-zoo's choice recorded in {}: {} actions (--deterministic / --stochastic "
              "override it)".format(record.path, "deterministic" if record.deterministic else "stochastic"))
        return record.deterministic
    return True


def _open_zoo_folder(args: argparse.Namespace, algo: str, render_mode: Optional[str]) -> PlaySession:
    """The model and env of an rl-baselines-zoo folder (``--folder``), as the zoo played them."""
    agent = open_zoo_agent(args, algo, render_mode=render_mode)
    if agent.atari and render_mode is not None:
        agent.close()
        raise CLIError("--gif, --video and --render are not available for Atari agents (the DeepMind-wrapped env is "
                       "made without a render mode)")
    return PlaySession(model=agent.model, env=agent.env, model_path=agent.paths.model_path, env_id=agent.env_id,
                       deterministic=agent.deterministic, atari=agent.atari)


def run_enjoy(args: argparse.Namespace) -> int:
    """The ``enjoy`` subcommand."""
    algo = algo_name(args.algo)
    import_gym_packages(args.gym_packages)
    _check_play_arguments(args)
    recording = bool(args.gif or args.video)
    render_mode = "rgb_array" if recording else ("human" if args.render else None)
    if recording and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # pygame draws the frames off-screen: no window needed
    if args.folder is not None:
        session = _open_zoo_folder(args, algo, render_mode)
    else:
        session = _open_run(args, algo, render_mode)
    return _play(session, args)


def _play(session: PlaySession, args: argparse.Namespace) -> int:
    """Play the session's model, print each episode's return and length and their mean; write the GIF."""

    env, model, env_id = session.env, session.model, session.env_id
    print("Playing {} ({} actions) on {} for at most {} steps{}".format(
        session.model_path, "deterministic" if session.deterministic else "stochastic", env_id, args.n_timesteps,
        "" if args.episodes is None else " / {} episode(s)".format(args.episodes)))

    frames: List[Any] = []
    recording = bool(args.gif or args.video)

    def grab() -> None:
        frames.append(np.asarray(env.get_images()[0], dtype=np.uint8))

    returns: List[float] = []
    lengths: List[int] = []
    current_return, current_length = 0.0, 0
    try:
        obs = env.reset()
        if recording:
            grab()
        state = None
        dones = np.zeros((1,), dtype=bool)
        read_masks = _action_mask_reader(model, env)
        for _ in range(args.n_timesteps):
            extra = {} if read_masks is None else {"action_masks": read_masks()}
            action, state = model.predict(obs, state=state, mask=dones, deterministic=session.deterministic, **extra)
            obs, rewards, dones, infos = env.step(action)
            current_return += float(np.asarray(rewards).reshape(-1)[0])
            current_length += 1
            if recording:
                grab()
            if bool(np.asarray(dones).reshape(-1)[0]):
                episode = (infos[0] or {}).get("episode") if infos else None
                if episode is None and session.atari:
                    continue  # a lost life: the game (the Monitor's episode) goes on
                ep_return = float(episode["r"]) if episode else current_return
                ep_length = int(episode["l"]) if episode else current_length
                returns.append(ep_return)
                lengths.append(ep_length)
                print("Episode {}: return {:.2f}, length {}".format(len(returns), ep_return, ep_length))
                current_return, current_length = 0.0, 0
                if args.episodes is not None and len(returns) >= args.episodes:
                    break
    except gymnasium.error.DependencyNotInstalled as exc:
        raise CLIError("cannot render {}: {}".format(env_id, exc), exit_code=1) from exc
    except (TypeError, ValueError, KeyError, IndexError, AssertionError) as exc:
        if recording and isinstance(exc, ValueError) and "render" in str(exc):
            raise CLIError("cannot render {} as images: {}".format(env_id, exc), exit_code=1) from exc
        # e.g. a wrapper of the run's config.yml whose (plain) arguments fail only when the env steps
        raise CLIError("playing {} failed ({}: {}); check env_wrapper / env_kwargs in the run's config.yml".format(
            env_id, type(exc).__name__, describe_value(" ".join(str(exc).split()), 300).strip("'")),
            exit_code=1) from exc
    finally:
        env.close()

    if returns:
        print("Mean return over {} episode(s): {:.2f} +/- {:.2f} (mean length {:.1f})".format(
            len(returns), float(np.mean(returns)), float(np.std(returns)), float(np.mean(lengths))))
    else:
        print("No episode finished within {} steps (return so far: {:.2f})".format(args.n_timesteps,
                                                                                  current_return))
    if recording:
        metadata = env.get_attr("metadata")[0] or {}
        fps = float(metadata.get("render_fps") or metadata.get("video.frames_per_second") or 30)
        if args.gif:
            _write_gif(frames, args.gif, fps)
            print("Saved a GIF of {} frames to {}".format(len(frames), args.gif))
        if args.video:
            from sbtf.common.vec_env.vec_video_recorder import write_video  # pylint: disable=import-outside-toplevel
            write_video(frames, args.video, fps=fps)
            print("Saved a video of {} frames ({:.0f} fps) to {}".format(len(frames), fps, args.video))
    return 0


register_subcommand("enjoy", run_enjoy, add_enjoy_arguments,
                    help="play a trained agent (returns, GIF, video)",
                    description="Load a trained agent (and its VecNormalize statistics) and play it: prints each "
                                "episode's return and their mean +/- std, optionally writes a GIF or an mp4 video. "
                                "With --folder, play an rl-baselines-zoo agent folder as the zoo did.")



def _action_mask_reader(model: Any, env: Any) -> Optional[Callable[[], np.ndarray]]:
    """For a model whose ``predict`` takes ``action_masks`` (MaskablePPO) on an env that has them: a function that
    reads the env's current masks; else None."""
    if "action_masks" not in inspect.signature(model.predict).parameters:
        return None

    return (lambda: get_action_masks(env)) if is_masking_supported(env) else None
