#!/usr/bin/env python3
"""Run one benchmark case once, with one library, in this process, and print one JSON line.

    python benchmarks/worker.py --lib sbtf|sb3 --case NAME --seed S [--threads T]

The harness (``run_benchmarks.py``) starts one fresh worker process per run. What the
worker does, in order:

1. limit the thread pools (environment variables first, before numpy/torch/TF load;
   then ``torch.set_num_threads`` or ``tf.config.threading``);
2. import the library, build the vectorised training env with the library's own
   ``make_vec_env`` (a ``DummyVecEnv`` of ``n_envs`` Monitor-wrapped envs, seeded) and
   the model (``verbose=0``, ``seed=S``);
3. time ``model.learn(total_timesteps)`` alone (``time.perf_counter``; process CPU time
   alongside, to show how many cores it kept busy, and the machine's busy time from
   ``/proc/stat``, to show how many cores *other* processes kept busy meanwhile);
4. evaluate the trained model deterministically for ``eval_episodes`` episodes on a
   separate, plain ``gymnasium.make(env_id)`` env (first reset seeded with ``S + 10_000``),
   with the same loop for both libraries (``model.predict(obs, deterministic=True)``).

Anything the libraries print goes to stderr; stdout carries only the result line:
``{"ok": true, "steps_per_s": ..., "learn_seconds": ..., "eval_mean": ..., "eval_std": ...,
"timesteps": ..., ...}`` or ``{"ok": false, "error": ...}`` (exit status 1).
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import inspect
import json
import os
import platform
import sys
import time
import traceback

THREAD_ENV_VARS = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "TF_NUM_INTRAOP_THREADS",
    "TF_NUM_INTEROP_THREADS",
)

EVAL_SEED_OFFSET = 10_000


def thread_env(threads: int) -> dict:
    """The thread-limit environment variables for ``threads`` (0: the libraries' defaults, nothing is set)."""
    return {name: str(threads) for name in THREAD_ENV_VARS} if threads > 0 else {}


def system_busy_seconds():
    """CPU-seconds all cores of the machine have spent busy since boot (``/proc/stat``), or None."""
    try:
        with open("/proc/stat", encoding="ascii") as handle:
            fields = handle.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    values = [int(v) for v in fields[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    busy = sum(values[:8]) - idle  # user nice system idle iowait irq softirq steal (guest is inside user)
    return busy / os.sysconf("SC_CLK_TCK")


def _here() -> str:
    return os.path.dirname(os.path.abspath(__file__))


def _load_cases():
    sys.path.insert(0, _here())
    try:
        import cases  # noqa: WPS433 (local import on purpose: stdlib-only registry)
    finally:
        sys.path.pop(0)
    return cases


# ---------------------------------------------------------------------------------------------
# library set-up
# ---------------------------------------------------------------------------------------------
def _setup_sb3(threads: int) -> dict:
    import torch as th

    if threads > 0:
        th.set_num_threads(threads)
        try:
            th.set_num_interop_threads(threads)
        except RuntimeError:  # already set (only possible once per process)
            pass
    import gymnasium
    import numpy
    import stable_baselines3

    versions = {
        "python": platform.python_version(),
        "stable_baselines3": stable_baselines3.__version__,
        "torch": th.__version__,
        "gymnasium": gymnasium.__version__,
        "numpy": numpy.__version__,
    }
    try:
        import sb3_contrib

        versions["sb3_contrib"] = sb3_contrib.__version__
    except ImportError:
        pass
    return versions


def _setup_sbtf(threads: int) -> dict:
    import tensorflow as tf

    # Must happen before TensorFlow runs its first op.
    if threads > 0:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
    import gymnasium
    import numpy
    import sbtf

    versions = {
        "python": platform.python_version(),
        "sbtf": sbtf.__version__,
        "tensorflow": tf.__version__,
        "gymnasium": gymnasium.__version__,
        "numpy": numpy.__version__,
    }
    try:
        import keras

        versions["keras"] = keras.__version__
    except ImportError:
        pass
    try:
        import tensorflow_probability as tfp

        versions["tensorflow_probability"] = tfp.__version__
    except ImportError:
        pass
    return versions


def _threads_in_effect(lib: str) -> dict:
    if lib == "sb3":
        import torch as th

        return {"torch_num_threads": th.get_num_threads(), "torch_interop_threads": th.get_num_interop_threads()}
    import tensorflow as tf

    return {
        "tf_intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads(),
        "tf_inter_op_threads": tf.config.threading.get_inter_op_parallelism_threads(),
    }


_ACTIVATIONS = {
    "sb3": {"relu": ("torch.nn", "ReLU"), "tanh": ("torch.nn", "Tanh"), "elu": ("torch.nn", "ELU")},
    "sbtf": {"relu": ("tensorflow.nn", "relu"), "tanh": ("tensorflow.math", "tanh"), "elu": ("tensorflow.nn", "elu")},
}
_ACTIVATION_KEYS = {"sb3": ("activation_fn",), "sbtf": ("act_fun", "activation_fn")}  # sbtf.contrib: sb3's name


def _resolve_policy_kwargs(lib: str, policy_kwargs: dict) -> dict:
    """Turn activation names given as data in the case registry into the library's callables."""
    resolved = dict(policy_kwargs)
    if lib == "sb3" and resolved.get("optimizer_class") == "RMSpropTFLike":
        from stable_baselines3.common.sb2_compat.rmsprop_tf_like import RMSpropTFLike

        resolved["optimizer_class"] = RMSpropTFLike
    for key in _ACTIVATION_KEYS[lib]:
        if isinstance(resolved.get(key), str):
            module_name, attr = _ACTIVATIONS[lib][resolved[key]]
            resolved[key] = getattr(importlib.import_module(module_name), attr)
    return resolved


def _make_action_noise(lib: str, spec, action_space):
    if spec is None:
        return None
    import numpy as np

    kind, sigma = spec
    module = importlib.import_module("stable_baselines3.common.noise" if lib == "sb3" else "sbtf.common.noise")
    cls_name = {"normal": "NormalActionNoise", "ornstein_uhlenbeck": "OrnsteinUhlenbeckActionNoise"}[kind]
    n_actions = int(np.prod(action_space.shape))
    return getattr(module, cls_name)(mean=np.zeros(n_actions), sigma=float(sigma) * np.ones(n_actions))


def _env_maker(case, side):
    """What ``make_vec_env`` gets: the env id, or the library's own env class (``Side.env_entry``)."""
    if not side.env_entry:
        return case.env_id
    module_name, _, attr = side.env_entry.partition(":")
    sys.path.insert(0, _here())  # benchmarks/bench_envs.py: the cases' own envs (gymnasium + NumPy only)
    try:
        module = importlib.import_module(module_name)
    finally:
        sys.path.pop(0)
    return getattr(module, attr)


def _make_env(lib: str, case, side, seed: int):
    """The training VecEnv: ``make_vec_env`` (Monitor-wrapped envs, the case's env kwargs, VecNormalize when the case
    normalises) or, for Atari, ``make_atari_env`` + ``VecFrameStack(4)``, with the case's VecEnv class; each
    library's own helpers."""
    if lib == "sb3":
        from stable_baselines3.common.env_util import make_atari_env, make_vec_env
        from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecFrameStack, VecNormalize
    else:
        from sbtf.common import make_vec_env
        from sbtf.common.cmd_util import make_atari_env
        from sbtf.common.vec_env import DummyVecEnv, SubprocVecEnv, VecFrameStack, VecNormalize
    vec_env_cls = {"dummy": DummyVecEnv, "subproc": SubprocVecEnv}[case.vec_env]
    if case.atari:  # ale-py registers the Atari ids with gymnasium only when asked
        import ale_py
        import gymnasium

        gymnasium.register_envs(ale_py)
        if lib == "sb3":
            env = make_atari_env(case.env_id, n_envs=case.n_envs, seed=seed, vec_env_cls=vec_env_cls)
        else:
            env = make_atari_env(case.env_id, num_env=case.n_envs, seed=seed,
                                 use_subprocess=case.vec_env == "subproc")
        return VecFrameStack(env, n_stack=4)
    env = make_vec_env(_env_maker(case, side), n_envs=case.n_envs, seed=seed, vec_env_cls=vec_env_cls,
                       env_kwargs=dict(case.env_kwargs) or None)
    if case.normalize:
        env = VecNormalize(env, **case.normalize)
    return env


def _build(lib: str, case, seed: int, threads: int):
    side = case.side(lib)
    env = _make_env(lib, case, side, seed)
    extra = {"device": "cpu"} if lib == "sb3" else {"n_cpu_tf_sess": threads or None}
    cls = getattr(importlib.import_module(side.module_name(lib)), side.algo)
    if lib == "sbtf" and "n_cpu_tf_sess" not in inspect.signature(cls.__init__).parameters:
        extra = {}  # sb3-contrib's signature (sbtf.contrib): the threads were limited in _setup_sbtf
    kwargs = dict(side.kwargs)
    if "policy_kwargs" in kwargs:
        kwargs["policy_kwargs"] = _resolve_policy_kwargs(lib, kwargs["policy_kwargs"])
    noise = _make_action_noise(lib, side.action_noise, env.action_space)
    if noise is not None:
        kwargs["action_noise"] = noise
    model = cls(side.policy, env, verbose=0, seed=seed, **extra, **kwargs)
    return model, env


def watch_first_update(lib: str, model) -> dict:
    """Record ``perf_counter`` time and ``num_timesteps`` when the first update (gradient step) returns: SB3's
    ``model.train``, sbtf's compiled ``TrainStep`` call. Filled in place: ``{"t": ..., "steps": ...}``."""
    mark: dict = {}

    def note():
        if not mark:
            mark.update(t=time.perf_counter(), steps=int(model.num_timesteps))

    if lib == "sb3":
        if not hasattr(model, "train"):  # sb3-contrib's ARS: no gradient updates, nothing to watch
            return mark
        original = model.train

        def train(*args, **kwargs):
            out = original(*args, **kwargs)
            note()
            return out

        model.train = train
    else:
        from sbtf.common.compile.fast_call import TrainStep

        original_call = TrainStep.__call__

        def call(self, **values):
            out = original_call(self, **values)
            note()
            return out

        TrainStep.__call__ = call
    return mark


def evaluate(model, env_id: str, n_episodes: int, seed: int, case=None, side=None, train_env=None) -> dict:
    """Deterministic evaluation on a fresh, plain gymnasium env; the same loop for both libraries (observations
    normalised with the training env's statistics when the case normalises; the env's action masks passed to predict
    when the case is masked)."""
    import gymnasium as gym
    import numpy as np

    maker = _env_maker(case, side) if case is not None else env_id
    env = maker(**case.env_kwargs) if callable(maker) else gym.make(env_id)
    normalizer = train_env if case is not None and case.normalize else None
    if normalizer is not None:
        normalizer.training = False
    masked = case is not None and case.masked
    recurrent = case is not None and case.recurrent
    state, episode_start = None, np.ones((1,), dtype=bool)
    is_box = isinstance(env.action_space, gym.spaces.Box)
    is_discrete = isinstance(env.action_space, gym.spaces.Discrete)
    returns, lengths = [], []
    steps = 0
    start = time.perf_counter()
    obs, _ = env.reset(seed=seed)
    for episode in range(n_episodes):
        if episode > 0:
            obs, _ = env.reset()
        done, total, length = False, 0.0, 0
        episode_start = np.ones((1,), dtype=bool)
        while not done:
            model_obs = normalizer.normalize_obs(obs) if normalizer is not None else obs
            if masked:
                action, _ = model.predict(model_obs, deterministic=True, action_masks=np.asarray(env.action_masks()))
            elif recurrent:  # the LSTM state is carried through the episode and reset at its start
                action, state = model.predict(model_obs, state=state, episode_start=episode_start,
                                              deterministic=True)
                episode_start = np.zeros((1,), dtype=bool)
            else:
                action, _ = model.predict(model_obs, deterministic=True)
            if is_discrete:
                action = int(np.asarray(action).reshape(-1)[0])
            elif is_box:
                action = np.clip(np.asarray(action, dtype=env.action_space.dtype).reshape(env.action_space.shape),
                                 env.action_space.low, env.action_space.high)
            obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            length += 1
            done = terminated or truncated
        returns.append(total)
        lengths.append(length)
        steps += length
    seconds = time.perf_counter() - start
    env.close()
    return {
        "eval_mean": float(np.mean(returns)),
        "eval_std": float(np.std(returns)),
        "eval_returns": returns,
        "eval_lengths": lengths,
        "eval_seconds": seconds,
        "eval_predict_per_s": steps / seconds if seconds > 0 else None,
    }


def run(lib: str, case_name: str, seed: int, threads: int, total_timesteps=None) -> dict:
    os.environ.update(thread_env(threads))
    cases = _load_cases()
    case = cases.CASES[case_name]
    timesteps_asked = int(total_timesteps or case.total_timesteps)

    t0 = time.perf_counter()
    versions = _setup_sb3(threads) if lib == "sb3" else _setup_sbtf(threads)
    import_seconds = time.perf_counter() - t0

    t0 = time.perf_counter()
    model, env = _build(lib, case, seed, threads)
    construct_seconds = time.perf_counter() - t0

    side = case.side(lib)
    first_update = watch_first_update(lib, model)
    busy0 = system_busy_seconds()
    load0 = os.getloadavg()[0]
    cpu0, wall0 = time.process_time(), time.perf_counter()
    model.learn(total_timesteps=timesteps_asked, **side.learn_kwargs)
    wall1 = time.perf_counter()
    learn_seconds = wall1 - wall0
    learn_cpu_seconds = time.process_time() - cpu0
    busy1 = system_busy_seconds()
    timesteps = int(model.num_timesteps)

    result = {
        "ok": True,
        "lib": lib,
        "case": case_name,
        "seed": seed,
        "threads": threads,
        "steps_per_s": timesteps / learn_seconds,
        "learn_seconds": learn_seconds,
        "timesteps": timesteps,
        "timesteps_asked": timesteps_asked,
        "learn_cpu_seconds": learn_cpu_seconds,
        "learn_cpu_utilisation": learn_cpu_seconds / learn_seconds,
        "steps_per_cpu_s": timesteps / learn_cpu_seconds if learn_cpu_seconds > 0 else None,
        # Cores kept busy by *other* processes while learn() ran: a direct measure of contention.
        "others_busy_cores": (max(0.0, (busy1 - busy0) - learn_cpu_seconds) / learn_seconds
                              if busy0 is not None and busy1 is not None else None),
        "import_seconds": import_seconds,
        "construct_seconds": construct_seconds,
        "load_average_1m": [round(load0, 2), round(os.getloadavg()[0], 2)],
    }
    if first_update:
        # warm-up = everything up to the end of the first update (tracing, compilation, learning_starts)
        result["first_update_seconds"] = first_update["t"] - wall0
        after = timesteps - first_update["steps"]
        if after > 0 and wall1 > first_update["t"]:
            result["steady_steps_per_s"] = after / (wall1 - first_update["t"])
            result["steady_timesteps"] = after
    if case.eval_episodes > 0:
        result.update(evaluate(model, case.env_id, case.eval_episodes, seed + EVAL_SEED_OFFSET, case=case, side=side,
                               train_env=env))
    result["threads_in_effect"] = _threads_in_effect(lib)
    result["versions"] = versions
    env.close()
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lib", required=True, choices=("sbtf", "sb3"))
    parser.add_argument("--case", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--total-timesteps", type=int, default=None,
                        help="override the case's total_timesteps (smoke tests only)")
    args = parser.parse_args(argv)

    real_stdout = sys.stdout
    try:
        with contextlib.redirect_stdout(sys.stderr):
            result = run(args.lib, args.case, args.seed, args.threads, args.total_timesteps)
        status = 0
    except Exception as exc:  # report any failure as data, the harness keeps going
        traceback.print_exc(file=sys.stderr)
        result = {
            "ok": False,
            "lib": args.lib,
            "case": args.case,
            "seed": args.seed,
            "error": f"{type(exc).__name__}: {exc}",
        }
        status = 1
    real_stdout.write(json.dumps(result) + "\n")
    real_stdout.flush()
    return status


if __name__ == "__main__":
    sys.exit(main())
