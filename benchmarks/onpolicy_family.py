#!/usr/bin/env python3
"""ACER and ACKTR against sbtf's own A2C on CartPole-v1: throughput and learning curve, side by side.

    python benchmarks/onpolicy_family.py                         # A2C, ACER, ACKTR; 2 seeds; 100k steps
    python benchmarks/onpolicy_family.py --seeds 0,1,2 --total-timesteps 200000 --checkpoint 20000
    python benchmarks/onpolicy_family.py --algos acer,a2c --no-write
    python benchmarks/onpolicy_family.py --worker --algo acer --seed 0   # one run, one JSON line

No stable-baselines3 equivalent of ACER or ACKTR exists, so the reference is sbtf's A2C, run with the same
number of envs (8) and the RL-zoo CartPole-v1 hyperparameters of each algorithm (``sbtf/hyperparams``).

Method (as ``run_benchmarks.py``): every run is a fresh worker process limited to ``--threads`` threads; the
algorithms alternate within each seed; a ``DummyVecEnv`` of ``n_envs`` Monitor-wrapped envs made by
``sbtf.common.make_vec_env(env_id, n_envs, seed=seed)``. Every ``--checkpoint`` timesteps a callback evaluates
the model (10 deterministic episodes on a separate env, first reset seeded with ``seed + 10000``); the time
spent evaluating is subtracted, so *learn steps/s* is ``num_timesteps`` / (wall time of ``learn()`` minus
evaluation time). TF tracing / XLA compilation inside ``learn()`` is included, as a user pays it.

Output: a table on stdout, ``benchmarks/results/onpolicy_family.json`` (raw runs) and the section of
``docs/benchmarks.md`` between ``<!-- BEGIN ONPOLICY_FAMILY -->`` and ``<!-- END ONPOLICY_FAMILY -->``
(created at the end of the page the first time; every other section of that page is left untouched).
Only the standard library is needed in the parent process.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from worker import system_busy_seconds, thread_env  # noqa: E402  (stdlib-only helpers beside this file)
DEFAULT_DOCS = os.path.join(REPO_ROOT, "docs", "benchmarks.md")
DEFAULT_RESULTS = os.path.join(HERE, "results", "onpolicy_family.json")
BEGIN_MARK = "<!-- BEGIN ONPOLICY_FAMILY -->"
END_MARK = "<!-- END ONPOLICY_FAMILY -->"
ENV_ID = "CartPole-v1"
N_ENVS = 8
EVAL_EPISODES = 10
EVAL_SEED_OFFSET = 10_000

#: algorithm -> (sbtf class name, constructor keyword arguments): RL-zoo CartPole-v1 settings (8 envs, ent_coef 0)
ALGOS = {
    "a2c": ("A2C", {"ent_coef": 0.0}),
    "acer": ("ACER", {"ent_coef": 0.0}),
    "acktr": ("ACKTR", {"ent_coef": 0.0}),
}
LABELS = {"a2c": "A2C", "acer": "ACER", "acktr": "ACKTR"}


# ---------------------------------------------------------------------------------------------
# worker (runs in a fresh process)
# ---------------------------------------------------------------------------------------------
def run_worker(algo: str, seed: int, total_timesteps: int, checkpoint: int, threads: int) -> dict:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    sys.path.insert(0, REPO_ROOT)
    import numpy as np  # noqa: WPS433
    import gymnasium as gym  # noqa: WPS433
    import tensorflow as tf  # noqa: WPS433

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    import sbtf  # noqa: WPS433
    from sbtf.common import make_vec_env  # noqa: WPS433
    from sbtf.common.callbacks import BaseCallback  # noqa: WPS433

    def evaluate(model) -> float:
        env = gym.make(ENV_ID)
        returns = []
        for episode in range(EVAL_EPISODES):
            obs, _ = env.reset(seed=seed + EVAL_SEED_OFFSET + episode)
            done, total = False, 0.0
            while not done:
                action, _ = model.predict(obs, deterministic=True)
                obs, reward, terminated, truncated, _ = env.step(action)
                total += float(reward)
                done = terminated or truncated
            returns.append(total)
        env.close()
        return float(np.mean(returns))

    class Checkpoints(BaseCallback):
        def __init__(self):
            super().__init__()
            self.next_at = checkpoint
            self.curve = []
            self.eval_seconds = 0.0
            self.eval_cpu = 0.0

        def _on_step(self) -> bool:
            if self.model.num_timesteps >= self.next_at:
                self.next_at += checkpoint
                start, cpu = time.perf_counter(), time.process_time()
                self.curve.append([int(self.model.num_timesteps), evaluate(self.model)])
                self.eval_seconds += time.perf_counter() - start
                self.eval_cpu += time.process_time() - cpu
            return True

    cls_name, kwargs = ALGOS[algo]
    cls = getattr(sbtf, cls_name)
    env = make_vec_env(ENV_ID, n_envs=N_ENVS, seed=seed)
    model = cls("MlpPolicy", env, verbose=0, seed=seed, n_cpu_tf_sess=threads, **kwargs)
    callback = Checkpoints()
    busy0, cpu0, wall0 = system_busy_seconds(), time.process_time(), time.perf_counter()
    model.learn(total_timesteps, callback=callback)
    wall = time.perf_counter() - wall0 - callback.eval_seconds
    cpu = time.process_time() - cpu0 - callback.eval_cpu
    busy1 = system_busy_seconds()
    final = evaluate(model)
    other = None
    if busy0 is not None and busy1 is not None:
        other = max(0.0, (busy1 - busy0 - (time.process_time() - cpu0)) / max(wall + callback.eval_seconds, 1e-9))
    return {"ok": True, "algo": algo, "seed": seed, "timesteps": int(model.num_timesteps),
            "learn_seconds": wall, "steps_per_s": model.num_timesteps / max(wall, 1e-9),
            "steps_per_cpu_s": model.num_timesteps / max(cpu, 1e-9),
            "cpu_use": cpu / max(wall, 1e-9), "other_load": other, "curve": callback.curve, "final_eval": final,
            "hyperparameters": {"n_envs": N_ENVS, **kwargs}, "versions": {"tensorflow": tf.__version__,
                                                                          "python": platform.python_version()}}


# ---------------------------------------------------------------------------------------------
# parent
# ---------------------------------------------------------------------------------------------
def _git_revision():
    try:
        rev = subprocess.run(["git", "-C", REPO_ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", REPO_ROOT, "status", "--porcelain", "--", "sbtf"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return (rev + ("+dirty(sbtf/)" if dirty else "")) if rev else None


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            match = re.search(r"^model name\s*:\s*(.+)$", handle.read(), re.MULTILINE)
            if match:
                return match.group(1).strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def launch(python: str, algo: str, seed: int, args) -> dict:
    env = dict(os.environ)
    env.update(thread_env(args.threads))
    env["PYTHONPATH"] = REPO_ROOT + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [python, os.path.abspath(__file__), "--worker", "--algo", algo, "--seed", str(seed), "--threads",
           str(args.threads), "--total-timesteps", str(args.total_timesteps), "--checkpoint", str(args.checkpoint)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {"ok": False, "algo": algo, "seed": seed, "error": f"timeout after {args.timeout} s"}
    for line in reversed(proc.stdout.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    tail = (proc.stderr or "").strip().splitlines()[-3:]
    return {"ok": False, "algo": algo, "seed": seed, "error": " | ".join(tail) or f"exit {proc.returncode}"}


def summarise(runs: list) -> dict:
    out = {}
    for algo in {r["algo"] for r in runs}:
        ok = [r for r in runs if r["algo"] == algo and r.get("ok")]
        if not ok:
            out[algo] = {"ok": 0}
            continue
        sps = [r["steps_per_s"] for r in ok]
        spc = [r["steps_per_cpu_s"] for r in ok]
        points = {}
        for r in ok:
            for step, reward in r["curve"]:
                points.setdefault(int(step), []).append(reward)
        out[algo] = {"ok": len(ok), "steps_per_s_median": statistics.median(sps), "steps_per_s_min": min(sps),
                     "steps_per_s_max": max(sps), "steps_per_cpu_s_median": statistics.median(spc),
                     "cpu_use": statistics.mean(r["cpu_use"] for r in ok),
                     "other_load_max": max((r["other_load"] or 0.0) for r in ok),
                     "learn_seconds": statistics.median(r["learn_seconds"] for r in ok),
                     "final_eval": statistics.mean(r["final_eval"] for r in ok),
                     "final_eval_std": statistics.pstdev([r["final_eval"] for r in ok]),
                     "curve": {step: statistics.mean(v) for step, v in sorted(points.items())}}
    return out


def render_section(result: dict) -> str:
    summary = result["summary"]
    algos = [a for a in result["algos"] if a in summary]
    a2c = summary.get("a2c", {}).get("steps_per_s_median")
    a2c_cpu = summary.get("a2c", {}).get("steps_per_cpu_s_median")
    lines = [BEGIN_MARK, "## On-policy family: ACER and ACKTR against sbtf's A2C (`onpolicy_family`)", "",
             "No stable-baselines3 equivalent of ACER or ACKTR exists, so they are measured against sbtf's own A2C: "
             f"`{ENV_ID}`, {N_ENVS} envs (DummyVecEnv of Monitor-wrapped envs), `MlpPolicy`, the RL-zoo "
             "hyperparameters of each algorithm (`ent_coef=0.0`, the rest at the stable-baselines 2 defaults: "
             "A2C constant lr 7e-4, ACER linear lr 7e-4 with replay ratio 4 and the trust region, ACKTR linear "
             "lr 0.25 with K-FAC), "
             f"`total_timesteps={result['total_timesteps']:,}`. Written by `benchmarks/onpolicy_family.py`; "
             "one fresh process per run, algorithms alternating within each seed, the same seeds for all.", "",
             "*learn steps/s*: `num_timesteps` / wall time of `learn()` without the checkpoint evaluations "
             "(tracing and XLA compilation included); *steps per CPU-s* divides by the process CPU time instead "
             "(less sensitive to other processes on a shared machine; 100 % CPU use = one core). *reward at "
             f"checkpoints*: mean return of {EVAL_EPISODES} deterministic episodes on a separate env, averaged "
             "over seeds.", "",
             "| algorithm | runs ok | learn steps/s (median) | min - max | vs A2C | steps per CPU-s | vs A2C (CPU) | "
             "learn s | CPU use | final eval (mean ± std over seeds) |", "|---|---|---|---|---|---|---|---|---|---|"]
    for algo in algos:
        s = summary[algo]
        if not s.get("ok"):
            lines.append(f"| {LABELS[algo]} | 0 | failed | | | | | | | |")
            continue
        ratio = f"{s['steps_per_s_median'] / a2c:.2f}x" if a2c else "n/a"
        ratio_cpu = f"{s['steps_per_cpu_s_median'] / a2c_cpu:.2f}x" if a2c_cpu else "n/a"
        lines.append(f"| {LABELS[algo]} | {s['ok']}/{len(result['seeds'])} | **{s['steps_per_s_median']:,.0f}** | "
                     f"{s['steps_per_s_min']:,.0f} - {s['steps_per_s_max']:,.0f} | {ratio} | "
                     f"{s['steps_per_cpu_s_median']:,.0f} | {ratio_cpu} | "
                     f"{s['learn_seconds']:.1f} | {100 * s['cpu_use']:.0f} % | "
                     f"{s['final_eval']:.1f} ± {s['final_eval_std']:.1f} |")
    steps = sorted({int(st) for a in algos for st in summary[a].get("curve", {})})
    if steps:
        lines += ["", "Reward at checkpoints (mean over seeds):", "",
                  "| algorithm | " + " | ".join(f"{st // 1000}k" for st in steps) + " |",
                  "|---|" + "---|" * len(steps)]
        for algo in algos:
            curve = {int(k): v for k, v in summary[algo].get("curve", {}).items()}
            lines.append(f"| {LABELS[algo]} | " + " | ".join(
                f"{curve[st]:.0f}" if st in curve else "" for st in steps) + " |")
    crowded = [a for a in algos if summary[a].get("ok") and summary[a]["other_load_max"] > 0.5]
    if crowded:
        lines += ["", f"**Warning: other processes kept up to "
                      f"{max(summary[a]['other_load_max'] for a in crowded):.2f} cores busy during some runs** "
                      "(machine shared): wall-clock steps/s are understated; the ratios are more reliable than the "
                      "absolute numbers."]
    failures = [r for r in result["runs"] if not r.get("ok")]
    for r in failures:
        lines.append(f"- failed: {LABELS.get(r['algo'], r['algo'])} seed {r['seed']}: {r.get('error')}")
    m = result["machine"]
    lines += ["", f"Last run: {m['date']} · `uname -m` {m['arch']} · {m['cpu']} · {m['cores']} cores · "
                  f"threads={result['threads']} · seeds {', '.join(map(str, result['seeds']))} · "
                  f"sbtf tree {m.get('git') or 'unknown'} · TF {m.get('tensorflow', '?')}.", "",
              "Raw runs: `benchmarks/results/onpolicy_family.json`.", "", END_MARK]
    return "\n".join(lines)


def update_docs(path: str, section: str) -> None:
    text = ""
    if os.path.exists(path):
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    pattern = re.compile(re.escape(BEGIN_MARK) + r".*?" + re.escape(END_MARK), re.DOTALL)
    if pattern.search(text):
        text = pattern.sub(lambda _m: section, text, count=1)
    else:
        text = (text.rstrip("\n") + "\n\n" if text else "# Benchmarks\n\n") + section + "\n"
    tmp = path + ".onpolicy.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text.rstrip("\n") + "\n")
    os.replace(tmp, path)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algos", default="a2c,acer,acktr")
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--total-timesteps", type=int, default=100_000)
    parser.add_argument("--checkpoint", type=int, default=10_000)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--timeout", type=int, default=3600)
    parser.add_argument("--python", default=os.environ.get("SBTF_PYTHON", sys.executable))
    parser.add_argument("--docs", default=DEFAULT_DOCS)
    parser.add_argument("--results", default=DEFAULT_RESULTS)
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument("--render-docs", action="store_true", help="rebuild the docs section from --results")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--algo", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker:
        try:
            result = run_worker(args.algo, args.seed, args.total_timesteps, args.checkpoint, args.threads)
        except Exception as exc:  # noqa: BLE001 (reported to the parent)
            print(json.dumps({"ok": False, "algo": args.algo, "seed": args.seed, "error": repr(exc)}))
            return 1
        print(json.dumps(result))
        return 0

    if args.render_docs:
        with open(args.results, encoding="utf-8") as handle:
            result = json.load(handle)
        update_docs(args.docs, render_section(result))
        return 0

    algos = [a.strip().lower() for a in args.algos.split(",") if a.strip()]
    unknown = [a for a in algos if a not in ALGOS]
    if unknown:
        parser.error(f"unknown algorithms {unknown}; choose from {sorted(ALGOS)}")
    seeds = [int(s) for s in args.seeds.split(",")]
    runs = []
    for seed in seeds:
        order = algos if seed % 2 == 0 else list(reversed(algos))  # alternate who goes first
        for algo in order:
            start = time.time()
            run = launch(args.python, algo, seed, args)
            runs.append(run)
            status = f"{run['steps_per_s']:,.0f} steps/s, final {run['final_eval']:.1f}" if run.get("ok") \
                else f"FAILED: {run.get('error')}"
            print(f"[{LABELS[algo]} seed {seed}] {status} ({time.time() - start:.0f} s)", flush=True)
    ok_runs = [r for r in runs if r.get("ok")]
    result = {"total_timesteps": args.total_timesteps, "checkpoint": args.checkpoint, "threads": args.threads,
              "seeds": seeds, "algos": algos, "runs": runs, "summary": summarise(runs),
              "machine": {"date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
                          "arch": platform.machine(), "cpu": _cpu_model(), "cores": os.cpu_count(),
                          "git": _git_revision(),
                          "tensorflow": ok_runs[0]["versions"]["tensorflow"] if ok_runs else None},
              "command": " ".join(sys.argv)}
    section = render_section(result)
    print(section)
    if not args.no_write:
        os.makedirs(os.path.dirname(args.results), exist_ok=True)
        tmp = args.results + ".tmp"
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump(result, handle, indent=1)
        os.replace(tmp, args.results)
        update_docs(args.docs, section)
    return 0 if len(ok_runs) == len(runs) else 1


if __name__ == "__main__":
    sys.exit(main())
