"""Throughput of sbtf's DDPG with ``mpirun -np N`` against one process.

    python benchmarks/ddpg_mpi_scaling.py                         # both network sizes, 1 and 2 processes
    python benchmarks/ddpg_mpi_scaling.py --configs small --repeats 3 --timesteps 40000
    python benchmarks/ddpg_mpi_scaling.py --no-write              # print only

DDPG counts ``total_timesteps`` per rank (as stable-baselines 2), so a run with N processes gives every rank
``timesteps / N`` steps: all settings collect the same number of environment steps in total. Each configuration runs
``repeats`` times in fresh processes (``<python> ddpg_mpi_scaling.py --worker ...``, under the venv's ``mpirun -np N``
when N > 1). A worker builds the model, waits for every rank (``Barrier``), times ``learn()``, and rank 0 reports the
global steps (the ranks' ``num_timesteps`` summed) over the wall time of ``learn()``, the CPU time of every rank, and
the mean return of 5 deterministic evaluation episodes.

A cycle's ``nb_train_steps`` gradient steps are one compiled call in both cases; under MPI that call averages every
gradient step over the ranks with an ``Allreduce`` inside it (``tf.numpy_function``), which rules out XLA. The
"1 process, MPI variant" row runs that variant of the call in one process, to separate its cost from the parallel
speed-up.

The results go to ``benchmarks/results/ddpg_mpi_scaling.json`` and to the "DDPG under MPI" section of
``docs/benchmarks.md`` (between ``<!-- BEGIN DDPG MPI -->`` and ``<!-- END DDPG MPI -->``; the rest of the page is
kept). Standard library only in the driver; the workers need sbtf and the ``mpi`` extra.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from mpi_driver import git_revision, print_result, run_worker, timed_learn, update_docs  # noqa: E402
BEGIN, END = "<!-- BEGIN DDPG MPI -->", "<!-- END DDPG MPI -->"

COMMON = dict(gamma=0.99, nb_rollout_steps=100, nb_train_steps=100, actor_lr=1e-3, critic_lr=1e-3, tau=0.005)
CONFIGS = {
    # name: (description, DDPG keyword arguments, default total timesteps)
    "small": ("MLP 64x64, batch 128", dict(COMMON, batch_size=128, policy_kwargs=dict(layers=[64, 64])), 20_000),
    "large": ("MLP 400x300, batch 256", dict(COMMON, batch_size=256, policy_kwargs=dict(layers=[400, 300])), 6_000),
}
# (processes, use the MPI variant of the train call in one process)
SETTINGS = ((1, False), (1, True), (2, False))


# ----------------------------------------------------------------------------------------------- worker
def worker(args) -> None:
    import gymnasium as gym  # pylint: disable=import-outside-toplevel
    import numpy as np  # pylint: disable=import-outside-toplevel

    from sbtf import DDPG  # pylint: disable=import-outside-toplevel
    from sbtf.common.mpi_util import get_comm  # pylint: disable=import-outside-toplevel
    from sbtf.ddpg import NormalActionNoise  # pylint: disable=import-outside-toplevel

    comm = get_comm()
    size = comm.Get_size()
    kwargs = dict(CONFIGS[args.config][1])
    model = DDPG("MlpPolicy", gym.make(args.env), seed=args.seed, verbose=0, n_cpu_tf_sess=1,
                 action_noise=NormalActionNoise(np.zeros(1), 0.1 * np.ones(1)), **kwargs)
    model._mpi_graph = bool(args.mpi_variant)  # pylint: disable=protected-access
    wall, cpu = timed_learn(comm, lambda: model.learn(args.timesteps // size))
    steps = comm.allreduce(int(model.num_timesteps))
    if comm.Get_rank() == 0:
        env = gym.make(args.env)
        returns = []
        for episode in range(5):
            obs, _ = env.reset(seed=10_000 + episode)
            done, total = False, 0.0
            while not done:
                action, _ = model.predict(obs)
                obs, reward, terminated, truncated, _ = env.step(action)
                total += float(reward)
                done = terminated or truncated
            returns.append(total)
        print_result({"steps": steps, "seconds": wall, "steps_per_s": steps / wall, "cpu_seconds": cpu,
                      "eval_return": sum(returns) / len(returns)})


# ----------------------------------------------------------------------------------------------- driver
def run_one(python: str, nprocs: int, mpi_variant: bool, config: str, timesteps: int, env: str, seed: int) -> dict:
    worker_args = ["--config", config, "--timesteps", str(timesteps), "--env", env, "--seed", str(seed)]
    return run_worker(python, __file__, worker_args + (["--mpi-variant"] if mpi_variant else []), nprocs,
                      timeout=7200)


def _label(nprocs: int, mpi_variant: bool) -> str:
    if nprocs == 1:
        return "1 process, MPI variant" if mpi_variant else "1 process"
    return f"`mpirun -np {nprocs}`"


def render(results: dict) -> str:
    common = ", ".join(f"{k}={v}" for k, v in COMMON.items())
    lines = [BEGIN, "## DDPG under MPI: `mpirun -np N` against one process", "",
             f"DDPG on `{results['env']}`, written by `benchmarks/ddpg_mpi_scaling.py`: {common}, Gaussian action "
             "noise 0.1. DDPG counts `total_timesteps` per rank (stable-baselines 2), so each of N ranks runs "
             "*total steps* / N steps and every setting of a network collects the same number of environment steps. "
             "*steps/s* is that total over the wall time of `learn()` (TF tracing included); every rank "
             "is one process with one TensorFlow thread. Each cycle of 100 gradient steps is one compiled call; under "
             "MPI that call averages every gradient step over the ranks with an `Allreduce` inside it, which rules "
             "out XLA: the *1 process, MPI variant* row runs that call in one process. With N ranks every update "
             "averages N minibatches, and there are N times fewer updates for the same number of steps: compare "
             "the evaluation returns too (5 deterministic episodes, the mean over repeats).", "",
             "| network | total steps | setting | steps/s (median) | min - max | speed-up vs 1 process "
             "| CPU-s per 1000 steps (all ranks) | eval return |",
             "|---|---|---|---|---|---|---|---|"]
    runs_lines = []
    for config, entry in results["configs"].items():
        meta, rows = entry["meta"], entry["rows"]
        base = None
        for row in rows:
            speeds = [r["steps_per_s"] for r in row["runs"]]
            median = statistics.median(speeds)
            if row["nprocs"] == 1 and not row["mpi_variant"]:
                base = median
            cpu = statistics.median([sum(r["cpu_seconds"]) / r["steps"] * 1000 for r in row["runs"]])
            ret = statistics.mean([r["eval_return"] for r in row["runs"]])
            speedup = f"{median / base:.2f}x" if base else "n/a"
            lines.append(f"| {CONFIGS[config][0]} | {row['timesteps']:,} | "
                         f"{_label(row['nprocs'], row['mpi_variant'])} | **{median:,.0f}** | "
                         f"{min(speeds):,.0f} - {max(speeds):,.0f} | {speedup} | {cpu:.2f} | {ret:.0f} |")
        runs_lines.append(f"- {CONFIGS[config][0]}: last run {meta['date']} · `uname -m` {meta['machine']} · "
                          f"{meta['cores']} cores · repeats {meta['repeats']} · sbtf tree {meta['revision']} · "
                          f"load average at start {meta['load']}.")
    lines += [""] + runs_lines
    lines += ["", "On a machine with 2 cores, 2 processes can at best double the throughput, and other processes "
              "running at the same time (see the load average) take from the 2-process runs first; compare the "
              "CPU-seconds per 1000 steps as well.", "", END]
    return "\n".join(lines)


def _load_previous(path: str, env: str) -> dict:
    """Earlier results (kept for the configurations that are not run again)."""
    try:
        with open(path, encoding="utf-8") as handle:
            previous = json.load(handle)
    except (OSError, ValueError):
        return {}
    if previous.get("env") != env:
        return {}
    return {c: e for c, e in previous.get("configs", {}).items() if c in CONFIGS}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--config", default="small", help=argparse.SUPPRESS)
    parser.add_argument("--mpi-variant", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--configs", default="small,large", help="comma-separated: " + ", ".join(CONFIGS))
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--timesteps", type=int, default=None,
                        help="environment steps in total (all ranks); default: 20,000 (small), 6,000 (large)")
    parser.add_argument("--env", default="Pendulum-v1")
    parser.add_argument("--python", default=sys.executable, help="interpreter with sbtf and the mpi extra")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    if args.worker:
        worker(args)
        return 0

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    meta = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
            "machine": platform.machine(), "cores": os.cpu_count(), "repeats": args.repeats,
            "revision": git_revision(), "load": f"{load:.2f}", "command": " ".join(sys.argv)}
    results_path = os.path.join(HERE, "results", "ddpg_mpi_scaling.json")
    results = {"env": args.env, "configs": _load_previous(results_path, args.env)}
    for config in args.configs.split(","):
        timesteps = args.timesteps or CONFIGS[config][2]
        rows = [{"nprocs": n, "mpi_variant": variant, "timesteps": timesteps, "runs": []} for n, variant in SETTINGS]
        for repeat in range(args.repeats):  # alternate the settings within each repeat
            for row in rows:
                result = run_one(args.python, row["nprocs"], row["mpi_variant"], config, timesteps, args.env, repeat)
                row["runs"].append(result)
                print(f"[{config}] {_label(row['nprocs'], row['mpi_variant'])} seed={repeat}: "
                      f"{result['steps_per_s']:,.0f} steps/s, eval {result['eval_return']:.0f}", flush=True)
        results["configs"][config] = {"meta": meta, "rows": rows}
    results["configs"] = {c: results["configs"][c] for c in CONFIGS if c in results["configs"]}
    section = render(results)
    print(section)
    if not args.no_write:
        os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
        with open(results_path, "w", encoding="utf-8") as handle:
            json.dump(results, handle, indent=2)
        update_docs(os.path.join(REPO, "docs", "benchmarks.md"), section, BEGIN, END)
    return 0


if __name__ == "__main__":
    sys.exit(main())
