#!/usr/bin/env python3
"""Cold start, sbtf against stable-baselines3: what a user waits for in a fresh process.

    python benchmarks/cold_start.py [--repeats 3] [--threads 1] [--nice N] [--libs sbtf,sb3]
    python benchmarks/cold_start.py --libs sbtf --sbtf-tree /tmp/sbtf-old --label before   # an older checkout

Two phases, each a fresh process per run, sbtf and SB3 alternating:

* ``learn``: process start -> end of ``PPO(...).learn(2048)`` on CartPole-v1 (SB3's default PPO
  hyperparameters: one rollout of 2048 steps and one update of 10 epochs), then the model is saved;
* ``predict``: process start -> the first ``predict()`` of the model loaded from that file.

Wall time is measured from just before the process is started (``time.time()`` in this harness) to the
moment the child prints its marker (so interpreter start and all imports count, the child's teardown does
not); *peak RSS* is the child's ``ru_maxrss`` at that moment. The 1-minute load average is reported with each
number. Results: a markdown table on stdout and ``benchmarks/results/cold_start.json``.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from run_benchmarks import _prioritise  # noqa: E402
from worker import thread_env  # noqa: E402

CHILD = r'''
import json, os, resource, sys, time
lib, phase, path, threads = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
if lib == "sb3":
    import torch
    if threads:
        torch.set_num_threads(threads)
    from stable_baselines3 import PPO as Algo
    from stable_baselines3.common.env_util import make_vec_env
    kwargs = dict(n_steps=2048, batch_size=64, n_epochs=10, device="cpu")
else:
    import tensorflow as tf
    if threads:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
    from sbtf import PPO2 as Algo
    from sbtf.common import make_vec_env
    kwargs = dict(n_steps=2048, nminibatches=32, noptepochs=10, cliprange_vf=-1)
import numpy as np
if phase == "learn":
    env = make_vec_env("CartPole-v1", n_envs=1, seed=0)
    model = Algo("MlpPolicy", env, seed=0, verbose=0, **kwargs)
    model.learn(2048)
    done = time.time()
    model.save(path)
else:
    model = Algo.load(path)
    model.predict(np.zeros(4, np.float32), deterministic=True)
    done = time.time()
usage = resource.getrusage(resource.RUSAGE_SELF)
print("RESULT " + json.dumps({"done": done, "peak_rss_mb": usage.ru_maxrss / 1024,
                              "cpu_seconds": usage.ru_utime + usage.ru_stime}), flush=True)
'''

PYTHONS = {"sbtf": sys.executable, "sb3": os.environ.get("SB3_PYTHON", "/work/sb3venv/bin/python")}


def run_once(lib: str, phase: str, path: str, threads: int, nice: int = 0, sbtf_tree: str = REPO_ROOT) -> dict:
    env = dict(os.environ)
    env.update(thread_env(threads))
    env["CUDA_VISIBLE_DEVICES"] = ""
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if lib == "sbtf":
        tree = os.path.abspath(sbtf_tree)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (tree, os.path.join(tree, "converters"),
                                                        env.get("PYTHONPATH")) if p)
    load = os.getloadavg()[0]
    start = time.time()
    proc = subprocess.run([PYTHONS[lib], "-c", CHILD, lib, phase, path, str(threads)], env=env, cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=1800,
                          preexec_fn=_prioritise(nice) if nice else None)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            out = json.loads(line[len("RESULT "):])
            return {"ok": True, "lib": lib, "phase": phase, "seconds": out["done"] - start,
                    "cpu_seconds": out["cpu_seconds"], "peak_rss_mb": out["peak_rss_mb"],
                    "load_average_1m": round(load, 2)}
    return {"ok": False, "lib": lib, "phase": phase, "error": proc.stderr[-2000:]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="0: the libraries' defaults")
    parser.add_argument("--nice", type=int, default=0, help="niceness of the children (see run_benchmarks.py)")
    parser.add_argument("--libs", default="sbtf,sb3", help="which libraries run (comma-separated)")
    parser.add_argument("--sbtf-tree", default=REPO_ROOT,
                        help="the sbtf source tree measured (default: this one; e.g. a checkout of an older commit)")
    parser.add_argument("--label", default="", help="appended to the results file name (cold_start.LABEL.json)")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    libs = [lib for lib in ("sbtf", "sb3") if lib in args.libs.split(",")]
    tree_commit = subprocess.run(["git", "-C", args.sbtf_tree, "rev-parse", "--short", "HEAD"], capture_output=True,
                                 text=True).stdout.strip()
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(args.repeats):
            for lib in libs:
                path = os.path.join(tmp, f"{lib}_{repeat}.zip")
                for phase in ("learn", "predict"):
                    result = run_once(lib, phase, path, args.threads, args.nice, args.sbtf_tree)
                    result["repeat"] = repeat
                    runs.append(result)
                    print(json.dumps(result)[:300], file=sys.stderr, flush=True)
    print(f"threads={args.threads or 'default'}, nice={args.nice}, {os.cpu_count()} cores, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    lines = ["| phase | library | wall s (median) | runs | CPU s (median) | peak RSS MB (median) | "
             "load average (1 min) at start |", "|---|---|---|---|---|---|---|"]
    summary = {}
    for phase in ("learn", "predict"):
        for lib in libs:
            ok = [r for r in runs if r["ok"] and r["lib"] == lib and r["phase"] == phase]
            if not ok:
                lines.append(f"| {phase} | {lib} | failed | 0 | | | |")
                continue
            secs = statistics.median(r["seconds"] for r in ok)
            rss = statistics.median(r["peak_rss_mb"] for r in ok)
            cpu = statistics.median(r["cpu_seconds"] for r in ok)
            summary[f"{phase}_{lib}"] = {"seconds_median": secs, "cpu_seconds_median": cpu, "peak_rss_mb_median": rss}
            each = ", ".join(f"{r['seconds']:.1f}" for r in ok)
            loads = ", ".join(str(r["load_average_1m"]) for r in ok)
            lines.append(f"| {phase} | {lib} | {secs:.1f} | {each} | {cpu:.1f} | {rss:.0f} | {loads} |")
    print("\n".join(lines))
    if not args.no_write:
        os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
        suffix = ("" if args.threads == 1 else f".threads-{args.threads or 'default'}") + \
            (f".{args.label}" if args.label else "")
        with open(os.path.join(HERE, "results", f"cold_start{suffix}.json"), "w", encoding="utf-8") as handle:
            json.dump({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "threads": args.threads,
                       "nice": args.nice, "sbtf_tree": tree_commit,
                       "cores": os.cpu_count(), "summary": summary, "runs": runs}, handle, indent=2)
    return 0 if all(r["ok"] for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
