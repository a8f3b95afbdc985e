"""Crafted hostile and broken files, opened in a child process with time and memory guards.

Every file must raise a typed ``ModelFileError`` (or load correctly where that is the right outcome) in under a
second or so, without growing the process by more than a few hundred MB, without running the canary command, and
a good file must still load and act identically afterwards in the same process.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from crafted_files import CANARY, make_cases, make_good_files

RUNNER = Path(__file__).resolve().parent / "load_runner.py"
MAX_SECONDS = 2.0       # per load call (typically < 0.1 s; slack for a loaded 2-core machine)
MAX_RSS_GROWTH_MB = 300.0


def run_cases(good: dict, cases: list, folder: Path, timeout: float = 600) -> tuple:
    """Run ``cases`` in one child; on a crash, rerun the unfinished ones one per child. Returns (results, final)."""
    spec = folder / f"spec_{os.getpid()}_{len(cases)}_{abs(hash(cases[0][0]))}.json"
    spec.write_text(json.dumps({"good": {k: str(v) for k, v in good.items()}, "cases": cases}))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(RUNNER.parent.parent), os.environ.get("PYTHONPATH", "")]))
    try:
        proc = subprocess.run([sys.executable, str(RUNNER), str(spec)], capture_output=True, text=True,
                              timeout=timeout, env=env)
        stdout, code = proc.stdout, proc.returncode
    except subprocess.TimeoutExpired as exc:
        stdout, code = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else (exc.stdout or ""), "timeout"
    results, final = {}, None
    for line in stdout.splitlines():
        if line.startswith("{"):
            item = json.loads(line)
            if "final" in item:
                final = item["final"]
            else:
                results[item["name"]] = item
    if code != 0 and len(cases) > 1:
        for case in cases:
            if case[0] not in results:
                sub_results, _ = run_cases(good, [case], folder, timeout=120)
                results.update(sub_results or {case[0]: {"name": case[0], "outcome": f"crash:{code}",
                                                         "seconds": None, "rss_growth_mb": None, "detail": ""}})
    elif code != 0:
        results.setdefault(cases[0][0], {"name": cases[0][0], "outcome": f"crash:{code}", "seconds": None,
                                         "rss_growth_mb": None, "detail": ""})
    return results, final


def judge(cases: list, results: dict) -> list:
    """The cases whose outcome breaks the contract, as readable lines."""
    bad = []
    for name, _loader, _path, expect in cases:
        result = results.get(name)
        if result is None:
            bad.append(f"{name}: no result")
            continue
        outcome = result["outcome"]
        ok = outcome.startswith("typed:") if expect == "error" else outcome == "loaded"
        if not ok:
            bad.append(f"{name}: expected {expect}, got {outcome} {result['detail']}")
        elif result["seconds"] is not None and result["seconds"] > MAX_SECONDS:
            bad.append(f"{name}: took {result['seconds']} s")
        elif result["rss_growth_mb"] is not None and result["rss_growth_mb"] > MAX_RSS_GROWTH_MB:
            bad.append(f"{name}: grew the process by {result['rss_growth_mb']} MB")
    return bad


@pytest.fixture(scope="module")
def crafted(tmp_path_factory):
    folder = tmp_path_factory.mktemp("crafted")
    good = make_good_files(folder / "good")
    return good, make_cases(good, folder / "cases"), folder


def test_every_crafted_file_gets_a_typed_error_fast_and_small(crafted):
    good, cases, folder = crafted
    if os.path.exists(CANARY):
        os.remove(CANARY)
    results, final = run_cases(good, cases, folder)
    bad = judge(cases, results)
    table = {}
    for item in results.values():
        table[item["outcome"].split(":")[0]] = table.get(item["outcome"].split(":")[0], 0) + 1
    assert not os.path.exists(CANARY), "a crafted file ran its command"
    assert not bad, f"{len(bad)} of {len(cases)} cases broke the contract (outcomes {table}):\n" + "\n".join(bad)
    assert final == "ok", "after the crafted files, the good model no longer loads identically"
    assert len(cases) >= 60
