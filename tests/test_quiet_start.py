"""`import sbtf` and a short learn() print nothing to stderr (TensorFlow's native start-up lines are filtered)."""
from __future__ import annotations

import os
import subprocess
import sys

SCRIPT = """
import sys
from sbtf import PPO2
PPO2('MlpPolicy', 'CartPole-v1', n_steps=64, nminibatches=1, noptepochs=1).learn(128)
sys.stderr.write('own message\\n')
"""


def _run(extra_env: dict) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "SBTF_TF_LOGS")}
    env.update(extra_env)
    return subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300)


def test_start_up_is_quiet_but_stderr_still_works():
    result = _run({})
    assert result.returncode == 0, result.stderr
    assert result.stderr == "own message\n", result.stderr


def test_tf_import_errors_and_warnings_are_not_swallowed(tmp_path):
    script = "import sbtf, warnings, tensorflow\nwarnings.warn('visible after import')\n"
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "SBTF_TF_LOGS")}
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert "visible after import" in result.stderr


def test_load_and_predict_do_not_import_tensorflow_probability(tmp_path):
    """TensorFlow Probability (~1 s of import) is imported when a TF distribution is first built, not to act."""
    from sbtf import PPO2

    path = tmp_path / "agent.zip"
    PPO2("MlpPolicy", "CartPole-v1", n_steps=32, nminibatches=1, noptepochs=1, seed=0).save(path)
    script = (f"import sys, numpy as np\nfrom sbtf import PPO2\nmodel = PPO2.load({str(path)!r})\n"
              "model.predict(np.zeros(4, np.float32))\n"
              "print('tfp' if 'tensorflow_probability' in sys.modules else 'no tfp')\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "no tfp"


def test_tensorflow_imported_first_prints_nothing_after_sbtf_is_imported():
    """The lines TensorFlow prints while it loads are out before sbtf runs; what it would print on first use (device
    probing, XLA's CPU client) is silenced by ``import sbtf``, so nothing comes after the marker but our own line."""
    script = ("import sys\nimport keras\nsys.stderr.write('MARKER\\n'); sys.stderr.flush()\n" + SCRIPT)
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "SBTF_TF_LOGS")}
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stderr.split("MARKER\n", 1)[1] == "own message\n", result.stderr
    # and with the user's SBTF_TF_LOGS=1 the lazy lines are theirs to see (nothing is filtered)
    shown = subprocess.run([sys.executable, "-c", script], env={**env, "SBTF_TF_LOGS": "1"}, capture_output=True,
                           text=True, timeout=300)
    assert shown.returncode == 0 and shown.stderr.split("MARKER\n", 1)[1].endswith("own message\n")
