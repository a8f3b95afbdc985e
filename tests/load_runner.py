"""Open files with sbtf's loaders in this (child) process and report one JSON line per file.

``python tests/load_runner.py SPEC.json`` where SPEC holds ``{"good": {...}, "cases": [[name, loader, path,
expect], ...]}``. For each case: the outcome (``loaded`` / ``typed:<ErrorClass>`` / ``untyped:<ErrorClass>``), how
far the process's memory peak rose during the load call (``peak_growth_mb``: the resident high-water mark, reset
before each case, so every case is measured on its own; C allocations included), the file's size, and (for
information only, never judged) the seconds it took. The process guards itself with an address-space limit (a
runaway allocation fails instead of taking the machine). At the end a good model is loaded again and must act
exactly as before: ``{"final": "ok"}``.
"""
from __future__ import annotations

import json
import os
import resource
import sys
import time
import traceback
import warnings

# TensorFlow maps a few GB of address space when it starts; 16 GB leaves room for that while stopping a loader
# that tries to allocate tens of GB (the "memory" assertion itself uses the peak-RSS growth).
ADDRESS_SPACE_LIMIT = 16 << 30


class LoadedButCannotAct(Exception):
    """A file loaded without error but the model it gave cannot predict on its own observation space."""


def _file_bytes(path: str) -> int:
    if os.path.isdir(path):
        return sum(os.path.getsize(os.path.join(path, name)) for name in os.listdir(path))
    return os.path.getsize(path) if os.path.exists(path) else 0


def main(spec_path: str) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_LIMIT, ADDRESS_SPACE_LIMIT))
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    warnings.simplefilter("ignore")
    import numpy as np
    import gymnasium as gym

    from sbtf import PPO2
    from sbtf.common.buffers import load_buffer
    from sbtf.common.file_errors import ModelFileError
    from sbtf.common.vec_env import DummyVecEnv, VecNormalize
    from sbtf.gail import ExpertDataset

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from crafted_files import peak_memory_growth

    with open(spec_path, encoding="utf-8") as handle:
        spec = json.load(handle)
    good = spec["good"]
    obs = np.random.RandomState(0).uniform(-1, 1, (6, 4)).astype(np.float32)
    reference = PPO2.load(good["model"])  # warm up: the first model build is not counted
    expected = reference.predict(obs, deterministic=True)[0]
    venv = DummyVecEnv([lambda: gym.make("CartPole-v1")])
    VecNormalize.load(good["vecnorm"], venv)

    def open_case(loader: str, path: str) -> None:
        if loader in ("model", "model_stub_ok"):
            model = PPO2.load(path)
            if not np.array_equal(model.predict(obs, deterministic=True)[0], expected):
                raise AssertionError("a loaded model acts differently from the good file")
        elif loader.startswith("any:"):  # fuzzing: any algorithm's file; a loaded model must be able to act
            import sbtf

            model = getattr(sbtf, loader[4:]).load(path)
            try:
                model.predict(model.observation_space.sample(), deterministic=True)
            except Exception as exc:  # noqa: BLE001 - reported as its own outcome
                raise LoadedButCannotAct(f"{type(exc).__name__}: {exc}") from exc
        elif loader == "params":
            target = PPO2.load(good["model"])
            target.load_parameters(path)
            if not np.array_equal(target.predict(obs, deterministic=True)[0], expected):
                raise AssertionError("load_parameters gave other weights")
        elif loader == "vecnorm":
            VecNormalize.load(path, venv)
        elif loader == "running_average":
            VecNormalize(venv).load_running_average(path)
        elif loader == "expert":
            ExpertDataset(expert_path=path, batch_size=4, sequential_preprocessing=True, verbose=0)
        elif loader == "buffer":
            load_buffer(path)
        else:
            raise ValueError(f"unknown loader {loader}")

    for name, loader, path, _expect in spec["cases"]:
        result = {}

        def run(loader: str = loader, path: str = path, result: dict = result) -> None:
            try:
                open_case(loader, path)
                result["outcome"], result["detail"] = "loaded", ""
            except ModelFileError as exc:
                result["outcome"], result["detail"] = f"typed:{type(exc).__name__}", str(exc)[:300]
                result["message_chars"] = len(str(exc))
            except BaseException as exc:  # noqa: BLE001 - reported, the test decides
                result["outcome"] = f"untyped:{type(exc).__name__}"
                result["detail"] = "".join(traceback.format_exception_only(type(exc), exc))[-400:]

        start = time.perf_counter()
        growth = peak_memory_growth(run)
        seconds = time.perf_counter() - start
        print(json.dumps({"name": name, "outcome": result["outcome"], "seconds": round(seconds, 3),
                          "peak_growth_mb": round(growth / 2 ** 20, 1), "file_bytes": _file_bytes(path),
                          "message_chars": result.get("message_chars", 0), "detail": result["detail"]}),
              flush=True)
    model = PPO2.load(good["model"])
    final = "ok" if np.array_equal(model.predict(obs, deterministic=True)[0], expected) else "changed"
    print(json.dumps({"final": final}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
