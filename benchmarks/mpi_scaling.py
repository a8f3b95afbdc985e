"""Throughput of sbtf's MPI algorithms with ``mpirun -np N`` against one process.

    python benchmarks/mpi_scaling.py                       # TRPO and PPO1 on CartPole-v1, 1 and 2 processes
    python benchmarks/mpi_scaling.py --algos trpo --nprocs 1,2,4 --repeats 3
    python benchmarks/mpi_scaling.py --no-write            # print only
    python benchmarks/mpi_scaling.py --render-docs         # rewrite the docs section from the last results

Each configuration runs ``repeats`` times in fresh processes (``<python> mpi_scaling.py --worker ...``, under the
venv's ``mpirun -np N`` when N > 1). A worker builds the model, waits for every rank (``Barrier``), then times
``learn(total_timesteps)``; rank 0 reports the global steps (``num_timesteps``, summed over ranks) divided by the
wall time of ``learn()``, and the CPU time every rank spent in it. Two settings of the per-process batch are
measured for N > 1: the same per-process batch as one process (N times more data per update, the usual way to
use MPI) and the per-process batch divided by N (the same global batch per update as one process).

The results go to ``benchmarks/results/mpi_scaling.json`` and to the "MPI" section of ``docs/benchmarks.md``
(between ``<!-- BEGIN MPI SCALING -->`` and ``<!-- END MPI SCALING -->``; the rest of the page is kept).
Standard library only in the driver; the workers need sbtf and the ``mpi`` extra.
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
BEGIN, END = "<!-- BEGIN MPI SCALING -->", "<!-- END MPI SCALING -->"

ALGOS = {
    # name: (class, batch argument, per-process batch, other keyword arguments)
    "trpo": ("TRPO", "timesteps_per_batch", 2048,
             dict(gamma=0.99, max_kl=0.01, cg_iters=15, cg_damping=0.1, lam=0.95, entcoeff=0.0, vf_stepsize=1e-3,
                  vf_iters=10)),
    "ppo1": ("PPO1", "timesteps_per_actorbatch", 2048,
             dict(optim_batchsize=64, optim_epochs=10, lam=0.95, gamma=0.99, entcoeff=0.0, optim_stepsize=3e-4,
                  schedule="constant")),
}


# ----------------------------------------------------------------------------------------------- worker
def worker(args) -> None:
    import gymnasium as gym  # pylint: disable=import-outside-toplevel
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    import sbtf  # pylint: disable=import-outside-toplevel
    from sbtf.common.mpi_util import get_comm  # pylint: disable=import-outside-toplevel

    comm = get_comm()
    cls_name, batch_arg, _, kwargs = ALGOS[args.algo]
    kwargs = dict(kwargs)
    kwargs[batch_arg] = args.batch
    model = getattr(sbtf, cls_name)("MlpPolicy", gym.make(args.env), seed=args.seed, verbose=0, **kwargs)
    wall, cpu = timed_learn(comm, lambda: model.learn(args.timesteps))
    returns = [info["r"] for info in list(model.ep_info_buf)[-20:]]
    if comm.Get_rank() == 0:
        print_result({"steps": int(model.num_timesteps), "seconds": wall, "steps_per_s": model.num_timesteps / wall,
                      "cpu_seconds": cpu, "last_returns_mean": sum(returns) / max(len(returns), 1)})


# ----------------------------------------------------------------------------------------------- driver
def run_one(python: str, nprocs: int, algo: str, batch: int, timesteps: int, env: str, seed: int) -> dict:
    worker_args = ["--algo", algo, "--batch", str(batch), "--timesteps", str(timesteps), "--env", env, "--seed",
                   str(seed)]
    return run_worker(python, __file__, worker_args, nprocs, timeout=3600)


def render(results: dict) -> str:
    meta = results["meta"]
    lines = [BEGIN, "## MPI: `mpirun -np N` against one process", "",
             "Throughput of sbtf's MPI algorithms (see `docs/mpi.md`) on "
             f"`{meta['env']}`, written by `benchmarks/mpi_scaling.py`. *steps/s* is the number of environment steps "
             "of all ranks (`num_timesteps`) over the wall time of `learn()` on rank 0 (TF tracing included); "
             "every rank is one process with one TensorFlow thread. *per-process batch* is `timesteps_per_batch` "
             "(TRPO) / `timesteps_per_actorbatch` (PPO1): with the same per-process batch, N ranks put N times "
             "more data into each update; with the batch divided by N, each update sees the same number of steps "
             "as one process.", "",
             f"Last run: {meta['date']} · `uname -m` {meta['machine']} · {meta['cores']} cores · "
             f"{meta['timesteps']:,} timesteps per run · repeats {meta['repeats']} · sbtf tree {meta['revision']} · "
             f"load average at start {meta['load']}.", "",
             "| algorithm | processes | per-process batch | steps/s (median) | min - max | speed-up vs 1 process "
             "| CPU-s per 1000 steps (all ranks) | mean return, last 20 episodes |",
             "|---|---|---|---|---|---|---|---|"]
    for algo, rows in results["rows"].items():
        base = None
        for row in rows:
            speeds = [r["steps_per_s"] for r in row["runs"]]
            median = statistics.median(speeds)
            if row["nprocs"] == 1:
                base = median
            cpu = statistics.median([sum(r["cpu_seconds"]) / r["steps"] * 1000 for r in row["runs"]])
            ret = statistics.median([r["last_returns_mean"] for r in row["runs"]])
            speedup = f"{median / base:.2f}x" if base else "n/a"
            lines.append(f"| {ALGOS[algo][0]} | {row['nprocs']} | {row['batch']} | **{median:,.0f}** | "
                         f"{min(speeds):,.0f} - {max(speeds):,.0f} | {speedup} | {cpu:.2f} | {ret:.1f} |")
    cores = meta.get("cores") or 1
    try:
        busy = float(meta.get("load", "nan")) >= cores
    except ValueError:
        busy = False
    lines += ["", f"With N processes on a machine with {cores} cores the throughput can at best grow N-fold (while "
              "N <= cores): the rollouts run in parallel, and the ranks synchronise once per minibatch gradient "
              "and Fisher-vector product. CPU-s per 1000 steps adds up all ranks (TF tracing is paid once per "
              "rank)."]
    if busy:
        lines += ["", f"**Warning: the load average at the start ({meta['load']}) was at or above the number of "
                  f"cores ({cores}): other processes were using the machine, so the ranks did not have a core "
                  "each. Each synchronisation then waits for a rank that is not running, and these numbers show "
                  "that cost rather than the scaling on free cores. Rerun on an idle machine.**"]
    lines += ["", END]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--algo", default="trpo", help=argparse.SUPPRESS)
    parser.add_argument("--batch", type=int, default=2048, help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--algos", default="trpo,ppo1", help="comma-separated: trpo, ppo1")
    parser.add_argument("--nprocs", default="1,2", help="comma-separated process counts")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--timesteps", type=int, default=50_000)
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--python", default=sys.executable, help="interpreter with sbtf and the mpi extra")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--render-docs", action="store_true",
                        help="rebuild the docs section from benchmarks/results/mpi_scaling.json, run nothing")
    args = parser.parse_args(argv)
    if args.worker:
        worker(args)
        return 0
    if args.render_docs:
        with open(os.path.join(HERE, "results", "mpi_scaling.json"), encoding="utf-8") as handle:
            section = render(json.load(handle))
        update_docs(os.path.join(REPO, "docs", "benchmarks.md"), section, BEGIN, END)
        print(section)
        return 0

    nprocs_list = [int(n) for n in args.nprocs.split(",")]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    results = {"meta": {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
                        "machine": platform.machine(), "cores": os.cpu_count(), "timesteps": args.timesteps,
                        "repeats": args.repeats, "env": args.env, "revision": git_revision(),
                        "load": f"{load:.2f}", "command": " ".join(sys.argv)},
               "rows": {}}
    for algo in args.algos.split(","):
        base_batch = ALGOS[algo][2]
        configs = []
        for n in nprocs_list:
            configs.append((n, base_batch))
            if n > 1:
                configs.append((n, base_batch // n))
        rows = [{"nprocs": n, "batch": batch, "runs": []} for n, batch in configs]
        for repeat in range(args.repeats):  # alternate the configurations within each repeat
            for row in rows:
                result = run_one(args.python, row["nprocs"], algo, row["batch"], args.timesteps, args.env, repeat)
                row["runs"].append(result)
                print(f"[{algo}] np={row['nprocs']} batch={row['batch']} seed={repeat}: "
                      f"{result['steps_per_s']:,.0f} steps/s", flush=True)
        results["rows"][algo] = rows
    section = render(results)
    print(section)
    if not args.no_write:
        os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
        with open(os.path.join(HERE, "results", "mpi_scaling.json"), "w", encoding="utf-8") as handle:
            json.dump(results, handle, indent=2)
        update_docs(os.path.join(REPO, "docs", "benchmarks.md"), section, BEGIN, END)
    return 0


if __name__ == "__main__":
    sys.exit(main())
