#!/usr/bin/env python3
"""The environment's own speed per case: the ceiling of any library's steps/s, and so of its ratio to SB3.

    python benchmarks/env_ceiling.py [--cases a,b] [--vec-steps N] [--nice N] [--no-write]

Each case's training VecEnv is built exactly as the harness builds it (``worker._make_env``: Monitor-wrapped envs
in the case's VecEnv class, Atari wrappers and frame stacking, VecNormalize where the case normalises) and stepped
with random actions, one thread, no learner at all. A library whose acting and learning cost nothing would run at
this rate, so:

* ``ceiling ratio`` = env-only steps/s / SB3's measured steps/s (``benchmarks/results/<case>.json``): the largest
  sbtf/SB3 ratio any library can reach on the case on this machine with one thread;
* ``sbtf time in env`` = sbtf's measured steps/s / env-only steps/s: the share of sbtf's ``learn()`` spent inside
  the envs (the rest is acting, buffers and updates: what sbtf can still make faster).

The random actions are drawn before timing (a bank of batches, cycled), so drawing them costs nothing. Results: a
markdown table on stdout and ``benchmarks/results/env_ceiling.json``. Both measured rates depend on the host: run
this on the host and close in time to the harness run it is compared with.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
sys.path.insert(0, HERE)
import worker  # noqa: E402
from run_benchmarks import _prioritise  # noqa: E402

#: vec-steps drawn before timing and cycled through
ACTION_BANK = 64


def _action_bank(env, n: int) -> list:
    """``n`` batches of random actions for ``env`` (one row per sub-env), drawn from the env's action space."""
    space = env.action_space
    space.seed(0)
    return [[space.sample() for _ in range(env.num_envs)] for _ in range(n)]


def measure(case, vec_steps: int, warmup: int = 50) -> dict:
    """Env-only steps/s of ``case``'s training VecEnv (wall clock and CPU time), random actions, no learner."""
    import numpy as np

    env = worker._make_env("sbtf", case, case.side("sbtf"), seed=0)
    bank = [np.asarray(batch) for batch in _action_bank(env, ACTION_BANK)]
    env.reset()
    for i in range(warmup):
        env.step(bank[i % ACTION_BANK])
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for i in range(vec_steps):
        env.step(bank[i % ACTION_BANK])
    wall = time.perf_counter() - wall0
    cpu = time.process_time() - cpu0
    env.close()
    steps = vec_steps * case.n_envs
    return {"env_steps_per_s": steps / wall, "env_steps_per_cpu_s": steps / cpu if cpu > 0 else None,
            "vec_steps": vec_steps, "n_envs": case.n_envs, "load_average_1m": round(os.getloadavg()[0], 2)}


def measured_rates(case_name: str) -> dict:
    """sbtf's and SB3's median ``learn()`` steps/s from the harness's last run of the case (None if absent)."""
    path = os.path.join(RESULTS, f"{case_name}.json")
    if not os.path.exists(path):
        return {"sbtf": None, "sb3": None, "measured": None}
    with open(path) as fh:
        data = json.load(fh)
    summary = data.get("summary", {})
    return {lib: summary.get(lib, {}).get("steps_per_s_median") for lib in ("sbtf", "sb3")} | {
        "measured": data.get("meta", {}).get("date")}


def _fmt(x, spec: str) -> str:
    """``format(x, spec)``, or ``n/a`` for a missing value."""
    return "n/a" if x is None else format(x, spec)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", default=None, help="comma-separated case names (default: every case)")
    parser.add_argument("--vec-steps", type=int, default=None,
                        help="vec-steps timed per case (default: enough for ~20k env steps, at least 200)")
    parser.add_argument("--nice", type=int, default=None, help="niceness of this process (negative needs root)")
    parser.add_argument("--no-write", action="store_true", help="do not write benchmarks/results/env_ceiling.json")
    args = parser.parse_args(argv)

    os.environ.update(worker.thread_env(1))
    if args.nice is not None:
        try:
            _prioritise(args.nice)()  # own session and autogroup, then the nice value (as the harness's workers)
        except OSError as exc:
            print(f"--nice {args.nice} not applied: {exc}", file=sys.stderr)
    worker._setup_sbtf(1)
    cases = worker._load_cases().CASES
    names = args.cases.split(",") if args.cases else list(cases)
    unknown = [n for n in names if n not in cases]
    if unknown:
        parser.error(f"unknown cases {unknown}; known: {', '.join(cases)}")

    rows = {}
    print("| case | envs | env-only steps/s | SB3 steps/s | sbtf steps/s | ceiling ratio (env / SB3) | "
          "sbtf/SB3 now | sbtf time in env |")
    print("|---|---|---|---|---|---|---|---|")
    for name in names:
        case = cases[name]
        vec_steps = args.vec_steps or max(200, 20_000 // case.n_envs)
        row = measure(case, vec_steps) | measured_rates(name)
        env_rate, sb3, sbtf = row["env_steps_per_s"], row["sb3"], row["sbtf"]
        row["ceiling_ratio"] = env_rate / sb3 if sb3 else None
        row["sbtf_time_in_env"] = sbtf / env_rate if sbtf else None
        rows[name] = row
        print(f"| `{name}` | {case.n_envs} | {env_rate:,.0f} | {_fmt(sb3, ',.0f')} | {_fmt(sbtf, ',.0f')} | "
              f"{_fmt(row['ceiling_ratio'], '.2f')} | {_fmt(sbtf / sb3 if sbtf and sb3 else None, '.2f')} | "
              f"{_fmt(row['sbtf_time_in_env'], '.0%')} |", flush=True)
    if not args.no_write:
        meta = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "machine": platform.machine(), "cores": os.cpu_count(), "threads": 1,
                "command": " ".join(["benchmarks/env_ceiling.py"] + list(argv if argv is not None else sys.argv[1:]))}
        os.makedirs(RESULTS, exist_ok=True)
        with open(os.path.join(RESULTS, "env_ceiling.json"), "w") as fh:
            json.dump({"meta": meta, "cases": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
