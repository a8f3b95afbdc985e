"""``sbtf enjoy``: load a trained agent (and its VecNormalize statistics) and play it: the return of each episode,
their mean +/- std, optionally a GIF.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Dict, List, Optional

import yaml

from sbtf.cli.envs import EnvSettings, env_settings, import_gym_packages, make_env, resolve_env
from sbtf.cli.errors import CLIError, exc_text
from sbtf.cli.hyperparams import algo_name, load_algorithm, load_default_hyperparams, positive_int
from sbtf.cli.plugins import register_subcommand
from sbtf.cli.runs import add_common_arguments, find_run_dir, safe_name


def add_enjoy_arguments(parser: argparse.ArgumentParser) -> None:
    add_common_arguments(parser)
    parser.add_argument("--exp-id", type=int, default=0, metavar="N",
                        help="run number (LOG_FOLDER/<algo>/<ENV_ID>_<N>); 0: the latest (default)")
    parser.add_argument("-n", "--n-timesteps", type=positive_int, default=1000, metavar="STEPS",
                        help="maximum number of steps to play (default: 1000)")
    parser.add_argument("--episodes", type=int, default=None, metavar="N", help="stop after N episodes")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--deterministic", dest="deterministic", action="store_true", default=True,
                       help="deterministic actions (default)")
    group.add_argument("--stochastic", dest="deterministic", action="store_false",
                       help="sample actions from the policy")
    parser.add_argument("--gif", default=None, metavar="OUT.gif",
                        help="write the played frames as an animated GIF (the env is made with render_mode="
                             "'rgb_array')")
    parser.add_argument("--render", action="store_true", help="show the env in a window (render_mode='human')")
    parser.add_argument("--load-best", action="store_true", help="play best_model.zip instead of the final model")
    parser.add_argument("--model", default=None, metavar="PATH",
                        help="model file to play (instead of looking it up in LOG_FOLDER); vecnormalize.pkl and "
                             "config.yml next to it are used")


def _write_gif(frames: List[Any], path: str, fps: float) -> None:
    # GIF frame durations are in 1/100 s (and viewers slow down anything shorter than 2/100 s)
    duration = 10 * max(int(round(100.0 / fps)), 2)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    frames[0].save(path, format="GIF", save_all=True, append_images=frames[1:], duration=duration, loop=0)


def make_play_env(env_id: str, stats_dir: str, settings: EnvSettings, seed: Optional[int],
                  render_mode: Optional[str] = None) -> Any:
    """
    The env ``enjoy`` plays in: one monitored env as at training time, with the run's VecNormalize statistics
    (``stats_dir/vecnormalize.pkl``, frozen: ``training=False``, ``norm_reward=False``) and frame stacking.

    :param env_id: (str) a registered env id
    :param stats_dir: (str) the run folder (or the folder of the model file)
    :param settings: (EnvSettings) from the run's config.yml
    :param seed: (int)
    :param render_mode: (str) gymnasium render mode ('rgb_array' for a GIF, 'human' for a window)
    :return: (VecEnv)
    """
    env = make_env(env_id, 1, seed, settings, render_mode=render_mode)
    stats_path = os.path.join(stats_dir, "vecnormalize.pkl")
    if os.path.isfile(stats_path):
        from sbtf.common.vec_env import VecNormalize  # pylint: disable=import-outside-toplevel
        try:
            env = VecNormalize.load(stats_path, env)
        except ValueError as exc:
            env.close()
            raise CLIError("cannot use {}: {}".format(stats_path, exc)) from exc
        env.training = False
        env.norm_reward = False
        print("Normalizing observations with the statistics of {}".format(stats_path))
    elif settings.normalize:
        print("sbtf: warning: the run was trained with normalize but {} is missing: observations are not "
              "normalized".format(stats_path), file=sys.stderr)
    if settings.frame_stack > 0:
        from sbtf.common.vec_env import VecFrameStack  # pylint: disable=import-outside-toplevel
        env = VecFrameStack(env, settings.frame_stack)
    return env


def run_enjoy(args: argparse.Namespace) -> int:
    """The ``enjoy`` subcommand."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    import gymnasium  # pylint: disable=import-outside-toplevel

    algo = algo_name(args.algo)
    import_gym_packages(args.gym_packages)
    env_id = resolve_env(args.env, algo, sorted(load_default_hyperparams(algo)))
    name = safe_name(env_id)
    if args.gif and args.render:
        raise CLIError("--gif and --render cannot be used together (an env renders in one mode)")
    if args.episodes is not None and args.episodes < 1:
        raise CLIError("--episodes must be at least 1, got {}".format(args.episodes))
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
        stats_dir = find_run_dir(args.log_folder, algo, name, args.exp_id)
        model_path = os.path.join(stats_dir, "best_model.zip" if args.load_best else "{}.zip".format(name))
        if not os.path.isfile(model_path):
            what = "best model (was the run evaluated? see --eval-freq)" if args.load_best else "model"
            raise CLIError("no {} in {}: {} not found".format(what, stats_dir, os.path.basename(model_path)))

    config: Dict[str, Any] = {}
    config_path = os.path.join(stats_dir, "config.yml")
    if os.path.isfile(config_path):
        with open(config_path, "r", encoding="utf-8") as handle:
            config = yaml.safe_load(handle) or {}
    settings = env_settings(config, getattr(args, "allow_wrapper", ()), config_path)
    algo_class = load_algorithm(algo)

    render_mode = "rgb_array" if args.gif else ("human" if args.render else None)
    env = make_play_env(env_id, stats_dir, settings, args.seed, render_mode=render_mode)
    try:
        # predict-only: no env attached (ACER and recurrent policies cannot take an env with another number of
        # envs than at training time; playing needs only the observations)
        model = algo_class.load(model_path)
    except (ValueError, TypeError, KeyError, OSError) as exc:
        env.close()
        raise CLIError("cannot load {} (--algo {}): {}".format(model_path, algo, exc_text(exc))) from exc
    print("Playing {} ({} actions) on {} for at most {} steps{}".format(
        model_path, "deterministic" if args.deterministic else "stochastic", env_id, args.n_timesteps,
        "" if args.episodes is None else " / {} episode(s)".format(args.episodes)))

    frames: List[Any] = []

    def grab() -> None:
        from PIL import Image  # pylint: disable=import-outside-toplevel
        image = env.get_images()[0]
        frames.append(Image.fromarray(np.asarray(image, dtype=np.uint8)).convert("P", palette=Image.ADAPTIVE))

    returns: List[float] = []
    lengths: List[int] = []
    current_return, current_length = 0.0, 0
    try:
        obs = env.reset()
        if args.gif:
            grab()
        state = None
        dones = np.zeros((1,), dtype=bool)
        for _ in range(args.n_timesteps):
            action, state = model.predict(obs, state=state, mask=dones, deterministic=args.deterministic)
            obs, rewards, dones, infos = env.step(action)
            current_return += float(np.asarray(rewards).reshape(-1)[0])
            current_length += 1
            if args.gif:
                grab()
            if bool(np.asarray(dones).reshape(-1)[0]):
                episode = (infos[0] or {}).get("episode") if infos else None
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
    except ValueError as exc:
        if args.gif and "render" in str(exc):
            raise CLIError("cannot render {} as images: {}".format(env_id, exc), exit_code=1) from exc
        raise
    finally:
        env.close()

    if returns:
        print("Mean return over {} episode(s): {:.2f} +/- {:.2f} (mean length {:.1f})".format(
            len(returns), float(np.mean(returns)), float(np.std(returns)), float(np.mean(lengths))))
    else:
        print("No episode finished within {} steps (return so far: {:.2f})".format(args.n_timesteps,
                                                                                  current_return))
    if args.gif:
        metadata = env.get_attr("metadata")[0] or {}
        fps = float(metadata.get("render_fps") or metadata.get("video.frames_per_second") or 30)
        _write_gif(frames, args.gif, fps)
        print("Saved a GIF of {} frames to {}".format(len(frames), args.gif))
    return 0


register_subcommand("enjoy", run_enjoy, add_enjoy_arguments,
                    help="play a trained agent (returns, GIF)",
                    description="Load a trained agent (and its VecNormalize statistics) and play it: prints each "
                                "episode's return and their mean +/- std, optionally writes a GIF.")
