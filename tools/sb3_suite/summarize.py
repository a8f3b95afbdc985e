"""Count a rewritten stable-baselines3 test run per file, from pytest's JUnit XML report.

Usage: ``python tools/sb3_suite/summarize.py REPORT.xml [MORE.xml ...]``

Per test file: collected, passed, skipped, out of scope (the failure is ``PyTorchObjectUsed``, raised by the
stand-in that ``rewrite.py`` puts where torch was imported) and the other failures with their first message line.
"""
from __future__ import annotations

import sys
import xml.etree.ElementTree as ElementTree
from collections import defaultdict
from typing import Dict, List


def summarize(report_paths: List[str]) -> Dict[str, Dict[str, object]]:
    """Return ``{file: {"collected", "passed", "skipped", "torch", "failed": [(test, message)]}}``."""
    table: Dict[str, Dict[str, object]] = defaultdict(
        lambda: {"collected": 0, "passed": 0, "skipped": 0, "torch": 0, "failed": []})
    for path in report_paths:
        for case in ElementTree.parse(path).getroot().iter("testcase"):
            module = case.get("classname", "").split(".")[0] or f"{path} (collection)"
            row = table[module if module.endswith(")") else module + ".py"]
            row["collected"] += 1
            problem = case.find("failure")
            if problem is None:
                problem = case.find("error")
            if case.find("skipped") is not None:
                row["skipped"] += 1
            elif problem is None:
                row["passed"] += 1
            elif "PyTorchObjectUsed" in (problem.get("message", "") + (problem.text or "")):
                row["torch"] += 1
            else:
                first = (problem.get("message") or "").strip().splitlines()
                row["failed"].append((case.get("name"), first[0][:160] if first else ""))
    return dict(table)


def main(argv: List[str]) -> None:
    """Print the table, then every other failure."""
    table = summarize(argv)
    print(f"{'file':32} collected passed skipped torch other")
    for name, row in sorted(table.items()):
        print(f"{name:32} {row['collected']:9} {row['passed']:6} {row['skipped']:7} {row['torch']:5} "
              f"{len(row['failed']):5}")
    for name, row in sorted(table.items()):
        for test, message in row["failed"]:
            print(f"{name}::{test}: {message}")


if __name__ == "__main__":
    main(sys.argv[1:])
