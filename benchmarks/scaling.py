#!/usr/bin/env python3
"""Env engines side by side: EnvPool, sbtf's SubprocVecEnv / DummyVecEnv, RayVecEnv (and SB3's SubprocVecEnv when
stable-baselines3 is installed), env-only and under PPO2.

    python benchmarks/scaling.py [--envs pong,halfcheetah,cartpole] [--n-envs 8,32] [--seconds 10]
                                 [--engines envpool,subproc,dummy,ray,sb3] [--learn-steps 8192] [--no-write]

* ``env-only``: vec-steps of random actions (drawn before timing) for ``--seconds``; transitions per second
  (``n_envs`` per vec-step). Atari ids run the zoo's preprocessing on every engine (EnvPool's own, or
  ``make_atari_env`` + ``VecFrameStack(4)``); ``halfcheetah`` is ``HalfCheetah-v4`` in EnvPool and gymnasium's
  ``HalfCheetah-v5`` elsewhere (needs ``pip install mujoco``; skipped without it).
* ``ppo2``: ``PPO2`` (CnnPolicy on Atari, MlpPolicy otherwise; the zoo's n_steps / minibatches) learning
  ``--learn-steps`` transitions on the engine; transitions per second of ``learn()``, the first update excluded.
* ``ray overhead``: microseconds per vec-step of RayVecEnv beyond SubprocVecEnv on the same envs (one local node).

Results: a markdown table on stdout and ``benchmarks/results/scaling.json`` (with the host's CPU and load).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time
from typing import Dict, List, Optional

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")

ENV_IDS = {"pong": "PongNoFrameskip-v4", "halfcheetah": "HalfCheetah-v5", "cartpole": "CartPole-v1"}
ENVPOOL_IDS = {"halfcheetah": "HalfCheetah-v4"}


def _is_atari(name: str) -> bool:
    return "NoFrameskip" in ENV_IDS[name]


def make_engine(engine: str, name: str, n_envs: int, seed: int = 0):
    """The VecEnv of ``engine`` for env ``name`` with ``n_envs`` envs (None when the engine is not installed)."""
    env_id = ENV_IDS[name]
    if engine == "envpool":
        from sbtf.common.vec_env import EnvPoolVecEnv

        return EnvPoolVecEnv(ENVPOOL_IDS.get(name, env_id), n_envs=n_envs, seed=seed)
    if engine == "sb3":
        try:
            from stable_baselines3.common.env_util import make_atari_env as sb3_atari, make_vec_env as sb3_make
            from stable_baselines3.common.vec_env import SubprocVecEnv as SB3Subproc, VecFrameStack as SB3Stack
        except ImportError:
            return None
        if _is_atari(name):
            return SB3Stack(sb3_atari(env_id, n_envs=n_envs, seed=seed, vec_env_cls=SB3Subproc), 4)
        return sb3_make(env_id, n_envs=n_envs, seed=seed, vec_env_cls=SB3Subproc)
    from sbtf.common.cmd_util import make_atari_env, make_vec_env
    from sbtf.common.vec_env import DummyVecEnv, SubprocVecEnv, VecFrameStack

    if engine == "ray":
        from sbtf.common.vec_env.ray_vec_env import RayVecEnv

        cls, kwargs = RayVecEnv, dict(envs_per_actor=max(n_envs // 2, 1), actor_options=dict(num_cpus=0))
    else:
        cls, kwargs = {"subproc": SubprocVecEnv, "dummy": DummyVecEnv}[engine], {}
    if _is_atari(name):
        if cls is not DummyVecEnv and cls is not SubprocVecEnv:
            return None
        return VecFrameStack(make_atari_env(env_id, n_envs, seed, use_subprocess=cls is SubprocVecEnv), 4)
    if name == "halfcheetah":
        try:
            import mujoco  # noqa: F401 - gymnasium's HalfCheetah needs it
        except ImportError:
            return None
    return make_vec_env(env_id, n_envs=n_envs, seed=seed, vec_env_cls=cls, vec_env_kwargs=kwargs)


def env_only(venv, seconds: float) -> float:
    """Transitions per second of random actions."""
    rng = np.random.default_rng(0)
    bank = [np.array([venv.action_space.sample() for _ in range(venv.num_envs)]) for _ in range(32)]
    venv.action_space.seed(int(rng.integers(1 << 30)))
    venv.reset()
    for actions in bank[:4]:
        venv.step(actions)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        venv.step(bank[steps % len(bank)])
        steps += 1
    return steps * venv.num_envs / (time.perf_counter() - start)


def ppo2_rate(venv, name: str, learn_steps: int) -> float:
    """PPO2's learn() transitions per second on the engine (first update excluded)."""
    from sbtf import PPO2
    from sbtf.common.callbacks import BaseCallback

    class Clock(BaseCallback):
        def __init__(self):
            super().__init__()
            self.start: Optional[float] = None
            self.first = 0

        def _on_rollout_end(self) -> None:
            if self.start is None:
                self.start, self.first = time.perf_counter(), self.num_timesteps

        def _on_step(self) -> bool:
            return True

    policy = "CnnPolicy" if _is_atari(name) else "MlpPolicy"
    n_steps = 128 if _is_atari(name) else 256
    model = PPO2(policy, venv, n_steps=n_steps, nminibatches=4, noptepochs=4, seed=0, n_cpu_tf_sess=1)
    clock = Clock()
    model.learn(learn_steps, callback=clock)
    return (model.num_timesteps - clock.first) / (time.perf_counter() - clock.start)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", default="pong,cartpole")
    parser.add_argument("--n-envs", default="8,32")
    parser.add_argument("--engines", default="envpool,subproc,dummy,ray,sb3")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--learn-steps", type=int, default=8192, help="0: no PPO2 runs")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    rows: List[Dict] = []
    for name in args.envs.split(","):
        for n_envs in (int(n) for n in args.n_envs.split(",")):
            for engine in args.engines.split(","):
                venv = make_engine(engine, name, n_envs)
                if venv is None:
                    continue
                row = dict(env=ENV_IDS[name], n_envs=n_envs, engine=engine,
                           env_only=round(env_only(venv, args.seconds), 1))
                venv.close()
                if args.learn_steps and engine != "sb3":
                    venv = make_engine(engine, name, n_envs)
                    row["ppo2"] = round(ppo2_rate(venv, name, args.learn_steps), 1)
                    venv.close()
                rows.append(row)
                print(row, flush=True)
    print("\n| env | n_envs | engine | env-only steps/s | PPO2 steps/s |\n|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['env']} | {row['n_envs']} | {row['engine']} | {row['env_only']:,.0f} | "
              f"{row.get('ppo2', float('nan')):,.0f} |")
    if not args.no_write:
        os.makedirs(RESULTS, exist_ok=True)
        with open(os.path.join(RESULTS, "scaling.json"), "w") as handle:
            json.dump(dict(date=datetime.datetime.now().isoformat(timespec="seconds"), host=platform.processor(),
                           cpus=os.cpu_count(), load=os.getloadavg(), rows=rows), handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
