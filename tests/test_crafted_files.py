"""Crafted hostile and broken files, opened in a child process with a memory guard.

Every file must raise a typed ``ModelFileError`` (or load correctly where that is the right outcome) with a message
of bounded length, without raising the process's memory peak by more than a small bound (measured per case from
the resident high-water mark, see ``load_runner``), without running the canary command, and a good file must still
load and act identically afterwards in the same process. Work is bounded by memory and by the readers' own counters
(``tests/test_safe_load_budgets.py``), never by seconds: a hang shows up as the child's overall timeout.
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
MAX_PEAK_GROWTH_MB = 300.0   # how far one load may raise the process's memory peak (a benign model load: ~10 MB)
MAX_MESSAGE_CHARS = 3000     # an error message never formats a hostile value in full


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
                                                         "peak_growth_mb": None, "detail": ""}})
    elif code != 0:
        results.setdefault(cases[0][0], {"name": cases[0][0], "outcome": f"crash:{code}", "peak_growth_mb": None,
                                         "detail": ""})
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
        elif result["peak_growth_mb"] is not None and result["peak_growth_mb"] > MAX_PEAK_GROWTH_MB:
            bad.append(f"{name}: raised the memory peak by {result['peak_growth_mb']} MB")
        elif result.get("message_chars", 0) > MAX_MESSAGE_CHARS:
            bad.append(f"{name}: a message of {result['message_chars']:,} characters")
    return bad


@pytest.fixture(scope="module")
def crafted(tmp_path_factory):
    folder = tmp_path_factory.mktemp("crafted")
    good = make_good_files(folder / "good")
    return good, make_cases(good, folder / "cases"), folder


def test_every_crafted_file_gets_a_typed_error_in_bounded_memory(crafted):
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
