"""Child process of tests/test_hostile_files.py and tests/test_fuzz_files.py: opens files with sbtf's public loaders
under time and memory guards and reports one JSON line per file.

``python tests/hostile_runner.py SPEC.json``. SPEC::

    {"goods": {name: {"loader": ..., "path": ...}},    # good files: loaded first, they give the references
     "cases": [{"name", "loader", "path", "ref", "after", "args"}, ...],
     "final": [good names],                             # loaded again at the end: must act exactly as at the start
     "canaries": [paths],                               # files a hostile file's command would create
     "as_headroom_mb": 3072, "hang_seconds": 30}

Loaders (``loader`` strings): ``model:<Algo>`` (``<Algo>.load(path)``), ``model_trusted:<Algo>`` (the same with
``allow_pickle=True``), ``params:<good>`` (``good_model.load_parameters(path)``), ``vecnorm:<env id>``
(``VecNormalize.load(path, venv)``), ``running_average:<env id>`` (``VecNormalize(venv).load_running_average(folder)``),
``expert`` (``ExpertDataset(expert_path=path)`` and one training batch), ``buffer`` (``load_buffer(path)``),
``replay_buffer:<good>`` (``good_model.load_replay_buffer(path)``).

Output (stdout carries only these JSON lines; everything the library prints goes to stderr):

* ``{"event": "ready", "baseline": {...}}`` once the goods are loaded and the limits set;
* ``{"event": "start", "name": ...}`` before each case (so the parent can name the file a crash or hang happened on);
* ``{"event": "result", "name", "outcome", "seconds", "rss_growth_mb", "warnings", "detail", "after", "canary"}``:
  ``outcome`` is ``loaded``, ``typed:<ErrorClass>`` (a ``ModelFileError``), ``untyped:<ErrorClass>``, ``memory:<...>``
  (``MemoryError``) or ``wrong`` (it loaded, but the result is not what the file holds: other predictions than the
  good file it was made from, a model that cannot act, a data key assigned over a method). ``seconds`` is the load
  call itself; ``rss_growth_mb`` the growth of the peak RSS during it; ``after`` the goods re-checked after it;
* ``{"event": "final", "results": {good: "ok" | what changed}}``.

Guards (the choices, measured on the 2-core test machine):

* memory: TensorFlow maps ~3.5 GB of address space when it is imported (VmSize; RSS ~0.85 GB), so the usual "3 GB
  RLIMIT_AS" cannot be set before the import. The runner imports everything and loads the good files first, then
  sets ``RLIMIT_AS`` to the address space in use plus ``as_headroom_mb`` (3 GiB): an allocation of more than ~3 GB
  fails with ``MemoryError`` (reported as ``memory:...``) instead of taking the machine. ``MALLOC_ARENA_MAX=2``
  (set by the parent) keeps glibc from reserving 64 MB arenas per thread inside that headroom.
  The *measurement* is the peak RSS: ``/proc/self/clear_refs`` is reset before each case (Linux), so
  ``ru_maxrss`` after the case minus ``ru_maxrss`` before it is that case's own peak growth; where the reset is not
  available the difference of the process-wide peaks is reported (it can only under-count).
* time: ``faulthandler.dump_traceback_later(hang_seconds, exit=True)`` around each case ends the process (exit code 1,
  "Timeout" and the stack on stderr) if one load hangs, even inside C code; the parent also has a wall-clock timeout.
* crashes: ``faulthandler.enable()`` prints the stack of a fatal signal to stderr; the parent sees the signal.
"""
from __future__ import annotations

import faulthandler
import gc
import json
import os
import resource
import sys
import time
import traceback
import warnings
from typing import Any, Callable, Dict, List, Optional, TextIO

MB = 1 << 20
_T0 = time.perf_counter()


def _status_kb(field: str) -> Optional[int]:
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _reset_peak_rss() -> bool:
    """Reset this process's peak RSS (Linux ``clear_refs`` 5); False when not possible."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as handle:
            handle.write("5")
        return True
    except OSError:
        return False


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


class WrongLoad(Exception):
    """The file loaded, but what it gave is not right (reported as outcome ``wrong``)."""


class Runner:
    """Opens goods and cases in this process (see the module docstring)."""

    def __init__(self, spec: Dict[str, Any], report: TextIO):
        self.spec = spec
        self.report = report
        self.hang_seconds = float(spec.get("hang_seconds", 30))
        self.canaries: List[str] = list(spec.get("canaries", []))
        import numpy as np
        import gymnasium as gym

        import sbtf
        from sbtf.common.buffers import load_buffer
        from sbtf.common.file_errors import ModelFileError
        from sbtf.common.vec_env import DummyVecEnv, VecNormalize
        from sbtf.gail import ExpertDataset

        self.np, self.gym, self.sbtf = np, gym, sbtf
        self.load_buffer, self.ModelFileError = load_buffer, ModelFileError
        self.DummyVecEnv, self.VecNormalize, self.ExpertDataset = DummyVecEnv, VecNormalize, ExpertDataset
        self.venvs: Dict[str, Any] = {}
        self.models: Dict[str, Any] = {}        # good name -> loaded model (targets of params:/replay_buffer:)
        self.weights: Dict[str, Any] = {}       # good name -> its parameters (to restore a target after a case)
        self.reference: Dict[str, Any] = {}     # good name -> what the good file gives (predictions, statistics)
        self.observations: Dict[str, Any] = {}  # good name -> the observations its predictions are made on
        self.count = 0

    # ------------------------------------------------------------------ opening
    def venv(self, env_id: str) -> Any:
        if env_id not in self.venvs:
            self.venvs[env_id] = self.DummyVecEnv([lambda: self.gym.make(env_id)])
        return self.venvs[env_id]

    def open(self, loader: str, path: str) -> Any:
        """The load call itself (what is timed)."""
        kind, _, arg = loader.partition(":")
        if kind == "model":
            return getattr(self.sbtf, arg).load(path)
        if kind == "model_trusted":
            return getattr(self.sbtf, arg).load(path, allow_pickle=True)
        if kind == "params":
            model = self.models[arg]
            model.load_parameters(path)
            return model
        if kind == "vecnorm":
            return self.VecNormalize.load(path, self.venv(arg))
        if kind == "running_average":
            wrapper = self.VecNormalize(self.venv(arg), training=False)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                wrapper.load_running_average(path)
            return wrapper
        if kind == "expert":
            dataset = self.ExpertDataset(expert_path=path, batch_size=4, verbose=0, sequential_preprocessing=True)
            dataset.get_next_batch("train")
            return dataset
        if kind == "buffer":
            return self.load_buffer(path)
        if kind == "replay_buffer":
            model = self.models[arg]
            model.load_replay_buffer(path)
            return model.replay_buffer
        raise ValueError(f"unknown loader {loader!r}")

    # ------------------------------------------------------------------ what a loaded object gives
    def fingerprint(self, loader: str, obj: Any, observations: Any = None) -> Any:
        """What a loaded object gives, to compare with a good file's (predictions, statistics, sizes)."""
        np = self.np
        kind = loader.partition(":")[0]
        if kind in ("model", "model_trusted", "params"):
            if observations is None:
                observations = self.sample_observations(obj.observation_space)
            actions = [np.asarray(obj.predict(obs, deterministic=True)[0]) for obs in observations]
            return ("actions", [a.tolist() for a in actions])
        if kind in ("vecnorm", "running_average"):
            return ("stats", [np.asarray(obj.obs_rms.mean).tolist(), np.asarray(obj.obs_rms.var).tolist(),
                              float(obj.obs_rms.count), np.asarray(obj.ret_rms.var).tolist()])
        if kind == "expert":
            return ("expert", [int(len(obj.observations)), int(obj.num_traj)])
        if kind in ("buffer", "replay_buffer"):
            return ("buffer", [int(len(obj)), int(obj.buffer_size)])
        return None

    def sample_observations(self, space: Any) -> list:
        space.seed(0)
        return [space.sample() for _ in range(4)]

    def can_act(self, loader: str, obj: Any) -> None:
        """A loaded object must work (no reference to compare with): raise WrongLoad otherwise."""
        np = self.np
        kind = loader.partition(":")[0]
        try:
            if kind in ("model", "model_trusted", "params"):
                obs = self.sample_observations(obj.observation_space)[0]
                action = np.asarray(obj.predict(obs, deterministic=True)[0])
                space = obj.action_space
                if isinstance(space, self.gym.spaces.Discrete):
                    if action.size != 1 or not space.contains(int(action.reshape(-1)[0])):
                        raise WrongLoad(f"action {action!r} is not in the action space {space}")
                elif isinstance(space, self.gym.spaces.Box) and action.shape != space.shape:
                    raise WrongLoad(f"action of shape {action.shape} for the action space {space}")
            elif kind in ("vecnorm", "running_average"):
                shape = obj.obs_rms.mean.shape
                out = obj.normalize_obs(np.zeros((1,) + tuple(shape), dtype=np.float32))
                if np.shape(out) != (1,) + tuple(shape):
                    raise WrongLoad(f"normalize_obs gave shape {np.shape(out)}")
            elif kind in ("buffer", "replay_buffer"):
                if len(obj) > 0:
                    obj.sample(2)
        except WrongLoad:
            raise
        except Exception as exc:  # noqa: BLE001 - a loaded object that cannot work is a wrong load
            raise WrongLoad(f"it loaded but cannot work: {type(exc).__name__}: {str(exc)[:200]}") from exc

    def check(self, case: Dict[str, Any], obj: Any) -> None:
        """Raise WrongLoad when a loaded case is not what it should be."""
        loader, ref, args = case["loader"], case.get("ref"), case.get("args") or {}
        for key in args.get("injected_keys", ()):
            target = obj
            cls_attr = getattr(type(target), key, None)
            if cls_attr is not None and key in vars(target):
                raise WrongLoad(f"the data key {key!r} was assigned over {type(target).__name__}.{key}")
        if ref:
            expected = self.reference[ref]
            got = self.fingerprint(loader, obj, self.observations.get(ref))
            if got != expected:
                raise WrongLoad(f"it loaded but differs from the good file {ref}: {str(got)[:160]} != "
                                f"{str(expected)[:160]}")
        else:
            self.can_act(loader, obj)

    # ------------------------------------------------------------------ goods
    def load_good(self, name: str) -> None:
        good = self.spec["goods"][name]
        obj = self.open(good["loader"], good["path"])
        kind = good["loader"].partition(":")[0]
        if kind == "model":
            self.models[name] = obj
            self.weights[name] = obj.get_parameters()
            self.observations[name] = self.sample_observations(obj.observation_space)
        self.reference[name] = self.fingerprint(good["loader"], obj, self.observations.get(name))

    def recheck_good(self, name: str) -> str:
        """Load a good file again: "ok" when it gives exactly what it gave at the start."""
        good = self.spec["goods"][name]
        try:
            obj = self.open(good["loader"], good["path"])
            got = self.fingerprint(good["loader"], obj, self.observations.get(name))
        except BaseException as exc:  # noqa: BLE001 - reported
            return f"fails: {type(exc).__name__}: {str(exc)[:300]}"
        if got != self.reference[name]:
            return f"gives other results: {str(got)[:200]} != {str(self.reference[name])[:200]}"
        return "ok"

    def restore_targets(self) -> None:
        for name, model in self.models.items():
            model.load_parameters(dict(self.weights[name]))
            if hasattr(model, "replay_buffer") and getattr(model, "replay_buffer", None) is not None:
                model.replay_buffer = None

    # ------------------------------------------------------------------ one case
    def run_case(self, case: Dict[str, Any]) -> Dict[str, Any]:
        name, loader = case["name"], case["loader"]
        self.emit({"event": "start", "name": name})
        self.count += 1
        if self.count % 25 == 0:  # a full collection costs ~0.25 s with TensorFlow loaded: not after every case
            gc.collect()
        exact_peak = _reset_peak_rss()
        rss_before = _peak_rss_mb()
        detail, messages = "", []
        seconds: Optional[float] = None
        faulthandler.dump_traceback_later(self.hang_seconds, exit=True)
        start = time.perf_counter()
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    obj = self.open(loader, case["path"])
                    seconds = time.perf_counter() - start
                    self.check(case, obj)
                    outcome = "loaded"
                finally:
                    messages = [f"{w.category.__name__}: {w.message}"[:300] for w in caught
                                if not issubclass(w.category, DeprecationWarning)]
            del obj
        except WrongLoad as exc:
            outcome, detail = "wrong", str(exc)
        except self.ModelFileError as exc:
            outcome, detail = f"typed:{type(exc).__name__}", str(exc)[:500]
        except MemoryError as exc:
            outcome, detail = f"memory:{type(exc).__name__}", _where(exc)
        except BaseException as exc:  # noqa: BLE001 - reported, the test decides
            outcome, detail = f"untyped:{type(exc).__name__}", _where(exc)
        if seconds is None:
            seconds = time.perf_counter() - start
        faulthandler.cancel_dump_traceback_later()
        rss_growth = _peak_rss_mb() - rss_before
        canary = self.take_canaries(name)
        self.restore_targets()
        after = {good: self.recheck_good(good) for good in case.get("after", [])}
        result = {"event": "result", "name": name, "outcome": outcome, "seconds": round(seconds, 4),
                  "rss_growth_mb": round(rss_growth, 1), "exact_peak": exact_peak, "warnings": messages[:5],
                  "detail": detail, "after": after, "canary": canary}
        self.emit(result)
        return result

    def take_canaries(self, name: str) -> List[str]:
        """Canary files that appeared during a case (renamed, so the next case is judged on its own)."""
        found = []
        for path in self.canaries:
            if os.path.exists(path):
                found.append(path)
                os.replace(path, f"{path}.made-by.{_safe(name)}")
        return found

    def emit(self, item: Dict[str, Any]) -> None:
        item["t"] = round(time.perf_counter() - _T0, 2)
        self.report.write(json.dumps(item) + "\n")
        self.report.flush()


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:120]


def _where(exc: BaseException) -> str:
    """The exception and the innermost frames of sbtf / the converters it came from (to route the bug)."""
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if "/sbtf/" in f.filename or "sbtf_converters" in f.filename] or frames
    where = " <- ".join(f"{os.path.basename(f.filename)}:{f.lineno}({f.name})" for f in reversed(ours[-3:]))
    return f"{type(exc).__name__}: {str(exc)[:300]} [at {where}]"


# ================================================================================================
# parent side: run a batch of cases in a child, recover from crashes and hangs, classify outcomes
# ================================================================================================
RUNNER = os.path.abspath(__file__)
REPO = os.path.dirname(os.path.dirname(RUNNER))


def child_env() -> Dict[str, str]:
    """Environment of the children: quiet TensorFlow, one BLAS thread (see tests/conftest.py), two malloc arenas
    (address space stays close to what is used, see the module docstring), sbtf and its converters importable."""
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    env["OPENBLAS_NUM_THREADS"] = "1"
    env["MALLOC_ARENA_MAX"] = "2"
    env["PYTHONPATH"] = os.pathsep.join(p for p in [REPO, os.path.join(REPO, "converters"),
                                                    env.get("PYTHONPATH", "")] if p)
    return env


def _signal_name(code: int) -> str:
    import signal

    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def run_batch(goods: Dict[str, Dict[str, str]], cases: List[Dict[str, Any]], work: str, final: List[str] = (),
              canaries: List[str] = (), hang_seconds: float = 30.0, as_headroom_mb: int = 3072,
              confirm_alone: bool = True, _depth: int = 0) -> Dict[str, Any]:
    """
    Open ``cases`` (spec dicts) in one child process; return ``{"results": {name: result}, "final": {...},
    "ready": {...}, "restarts": [...]}``.

    Crash isolation: the child announces each case before opening it, so when it dies (a fatal signal, the
    per-case hang watchdog, the wall-clock timeout) the case it was on is known. That case gets the outcome
    ``crash:<SIGNAL>`` / ``hang``; it is then run again alone in a fresh child (``alone`` in its result: whether it
    also dies on its own or only after the earlier files), and the cases after it continue in a new child. This
    names the culprit with one extra child per death instead of one child per file.
    """
    import subprocess
    import tempfile
    import threading

    os.makedirs(work, exist_ok=True)
    spec = {"goods": goods, "cases": list(cases), "final": list(final), "canaries": list(canaries),
            "hang_seconds": hang_seconds, "as_headroom_mb": as_headroom_mb}
    fd, spec_path = tempfile.mkstemp(prefix="spec_", suffix=".json", dir=work)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(spec, handle)
    err_path = spec_path[:-5] + ".stderr"
    events: List[Dict[str, Any]] = []
    timeout = 120.0 + len(cases) * (hang_seconds + 5.0) if len(cases) < 4 else 300.0 + len(cases) * 10.0
    with open(err_path, "w+b") as err:
        proc = subprocess.Popen([sys.executable, RUNNER, spec_path], stdout=subprocess.PIPE, stderr=err,
                                env=child_env(), cwd=REPO)

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                if line.startswith(b"{"):
                    try:
                        events.append(json.loads(line))
                    except ValueError:
                        pass

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        timed_out = False
        try:
            code: Any = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
            timed_out = True
        reader.join(10)
        err.seek(0)
        stderr = err.read().decode("utf-8", "replace")
    out: Dict[str, Any] = {"results": {}, "final": None, "ready": None, "restarts": []}
    started: List[str] = []
    for event in events:
        if event["event"] == "ready":
            out["ready"] = event["baseline"]
        elif event["event"] == "start":
            started.append(event["name"])
        elif event["event"] == "result":
            out["results"][event["name"]] = event
        elif event["event"] == "final":
            out["final"] = event["results"]
    if code == 0 and out["final"] is not None:
        return out
    if out["ready"] is None:
        raise RuntimeError(f"the runner failed before opening any file (exit {code}):\n{stderr[-4000:]}")
    culprit = next((name for name in reversed(started) if name not in out["results"]), None)
    if timed_out or "Timeout (" in stderr:
        outcome = "hang"
    elif isinstance(code, int) and code < 0:
        outcome = f"crash:{_signal_name(code)}"
    else:
        outcome = f"crash:exit{code}"
    names = [case["name"] for case in cases]
    if culprit is None:  # died after the last case (in the final re-checks)
        out["final"] = {name: f"the process died while re-checking the good files ({outcome})" for name in final}
        out["restarts"].append(f"died after the last case: {outcome}\n{stderr[-1500:]}")
        return out
    index = names.index(culprit)
    result = {"event": "result", "name": culprit, "outcome": outcome, "seconds": None, "rss_growth_mb": None,
              "warnings": [], "after": {}, "canary": [], "detail": _stderr_tail(stderr)}
    if confirm_alone and len(cases) > 1:
        alone = run_batch(goods, [cases[index]], work, (), canaries, hang_seconds, as_headroom_mb, False, _depth + 1)
        result["alone"] = alone["results"].get(culprit, {}).get("outcome")
    out["results"][culprit] = result
    out["restarts"].append(f"{culprit}: {outcome}")
    rest = cases[index + 1:]
    if rest:
        more = run_batch(goods, rest, work, final, canaries, hang_seconds, as_headroom_mb, confirm_alone, _depth + 1)
        out["results"].update(more["results"])
        out["final"] = more["final"]
        out["restarts"].extend(more["restarts"])
    else:
        out["final"] = {name: f"not re-checked: the process died on the last case ({outcome})" for name in final}
    return out


def _stderr_tail(stderr: str) -> str:
    """The interesting end of a dead child's stderr (faulthandler's stack of the main thread)."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith(("Fatal Python error", "Timeout (", "Current thread", "Thread 0x")):
            start = i
            if lines[i].startswith(("Current thread", "Thread 0x")) and i > 0 and lines[i - 1].startswith(
                    ("Fatal Python error", "Timeout (")):
                start = i - 1
            return " | ".join(line.strip() for line in lines[start:start + 12])[:1500]
    return " | ".join(lines[-8:])[:1500]


def outcome_class(result: Optional[Dict[str, Any]], max_rss_mb: float, max_error_seconds: float,
                  max_load_seconds: float) -> str:
    """The column of the outcome table: loaded, typed, untyped, crash, hang, memory, wrong, slow."""
    if result is None:
        return "missing"
    outcome = result["outcome"]
    if outcome.startswith("crash"):
        return "crash"
    if outcome == "hang":
        return "hang"
    if outcome.startswith("memory") or (result.get("rss_growth_mb") or 0) > max_rss_mb:
        return "memory"
    if outcome.startswith("untyped"):
        return "untyped"
    if outcome == "wrong":
        return "wrong"
    seconds = result.get("seconds") or 0.0
    if seconds > (max_load_seconds if outcome == "loaded" else max_error_seconds):
        return "slow"
    return "loaded" if outcome == "loaded" else "typed"


TABLE_COLUMNS = ("loaded", "typed", "untyped", "crash", "hang", "memory", "wrong", "slow", "missing")


def format_table(rows: Dict[str, Dict[str, int]]) -> str:
    """A text table: one row per group/seed, one column per outcome class, and a total."""
    width = max([len(r) for r in rows] + [8])
    lines = [f"{'':{width}}  " + " ".join(f"{c:>7}" for c in ("n",) + TABLE_COLUMNS)]
    total: Dict[str, int] = {}
    for row, counts in rows.items():
        n = sum(counts.values())
        lines.append(f"{row:{width}}  {n:>7} " + " ".join(f"{counts.get(c, 0):>7}" for c in TABLE_COLUMNS))
        for c, v in counts.items():
            total[c] = total.get(c, 0) + v
    lines.append(f"{'total':{width}}  {sum(total.values()):>7} " + " ".join(f"{total.get(c, 0):>7}"
                                                                          for c in TABLE_COLUMNS))
    return "\n".join(lines)


def main(spec_path: str) -> int:
    with open(spec_path, encoding="utf-8") as handle:
        spec = json.load(handle)
    # stdout carries the report only: whatever the library prints goes to stderr
    report = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    faulthandler.enable()
    warnings.simplefilter("ignore")
    runner = Runner(spec, report)
    needed: List[str] = []
    for case in spec["cases"]:
        for name in [case.get("ref")] + list(case.get("after", [])) + [
                case["loader"].partition(":")[2] if case["loader"].startswith(("params:", "replay_buffer:")) else None]:
            if name and name not in needed:
                needed.append(name)
    for name in spec.get("final", []):
        if name not in needed:
            needed.append(name)
    for name in needed:
        runner.load_good(name)
    runner.restore_targets()
    gc.collect()
    vm_kb = _status_kb("VmSize")
    headroom = int(spec.get("as_headroom_mb", 3072)) * MB
    if vm_kb is not None and headroom > 0:
        limit = vm_kb * 1024 + headroom
        resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))
    runner.emit({"event": "ready", "baseline": {"vm_size_mb": round((vm_kb or 0) / 1024), "rss_mb": round(
        _peak_rss_mb()), "goods": needed}})
    for case in spec["cases"]:
        runner.run_case(case)
    final = {name: runner.recheck_good(name) for name in spec.get("final", [])}
    runner.emit({"event": "final", "results": final})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
