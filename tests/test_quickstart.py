"""The README's quick start ends in a good agent: ``sbtf train --algo ppo2 --env CartPole-v1 -f logs`` then
``sbtf enjoy --algo ppo2 --env CartPole-v1 -f logs --episodes 3`` balances the pole for CartPole-v1's 500 steps on
most seeds (``-m slow``: about a minute per seed on 2 cores; CI runs the commands themselves with the default seed)."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _readme_commands() -> list:
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as handle:
        readme = handle.read()
    quick_start = readme[readme.index("## Quick start"):readme.index("## The stable-baselines API")]
    return re.findall(r"^(sbtf (?:train|enjoy) --algo ppo2 --env CartPole-v1 .*)$", quick_start, flags=re.M)[:2]


def test_readme_quick_start_commands_are_the_ones_checked():
    train, enjoy = _readme_commands()
    assert train == "sbtf train --algo ppo2 --env CartPole-v1 -f logs"
    assert enjoy == "sbtf enjoy --algo ppo2 --env CartPole-v1 -f logs --episodes 3"


@pytest.mark.slow
def test_quick_start_balances_the_pole_on_most_seeds(tmp_path):
    train, enjoy = _readme_commands()
    cli = [sys.executable, "-m", "sbtf"]
    means = []
    for seed in (0, 1, 2):
        folder = tmp_path / "seed{}".format(seed)
        folder.mkdir()
        subprocess.run(cli + train.split()[1:] + ["--seed", str(seed), "--no-progress", "--verbose", "0"],
                       cwd=folder, check=True, capture_output=True, timeout=1800)
        out = subprocess.run(cli + enjoy.split()[1:] + ["--seed", str(seed)], cwd=folder, check=True,
                             capture_output=True, text=True, timeout=600).stdout
        means.append(float(re.search(r"^Mean return over 3 episode\(s\): ([\d.]+)", out, flags=re.M).group(1)))
        assert (folder / "logs" / "ppo2" / "CartPole-v1_1" / "learning_curve.png").is_file()
    assert sum(mean >= 475 for mean in means) >= 2, means
