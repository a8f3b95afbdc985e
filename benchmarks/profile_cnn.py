#!/usr/bin/env python3
"""Where the time of an sbtf CNN-policy ``learn()`` goes, per algorithm (sbtf only; one JSON line).

    python benchmarks/profile_cnn.py --algo PPO2 [--steps 2048] [--xla auto|on|off] [--threads 1]

The model is built on Atari frames (``PongNoFrameskip-v4``, DeepMind wrappers, 4 stacked 84x84 frames, 8 envs for
the on-policy algorithms, 1 for DQN and the MPI family) or, for the continuous-action algorithms (SAC, TD3, DDPG),
on ``CarRacing-v3`` (96x96x3 frames). ``learn(steps)`` is timed as a whole, and inside it:

* ``train_calls`` / ``train_first_s`` / ``train_median_s`` / ``train_total_s``: every call of a compiled
  ``TrainStep`` (the first one includes tracing and compilation);
* ``env_total_s``: ``VecEnv.step`` (the emulator and the wrappers);
* ``other_s``: the rest: acting (the policy's compiled acting call), buffers, GAE, callbacks.

``--xla`` sets ``SBTF_XLA`` (``auto``: sbtf's rule, ``on``: XLA for every step that asks for it, convolutions
included, ``off``: no XLA), so the cost of XLA on convolutions can be measured per algorithm. ``xla`` in the output
lists the decision each train step took.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

ATARI_ID = "PongNoFrameskip-v4"
CAR_ID = "CarRacing-v3"

#: per algorithm: (n_envs, constructor keyword arguments); rl-zoo's Atari settings where the zoo has them
ALGOS = {
    "PPO2": (8, dict(n_steps=128, nminibatches=4, noptepochs=4, learning_rate=2.5e-4, cliprange=0.1,
                     ent_coef=0.01, vf_coef=0.5)),
    "A2C": (8, dict(n_steps=5, learning_rate=7e-4, ent_coef=0.01, vf_coef=0.25, epsilon=1e-5)),
    "ACER": (8, dict(n_steps=20, buffer_size=5000, replay_start=1000)),
    "ACKTR": (8, dict(n_steps=20)),
    "DQN": (1, dict(buffer_size=10_000, learning_starts=1000, learning_rate=1e-4, batch_size=32, train_freq=4,
                    target_network_update_freq=1000, exploration_fraction=0.1, exploration_final_eps=0.01)),
    "PPO1": (1, dict(timesteps_per_actorbatch=256, optim_batchsize=64, optim_epochs=4)),
    "TRPO": (1, dict(timesteps_per_batch=256, vf_iters=3)),
    "SAC": (1, dict(buffer_size=10_000, learning_starts=500, batch_size=64)),
    "TD3": (1, dict(buffer_size=10_000, learning_starts=500, batch_size=64, train_freq=1, gradient_steps=1)),
    "DDPG": (1, dict(buffer_size=10_000, batch_size=64, nb_rollout_steps=100, nb_train_steps=50)),
}
CONTINUOUS = ("SAC", "TD3", "DDPG")


def _timed_train_steps(record: list):
    """Wrap ``TrainStep.__call__`` to record each call's duration."""
    from sbtf.common.compile.fast_call import TrainStep

    original = TrainStep.__call__

    def timed(self, **values):
        start, cpu = time.perf_counter(), time.process_time()
        out = original(self, **values)
        record.append((self.name, self.jit_compile, time.perf_counter() - start, time.process_time() - cpu))
        return out

    TrainStep.__call__ = timed


def _car_env(seed: int):
    import gymnasium as gym
    from sbtf.common.vec_env import DummyVecEnv

    def make():
        env = gym.make(CAR_ID)
        env.reset(seed=seed)
        return env

    return DummyVecEnv([make])


def build(algo: str, seed: int, threads: int, policy: str):
    import sbtf
    from sbtf.common.cmd_util import make_atari_env
    from sbtf.common.vec_env import VecFrameStack

    n_envs, kwargs = ALGOS[algo]
    if algo in CONTINUOUS:
        env = _car_env(seed)
    else:
        env = VecFrameStack(make_atari_env(ATARI_ID, num_env=n_envs, seed=seed), n_stack=4)
    cls = getattr(sbtf, algo)
    model = cls(policy, env, verbose=0, seed=seed, n_cpu_tf_sess=threads, **kwargs)
    return model, env


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algo", required=True, choices=sorted(ALGOS))
    parser.add_argument("--policy", default="CnnPolicy")
    parser.add_argument("--steps", type=int, default=2048)
    parser.add_argument("--xla", default="auto", choices=("auto", "on", "off"))
    parser.add_argument("--threads", type=int, default=0, help="0: TensorFlow's default")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    os.environ["SBTF_XLA"] = args.xla
    import tensorflow as tf

    if args.threads:
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    if args.xla != "auto":  # the off-policy algorithms decide through their own `jit_compile` attribute
        from sbtf.common.algo.off_policy_algorithm import OffPolicyAlgorithm

        OffPolicyAlgorithm.jit_compile = args.xla == "on"
    calls: list = []
    _timed_train_steps(calls)
    from sbtf.common.vec_env import VecEnv

    env_seconds, env_cpu, depth = [0.0], [0.0], [0]
    original_step = VecEnv.step

    def timed_step(self, actions):  # wrappers call the inner VecEnv's step: count the outermost call only
        depth[0] += 1
        start, cpu = time.perf_counter(), time.process_time()
        try:
            return original_step(self, actions)
        finally:
            depth[0] -= 1
            if depth[0] == 0:
                env_seconds[0] += time.perf_counter() - start
                env_cpu[0] += time.process_time() - cpu

    VecEnv.step = timed_step
    t0 = time.perf_counter()
    model, env = build(args.algo, args.seed, args.threads or None, args.policy)
    construct = time.perf_counter() - t0
    load0 = os.getloadavg()[0]
    t0, cpu0 = time.perf_counter(), time.process_time()
    model.learn(args.steps)
    learn = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    durations = [d for _, _, d, _ in calls]
    cpu_durations = [c for _, _, _, c in calls]
    result = {
        "algo": args.algo, "policy": args.policy, "xla_env": args.xla, "steps": int(model.num_timesteps),
        "threads": args.threads or "default", "construct_s": round(construct, 2), "learn_s": round(learn, 2),
        "steps_per_s": round(model.num_timesteps / learn, 1), "cpu_use": round(cpu / learn, 2),
        "train_calls": len(durations),
        "train_first_s": round(durations[0], 3) if durations else None,
        "train_median_s": round(statistics.median(durations[1:]), 4) if len(durations) > 1 else None,
        "train_total_s": round(sum(durations), 2),
        "env_total_s": None,
        "learn_cpu_s": round(cpu, 2),
        "train_first_cpu_s": round(cpu_durations[0], 3) if cpu_durations else None,
        "train_median_cpu_s": round(statistics.median(cpu_durations[1:]), 4) if len(cpu_durations) > 1 else None,
        "train_total_cpu_s": round(sum(cpu_durations), 2),
        "xla": sorted({f"{name}={jit}" for name, jit, _, _ in calls}),
        "loadavg_1m": [round(load0, 1), round(os.getloadavg()[0], 1)],
    }
    result["env_total_s"] = round(env_seconds[0], 2)
    result["env_total_cpu_s"] = round(env_cpu[0], 2)
    result["other_s"] = round(learn - result["train_total_s"] - env_seconds[0], 2)
    result["other_cpu_s"] = round(cpu - result["train_total_cpu_s"] - env_cpu[0], 2)
    print(json.dumps(result))
    env.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
