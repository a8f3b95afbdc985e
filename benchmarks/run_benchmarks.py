#!/usr/bin/env python3
"""Side-by-side benchmarks: sbtf (stable-baselines 2 API on TF2) against stable-baselines3.

    python benchmarks/run_benchmarks.py --list
    python benchmarks/run_benchmarks.py                          # every case, both libraries
    python benchmarks/run_benchmarks.py --cases ppo_cartpole_zoo,a2c_cartpole --repeats 3
    python benchmarks/run_benchmarks.py --libs sb3 --repeats 1  # one side only (no ratio)

Every run is a fresh ``benchmarks/worker.py`` process (``--sbtf-python`` for sbtf,
``--sb3-python`` for SB3), limited to ``--threads`` threads. For each case the runs
alternate between the libraries (sbtf, SB3, sbtf, SB3, ... with ``--first sbtf``),
repeat ``i`` of both libraries using seed ``seeds[i]``. What is timed is
``model.learn()`` alone; see ``benchmarks/README.md``.

Results: a markdown table on stdout, ``benchmarks/results/<case>.json`` (raw runs and
aggregates) and the case's section of ``docs/benchmarks.md`` (other sections are kept;
the summary at the top is rebuilt from all ``results/*.json``).

Only the standard library is used here, so any Python 3.9+ can run the harness.
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
WORKER = os.path.join(HERE, "worker.py")
DEFAULT_RESULTS_DIR = os.path.join(HERE, "results")
DEFAULT_DOCS = os.path.join(REPO_ROOT, "docs", "benchmarks.md")
DEFAULT_SB3_PYTHON = "/work/sb3venv/bin/python"

sys.path.insert(0, HERE)
import cases as case_registry  # noqa: E402  (stdlib-only registry beside this file)
from worker import system_busy_seconds, thread_env  # noqa: E402

CASES = case_registry.CASES
LIBS = case_registry.LIBS
LABEL = case_registry.LIB_LABELS


# ---------------------------------------------------------------------------------------------
# machine description
# ---------------------------------------------------------------------------------------------
def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            info = handle.read()
    except OSError:
        return platform.processor() or "unknown"
    for key in ("model name", "Model", "Hardware", "cpu model", "Processor"):
        match = re.search(rf"^{re.escape(key)}\s*:\s*(.+)$", info, re.MULTILINE)
        if match:
            return match.group(1).strip()
    return platform.processor() or "unknown"


def cpu_flags() -> frozenset | None:
    """The CPU's instruction-set flags (``/proc/cpuinfo``), or None where there is no such file or line."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            match = re.search(r"^flags\s*:\s*(.+)$", handle.read(), re.MULTILINE)
    except OSError:
        return None
    return frozenset(match.group(1).split()) if match else None


def cpu_vector_isa() -> str:
    """The widest vector instruction set of this CPU that the kernels use ("AVX-512", "AVX2", "no AVX2"), from
    ``/proc/cpuinfo``; "unknown" elsewhere. It moves the ratios more than anything else (docs/benchmarks.md, "On a
    CPU with AVX-512 the picture changes")."""
    flags = cpu_flags()
    if flags is None:
        return "unknown"
    return "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"


def git_revision() -> str | None:
    try:
        rev = subprocess.run(["git", "-C", REPO_ROOT, "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", REPO_ROOT, "status", "--porcelain", "--", "sbtf"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    if not rev:
        return None
    return rev + ("+dirty(sbtf/)" if dirty else "")


def machine_info(args, seeds) -> dict:
    info = {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": platform.machine(),
        "cpu_model": cpu_model(),
        "cpu_isa": cpu_vector_isa(),
        "cores": os.cpu_count(),
        "threads": args.threads,
        "repeats": len(seeds),
        "seeds": seeds,
        "first": args.first,
        "nice": args.nice,
        "libs": list(args.libs),
        "sbtf_python": args.sbtf_python,
        "sb3_python": args.sb3_python,
        "git_revision": git_revision(),
        "command": " ".join([os.path.relpath(sys.argv[0], REPO_ROOT)] + sys.argv[1:]),
    }
    try:
        info["load_average_at_start"] = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        pass
    blas_env = {k: os.environ[k] for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if k in os.environ}
    if blas_env:
        info["blas_env"] = blas_env
    return info


# ---------------------------------------------------------------------------------------------
# running
# ---------------------------------------------------------------------------------------------
def worker_env(lib: str, threads: int) -> dict:
    env = dict(os.environ)
    env.update(thread_env(threads))
    env["PYTHONUNBUFFERED"] = "1"
    env["CUDA_VISIBLE_DEVICES"] = ""  # CPU against CPU: SB3 gets device="cpu", TF must not take a GPU either
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if lib == "sbtf":
        # The sbtf of this work tree, whatever is installed in the interpreter.
        env["PYTHONPATH"] = os.pathsep.join(p for p in (REPO_ROOT, env.get("PYTHONPATH")) if p)
    return env


def _prioritise(nice: int):
    """``preexec_fn`` for the worker: raise (or lower) its scheduling priority by ``nice``.

    With autogroup scheduling (Linux's default for desktop-like set-ups, and the case here), a nice
    value only ranks a process against others of its own session; so the worker gets a session, hence
    an autogroup, of its own, and that autogroup gets the nice value too.
    """
    def apply():
        os.setsid()
        try:
            with open("/proc/self/autogroup", "w", encoding="ascii") as handle:
                handle.write(str(nice))
        except OSError:
            pass
        os.nice(nice)
    return apply


def run_worker(lib: str, python: str, case: str, seed: int, threads: int, timeout: float,
               total_timesteps: int | None, nice: int = 0) -> dict:
    cmd = [python, WORKER, "--lib", lib, "--case", case, "--seed", str(seed), "--threads", str(threads)]
    if total_timesteps:
        cmd += ["--total-timesteps", str(total_timesteps)]
    started = time.perf_counter()
    try:
        proc = subprocess.run(cmd, env=worker_env(lib, threads), cwd=REPO_ROOT, capture_output=True, text=True,
                              timeout=timeout, preexec_fn=_prioritise(nice) if nice else None)
    except subprocess.TimeoutExpired:
        return {"ok": False, "lib": lib, "case": case, "seed": seed, "error": f"timed out after {timeout:.0f} s"}
    except OSError as exc:
        return {"ok": False, "lib": lib, "case": case, "seed": seed, "error": f"cannot start {python}: {exc}"}
    result = None
    for line in reversed(proc.stdout.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                result = json.loads(line)
                break
            except json.JSONDecodeError:
                continue
    if result is None:
        result = {"ok": False, "lib": lib, "case": case, "seed": seed,
                  "error": f"worker exited with status {proc.returncode} without a result line"}
    if not result.get("ok"):
        result["stderr_tail"] = proc.stderr[-3000:]
    result["process_seconds"] = time.perf_counter() - started
    return result


def busy_cores(sample_seconds: float = 2.0):
    """How many cores the whole machine keeps busy, averaged over ``sample_seconds``."""
    before = system_busy_seconds()
    time.sleep(sample_seconds)
    after = system_busy_seconds()
    if before is None or after is None:
        return None
    return (after - before) / sample_seconds


def wait_until_quiet(threads: int, max_wait: float):
    """Wait (at most ``max_wait`` s) until other processes leave ``threads`` cores free (with 0.5 to spare)."""
    cores = os.cpu_count() or 1
    limit = max(0.0, cores - threads - 0.5)
    started = time.perf_counter()
    busy = busy_cores()
    while busy is not None and busy > limit and time.perf_counter() - started < max_wait:
        busy = busy_cores(5.0)
    return {"busy_cores_before": busy, "waited_seconds": time.perf_counter() - started}


def run_case(name: str, args, seeds) -> list:
    order = [args.first] + [lib for lib in LIBS if lib != args.first]
    order = [lib for lib in order if lib in args.libs]
    pythons = {"sbtf": args.sbtf_python, "sb3": args.sb3_python}
    failed: dict[str, str] = {}
    runs = []
    for repeat, seed in enumerate(seeds):
        for lib in order:
            if lib in failed:
                runs.append({"ok": False, "lib": lib, "case": name, "seed": seed, "repeat": repeat,
                             "error": f"skipped: an earlier run failed ({failed[lib]})"})
                continue
            quiet = wait_until_quiet(args.threads, args.wait_idle) if args.wait_idle > 0 else None
            print(f"[{name}] repeat {repeat + 1}/{len(seeds)} {LABEL[lib]:<4} seed {seed} ... ", end="",
                  file=sys.stderr, flush=True)
            result = run_worker(lib, pythons[lib], name, seed, args.threads, args.timeout, args.total_timesteps,
                                args.nice)
            result["repeat"] = repeat
            if quiet is not None:
                result["before_run"] = quiet
            runs.append(result)
            if result.get("ok"):
                steady = result.get("steady_steps_per_s")
                print(f"{result['steps_per_s']:.0f} steps/s ({result['learn_seconds']:.1f} s learn"
                      + (f", {steady:.0f} steps/s after the first update at {result['first_update_seconds']:.1f} s"
                      if steady else "")
                      + f"; load {result.get('load_average_1m')}), eval {result.get('eval_mean', float('nan')):.1f}",
                      file=sys.stderr, flush=True)
            else:
                failed[lib] = result["error"]
                print(f"FAILED: {result['error']}", file=sys.stderr, flush=True)
    return runs


# ---------------------------------------------------------------------------------------------
# aggregation
# ---------------------------------------------------------------------------------------------
def aggregate(runs: list, lib: str) -> dict | None:
    mine = [r for r in runs if r.get("lib") == lib]
    if not mine:
        return None
    ok = [r for r in mine if r.get("ok")]
    agg: dict = {"runs": len(mine), "ok_runs": len(ok)}
    if not ok:
        agg["error"] = mine[0].get("error", "failed")
        return agg
    steps = [r["steps_per_s"] for r in ok]
    evals = [r["eval_mean"] for r in ok if "eval_mean" in r]

    def median_of(key):
        values = [r[key] for r in ok if r.get(key) is not None]
        return statistics.median(values) if values else None

    agg.update({
        "steps_per_s_median": statistics.median(steps),
        "steps_per_s_mean": statistics.fmean(steps),
        "steps_per_s_min": min(steps),
        "steps_per_s_max": max(steps),
        "steps_per_s_all": steps,
        "learn_seconds_median": statistics.median(r["learn_seconds"] for r in ok),
        "timesteps": sorted({r["timesteps"] for r in ok}),
        "eval_mean": statistics.fmean(evals) if evals else None,
        "eval_std_over_seeds": statistics.pstdev(evals) if len(evals) > 1 else 0.0,
        "eval_mean_per_seed": {str(r["seed"]): r["eval_mean"] for r in ok if "eval_mean" in r},
        "first_update_seconds_median": median_of("first_update_seconds"),
        "steady_steps_per_s_median": median_of("steady_steps_per_s"),
        "load_average_1m_max": max((max(r["load_average_1m"]) for r in ok if r.get("load_average_1m")),
                                   default=None),
        "eval_predict_per_s_median": median_of("eval_predict_per_s"),
        "learn_cpu_utilisation_median": median_of("learn_cpu_utilisation"),
        "learn_cpu_utilisation_min": min(r["learn_cpu_utilisation"] for r in ok),
        "steps_per_cpu_s_median": median_of("steps_per_cpu_s"),
        "others_busy_cores_max": max((r["others_busy_cores"] for r in ok if r.get("others_busy_cores") is not None),
                                     default=None),
        "construct_seconds_median": median_of("construct_seconds"),
        "versions": ok[0].get("versions", {}),
        "threads_in_effect": ok[0].get("threads_in_effect", {}),
    })
    if len(ok) < len(mine):
        agg["error"] = next(r["error"] for r in mine if not r.get("ok"))
    return agg


def summarise(runs: list) -> dict:
    summary = {lib: aggregate(runs, lib) for lib in LIBS}
    sbtf, sb3 = summary["sbtf"], summary["sb3"]
    if sbtf and sb3 and "steps_per_s_median" in sbtf and "steps_per_s_median" in sb3:
        summary["speed_ratio_sbtf_over_sb3"] = sbtf["steps_per_s_median"] / sb3["steps_per_s_median"]
        for key, name in (("steady_steps_per_s_median", "steady_speed_ratio_sbtf_over_sb3"),
                          ("steps_per_cpu_s_median", "cpu_speed_ratio_sbtf_over_sb3"),
                          ("first_update_seconds_median", "first_update_ratio_sbtf_over_sb3")):
            if sbtf.get(key) and sb3.get(key):
                summary[name] = sbtf[key] / sb3[key]
    else:
        summary["speed_ratio_sbtf_over_sb3"] = None
    return summary


# ---------------------------------------------------------------------------------------------
# markdown
# ---------------------------------------------------------------------------------------------
def _num(x, digits=0) -> str:
    return "n/a" if x is None else f"{x:,.{digits}f}"


def _versions_line(versions: dict, lib: str) -> str:
    keys = {"sbtf": ("sbtf", "tensorflow", "keras", "tensorflow_probability", "gymnasium", "numpy", "python"),
            "sb3": ("stable_baselines3", "sb3_contrib", "torch", "gymnasium", "numpy", "python")}[lib]
    return ", ".join(f"{k} {versions[k]}" for k in keys if k in versions)


def results_table(result: dict) -> str:
    summary = result["summary"]
    lines = [
        "| library | runs ok | learn steps/s (median) | min - max | steps per CPU-s | learn s (median) | timesteps | "
        "eval reward, mean ± std over seeds | predict/s in eval | CPU use in learn | other load (cores, max) | "
        "first update at (s) | steps/s after it | load average (1 min, max) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    empty = " |" * 12
    for lib in LIBS:
        agg = summary.get(lib)
        if agg is None:
            lines.append(f"| {LABEL[lib]} | not run |{empty}")
            continue
        if "steps_per_s_median" not in agg:
            err = agg.get("error", "failed").replace("|", "\\|").splitlines()[0][:160]
            lines.append(f"| {LABEL[lib]} | 0/{agg['runs']} | failed: {err} |" + " |" * 11)
            continue
        lines.append(
            f"| {LABEL[lib]} | {agg['ok_runs']}/{agg['runs']} | **{_num(agg['steps_per_s_median'])}** | "
            f"{_num(agg['steps_per_s_min'])} - {_num(agg['steps_per_s_max'])} | "
            f"{_num(agg['steps_per_cpu_s_median'])} | "
            f"{_num(agg['learn_seconds_median'], 1)} | {', '.join(f'{t:,}' for t in agg['timesteps'])} | "
            f"{_num(agg.get('eval_mean'), 1)} ± {_num(agg['eval_std_over_seeds'], 1)} | "
            f"{_num(agg.get('eval_predict_per_s_median'))} | {_num(agg['learn_cpu_utilisation_median'] * 100)} % | "
            f"{_num(agg['others_busy_cores_max'], 2)} | {_num(agg.get('first_update_seconds_median'), 1)} | "
            f"{_num(agg.get('steady_steps_per_s_median'))} | {_num(agg.get('load_average_1m_max'), 1)} |"
        )
    ratio = summary.get("speed_ratio_sbtf_over_sb3")
    lines.append("")
    if ratio is None:
        lines.append("**sbtf/SB3 speed ratio: n/a** (both libraries must succeed in the same run of the harness).")
    else:
        verdict = "sbtf faster" if ratio >= 1 else "sbtf slower"
        lines.append(f"**sbtf/SB3 speed ratio: {ratio:.2f}** (median learn steps/s; {verdict}).")
        extra = [f"{label} {summary[key]:.2f}" for key, label in (
            ("steady_speed_ratio_sbtf_over_sb3", "after the first update"),
            ("cpu_speed_ratio_sbtf_over_sb3", "per CPU-second"),
            ("first_update_ratio_sbtf_over_sb3", "time to the first update (below 1: sbtf sooner)"))
            if summary.get(key)]
        if extra:
            lines.append("Other sbtf/SB3 ratios: " + "; ".join(extra) + ".")
    warning = contention_warning(result)
    if warning:
        lines += ["", warning]
    return "\n".join(lines)


def contention_warning(result: dict) -> str | None:
    """Say so when other processes competed for the CPU during some runs."""
    threads = result["meta"]["threads"]
    cores = result["meta"].get("cores") or 1
    spare = max(0.0, cores - threads)
    bad = []
    for run in result["runs"]:
        if not run.get("ok"):
            continue
        # With one thread, CPU use under 90 % means the run was descheduled; with more, a run may
        # simply not keep all its threads busy, so only the other processes' load is telling.
        starved = threads == 1 and run["learn_cpu_utilisation"] < 0.9
        crowded = (run.get("others_busy_cores") or 0.0) > spare + 0.25  # more demand than free cores
        if starved or crowded:
            others = run.get("others_busy_cores")
            bad.append(f"{LABEL[run['lib']]} seed {run['seed']} (CPU use {run['learn_cpu_utilisation']:.0%}, "
                       f"other load {'n/a' if others is None else f'{others:.2f}'} cores)")
    if not bad:
        return None
    return ("**Warning: other processes competed for the CPU during " + "; ".join(bad) + ".** Wall-clock "
            "steps/s of these runs are understated; steps per CPU-s are less affected. Rerun on a quiet machine "
            "(or with `--wait-idle`).")


def meta_line(meta: dict) -> str:
    parts = [
        meta["date"].replace("T", " ").replace("+00:00", " UTC"),
        f"`uname -m` {meta['machine']}",
        meta["cpu_model"] + (f" ({meta['cpu_isa']})" if meta.get("cpu_isa") else ""),
        f"{meta['cores']} cores",
        f"threads={meta['threads']}",
        f"seeds {', '.join(str(s) for s in meta['seeds'])}",
        f"order: {meta['first']} first, alternating",
    ]
    if meta.get("nice"):
        parts.append(f"workers at nice {meta['nice']}")
    if meta.get("git_revision"):
        parts.append(f"sbtf tree {meta['git_revision']}")
    if meta.get("load_average_at_start") is not None:
        parts.append(f"load average at start {meta['load_average_at_start'][0]}")
    if meta.get("total_timesteps_override"):
        parts.append(f"**total_timesteps overridden to {meta['total_timesteps_override']:,}**")
    return " · ".join(parts)


def case_section(case, result: dict | None) -> str:
    out = [f"<!-- BEGIN CASE {case.name} -->", f"## `{case.name}`", "", case.description, ""]
    out += [
        f"Env `{case.env_id}`, {case.n_envs} env{'s' if case.n_envs > 1 else ''} "
        f"({'SubprocVecEnv' if case.vec_env == 'subproc' else 'DummyVecEnv'}"
        f"{'; each library`s make_atari_env + VecFrameStack(4)' if case.atari else ''}), "
        f"`total_timesteps={case.total_timesteps:,}`, evaluation: "
        + (f"{case.eval_episodes} deterministic episodes on a separate env." if case.eval_episodes
           else "none (speed only)."),
        "",
        "| | constructor call (plus `verbose=0, seed=<seed>`; SB3 `device=\"cpu\"`, sbtf `n_cpu_tf_sess=<threads>`) |",
        "|---|---|",
        f"| sbtf | `{case.sbtf.call_string('sbtf')}` |",
        f"| SB3 | `{case.sb3.call_string('sb3')}` |",
        "",
    ]
    if case.notes:
        out += ["Differences that remain:", ""] + [f"- {note}" for note in case.notes] + [""]
    if result is None:
        out += [f"Not measured yet: `python benchmarks/run_benchmarks.py --cases {case.name}`.", ""]
    else:
        meta = result["meta"]
        out += [f"Last run: {meta_line(meta)}.", ""]
        for lib in LIBS:
            agg = result["summary"].get(lib)
            if agg and agg.get("versions"):
                out.append(f"- {LABEL[lib]}: {_versions_line(agg['versions'], lib)}")
        out += ["", results_table(result), "", f"Raw runs: `benchmarks/results/{case.name}.json`.", ""]
    out.append(f"<!-- END CASE {case.name} -->")
    return "\n".join(out)


def summary_section(all_results: dict) -> str:
    out = [
        "<!-- BEGIN SUMMARY -->",
        "## Summary",
        "",
        "Rebuilt from `benchmarks/results/*.json` on every run of the harness. Steps/s are medians of "
        "`learn()` throughput over the seeds; the ratio is sbtf/SB3 (above 1: sbtf is faster).",
        "",
        "| case | sbtf steps/s | SB3 steps/s | sbtf/SB3 | sbtf eval | SB3 eval | measured |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, _case in CASES.items():
        result = all_results.get(name)
        if result is None:
            out.append(f"| `{name}` | | | | | | not yet |")
            continue
        cells = []
        for lib in LIBS:
            agg = result["summary"].get(lib)
            cells.append(_num(agg.get("steps_per_s_median")) if agg and "steps_per_s_median" in agg
                         else ("failed" if agg else "not run"))
        ratio = result["summary"].get("speed_ratio_sbtf_over_sb3")
        evals = []
        for lib in LIBS:
            agg = result["summary"].get(lib)
            evals.append(_num(agg.get("eval_mean"), 1) if agg and "eval_mean" in agg else "")
        date = result["meta"]["date"][:10]
        out.append(f"| `{name}` | {cells[0]} | {cells[1]} | {'n/a' if ratio is None else f'{ratio:.2f}'} | "
                   f"{evals[0]} | {evals[1]} | {date}"
                   f"{', ' + result['meta']['cpu_isa'] if result['meta'].get('cpu_isa') else ''}, "
                   f"threads={result['meta']['threads']}, "
                   f"{result['meta']['repeats']} seed(s) |")
    out.append("<!-- END SUMMARY -->")
    return "\n".join(out)


DOC_HEADER = """# Benchmarks: sbtf against stable-baselines3

sbtf must be at least as fast as stable-baselines3 (SB3, PyTorch) with the same hyperparameters.
This page is written by `benchmarks/run_benchmarks.py` (see `benchmarks/README.md` for set-up and
method): each case below has its own section, rewritten when that case is run, and the summary is
rebuilt from the raw results in `benchmarks/results/`.

How the numbers are made, in short:

- every run is a fresh process; sbtf and SB3 runs alternate, with the same seeds and the same
  hyperparameters (mapped to stable-baselines 2 names for sbtf);
- both sides are limited to the same number of threads (`OMP_NUM_THREADS`, `MKL_NUM_THREADS`,
  `torch.set_num_threads`, `tf.config.threading` intra/inter-op);
- *learn steps/s* is the model's `num_timesteps` after `learn()` divided by the wall time of
  `learn()` alone (imports, env and model construction are not timed; TF tracing inside `learn()` is);
- *eval reward* is the mean return of 10 deterministic episodes on a separate env, averaged over seeds;
  *predict/s* is the single-observation `predict()` rate during that evaluation (env time included);
- *steps per CPU-s* divides by the process CPU time of `learn()` instead of its wall time;
  *CPU use* is that CPU time over the wall time (100 % = one core busy); *other load* is how many
  cores other processes kept busy meanwhile (from `/proc/stat`). A table says so when other
  processes competed for the CPU: its wall-clock numbers are then understated.
"""


def update_docs(path: str, ran: dict, all_results: dict) -> None:
    if os.path.exists(path):
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    else:
        text = DOC_HEADER
    summary = summary_section(all_results)
    summary_re = re.compile(r"<!-- BEGIN SUMMARY -->.*?<!-- END SUMMARY -->", re.DOTALL)
    if summary_re.search(text):
        text = summary_re.sub(lambda _m: summary, text, count=1)
    else:
        text = text.rstrip("\n") + "\n\n" + summary + "\n"
    for name, case in CASES.items():
        section_re = re.compile(rf"<!-- BEGIN CASE {re.escape(name)} -->.*?<!-- END CASE {re.escape(name)} -->",
                                re.DOTALL)
        present = section_re.search(text) is not None
        if name in ran:
            section = case_section(case, ran[name])
        elif not present:
            section = case_section(case, all_results.get(name))
        else:
            continue  # keep the section of a case that was not run
        if present:
            text = section_re.sub(lambda _m, section=section: section, text, count=1)
        else:
            text = text.rstrip("\n") + "\n\n" + section + "\n"
    tmp = path + ".tmp"
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text.rstrip("\n") + "\n")
    os.replace(tmp, path)


def load_all_results(results_dir: str) -> dict:
    found = {}
    for name in CASES:
        path = os.path.join(results_dir, f"{name}.json")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as handle:
                result = json.load(handle)
            result["summary"] = summarise(result["runs"])  # recomputed: files written by older harnesses
            found[name] = result
    return found


# ---------------------------------------------------------------------------------------------
# command line
# ---------------------------------------------------------------------------------------------
def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    parser.add_argument("--cases", default="all",
                        help="comma-separated case names, or 'all' (default); see --list")
    parser.add_argument("--repeats", type=int, default=2, help="runs per library and case (default 2)")
    parser.add_argument("--seeds", default=None,
                        help="comma-separated seeds, one per repeat (default 0..repeats-1)")
    parser.add_argument("--threads", type=int, default=1,
                        help="threads per run, both libraries (default 1; 0: each library's default thread pools, "
                             "results in results/threads-default/)")
    parser.add_argument("--libs", default="sbtf,sb3", help="which sides to run: sbtf,sb3 (default both)")
    parser.add_argument("--first", choices=LIBS, default="sbtf", help="which library runs first in each pair")
    parser.add_argument("--sbtf-python", default=os.environ.get("SBTF_PYTHON", sys.executable),
                        help="interpreter with sbtf's dependencies (default: this one, or $SBTF_PYTHON)")
    parser.add_argument("--sb3-python", default=os.environ.get("SB3_PYTHON", DEFAULT_SB3_PYTHON),
                        help=f"interpreter with stable-baselines3 (default: $SB3_PYTHON or {DEFAULT_SB3_PYTHON})")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds allowed per run (default 3600)")
    parser.add_argument("--nice", type=int, default=0, metavar="N",
                        help="run the workers at this niceness (negative: higher priority, needs root); "
                             "for a machine that others are using meanwhile")
    parser.add_argument("--wait-idle", type=float, default=0.0, metavar="SECONDS",
                        help="before each run, wait up to SECONDS for other processes to leave the run's "
                             "threads (plus half a core) free; default 0: do not wait")
    parser.add_argument("--total-timesteps", type=int, default=None,
                        help="override every case's total_timesteps (smoke test; nothing is written)")
    parser.add_argument("--results-dir", default=DEFAULT_RESULTS_DIR)
    parser.add_argument("--docs", default=DEFAULT_DOCS, help="markdown page to update (default docs/benchmarks.md)")
    parser.add_argument("--no-write", action="store_true", help="print only; write neither results nor docs")
    parser.add_argument("--render-docs", action="store_true",
                        help="rebuild every section of the docs page from results/*.json, run nothing")
    args = parser.parse_args(argv)

    args.libs = [lib.strip() for lib in args.libs.split(",") if lib.strip()]
    bad = [lib for lib in args.libs if lib not in LIBS]
    if bad or not args.libs:
        parser.error(f"--libs takes a comma-separated subset of {', '.join(LIBS)}")
    if args.cases.strip() == "all":
        args.case_names = list(CASES)
    else:
        args.case_names = [c.strip() for c in args.cases.split(",") if c.strip()]
        unknown = [c for c in args.case_names if c not in CASES]
        if unknown:
            parser.error(f"unknown case(s): {', '.join(unknown)}; known: {', '.join(CASES)}")
    if args.seeds:
        args.seed_list = [int(s) for s in args.seeds.split(",") if s.strip()]
    else:
        if args.repeats < 1:
            parser.error("--repeats must be at least 1")
        args.seed_list = list(range(args.repeats))
    if args.threads < 0:
        parser.error("--threads must be 0 (the libraries' defaults) or more")
    if args.threads != 1 and args.results_dir == DEFAULT_RESULTS_DIR:
        # the docs page shows the 1-thread results; other thread settings keep their own folder
        args.results_dir = os.path.join(DEFAULT_RESULTS_DIR, f"threads-{args.threads or 'default'}")
        if args.docs == DEFAULT_DOCS:
            args.docs = os.path.join(args.results_dir, "benchmarks.md")
    return args


def print_list() -> None:
    width = max(len(name) for name in CASES)
    for name, case in CASES.items():
        print(f"{name:<{width}}  {case.env_id:<12} n_envs={case.n_envs:<2} steps={case.total_timesteps:>7,}  "
              f"sbtf {case.sbtf.module_name('sbtf')}.{case.sbtf.algo} vs "
              f"SB3 {case.sb3.module_name('sb3')}.{case.sb3.algo}")


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.list:
        print_list()
        return 0
    if args.render_docs:
        all_results = load_all_results(args.results_dir)
        update_docs(args.docs, all_results, all_results)
        print(f"rewrote {os.path.relpath(args.docs)} from {len(all_results)} result file(s)")
        return 0

    seeds = args.seed_list
    write = not args.no_write and not args.total_timesteps
    ran: dict = {}
    all_ok = True
    for name in args.case_names:
        meta = machine_info(args, seeds)
        if args.total_timesteps:
            meta["total_timesteps_override"] = args.total_timesteps
        runs = run_case(name, args, seeds)
        result = {"case": name, "meta": meta, "spec": CASES[name].to_dict(), "summary": summarise(runs),
                  "runs": runs}
        all_ok = all_ok and all(r.get("ok") for r in runs)
        ran[name] = result
        print(f"\n### {name}\n\n{meta_line(meta)}\n\n{results_table(result)}\n", flush=True)
        if write:
            os.makedirs(args.results_dir, exist_ok=True)
            path = os.path.join(args.results_dir, f"{name}.json")
            with open(path + ".tmp", "w", encoding="utf-8") as handle:
                json.dump(result, handle, indent=2)
                handle.write("\n")
            os.replace(path + ".tmp", path)
            # Rewrite the docs after every case, so an interrupted session keeps what it measured.
            update_docs(args.docs, {name: result}, load_all_results(args.results_dir))
    if write:
        print(f"wrote {os.path.relpath(args.docs)} and {len(ran)} file(s) in {os.path.relpath(args.results_dir)}/")
    elif args.total_timesteps:
        print("total_timesteps was overridden: nothing written")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
