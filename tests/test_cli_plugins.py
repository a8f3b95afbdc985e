"""The edges of sbtf: the algorithm registry every part reads, the format hooks the converters fill, and the
command line's plugins (``sbtf convert`` / ``sbtf export`` come from sbtf_converters, found without sbtf importing it).
"""
from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

import sbtf
from sbtf import algorithms, cli
from sbtf.common.fileio import formats

REPO = Path(__file__).resolve().parent.parent


def _python(code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(REPO), str(REPO / "converters"), str(REPO / "legacy")]
        + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env,
                          check=False)


# ------------------------------------------------------------------------------------------------ the registry

def test_every_part_reads_the_one_algorithm_list():
    sb2_names = ["A2C", "ACER", "ACKTR", "DDPG", "DQN", "GAIL", "HER", "PPO1", "PPO2", "SAC", "TD3", "TRPO"]
    assert sorted(algorithms.SB2_ALGORITHMS) == sb2_names
    names = sorted(algorithms.ALGORITHMS)
    assert names == ["A2C", "ACER", "ACKTR", "DDPG", "DQN", "GAIL", "HER", "PPO1", "PPO2", "SAC", "TD3", "TRPO"]
    contrib_top_level = sorted(a.name for a in algorithms.CONTRIB_ALGORITHMS.values() if a.top_level)
    # sb3-contrib's TRPO stays sbtf.contrib.TRPO
    assert contrib_top_level == ["ARS", "MaskablePPO", "QRDQN", "RecurrentPPO", "TQC"]
    sb3_top_level = sorted(a.name for a in algorithms.SB3_ALGORITHMS.values() if a.top_level)
    assert "PPO" in sb3_top_level and "A2C" not in sb3_top_level  # sbtf.A2C stays stable-baselines 2's
    assert sorted(set(sbtf.__all__) - {"__version__"}) == sorted(names + contrib_top_level + sb3_top_level)
    assert sorted(name for cli_name, name in cli.ALGOS.items()
                  if cli_name not in algorithms.CONTRIB_ALGORITHMS and cli_name not in algorithms.SB3_ALGORITHMS) \
        == names and cli.ALGOS["trpo"] == "TRPO" and cli.ALGOS["dqn"] == "DQN"
    assert cli.ALGOS["ppo"] == "PPO" and cli.ALGOS["a2c_sb3"] == "A2C" and cli.ALGOS["a2c"] == "A2C"
    assert algorithms.get("a2c_sb3").module == "sbtf.sb3.a2c" and algorithms.get("A2C").module == "sbtf.a2c"
    assert cli.ALGOS["ppo_mask"] == "MaskablePPO" and algorithms.get("trpo_contrib").module == "sbtf.contrib.trpo"
    from sbtf_converters import sb2_algos, sb2_pickle
    assert sorted(sb2_algos.ALGORITHMS) == sb2_names
    assert sb2_algos.ALGORITHMS["PPO2"].sbtf_module == "sbtf.ppo2"
    assert sb2_pickle.classify_global("stable_baselines.ppo2.ppo2", "PPO2")[0] == "algorithm"
    sys.path.insert(0, str(REPO / "legacy"))
    try:
        import stable_baselines
        assert sorted(stable_baselines.__all__) == sb2_names
        paths = stable_baselines._compat.PUBLIC_MODULES
        assert {"ppo1", "ppo1.pposgd_simple", "acer.acer_simple", "deepq.dqn", "gail.model"} <= set(paths)
    finally:
        sys.path.remove(str(REPO / "legacy"))


def test_capabilities_the_command_line_reads():
    assert cli.MULTI_ENV_ALGOS == {"a2c", "acer", "acktr", "ppo2"} | set(algorithms.CONTRIB_ALGORITHMS) \
        | set(algorithms.SB3_ALGORITHMS)  # every stable-baselines3 class takes a VecEnv of several envs
    assert cli.OFF_POLICY_ALGOS >= {"ddpg", "dqn", "her", "sac", "td3", "qrdqn", "tqc"}
    assert cli.SCHEDULE_ALGOS == {"ppo2", "sac", "td3"} | set(algorithms.CONTRIB_ALGORITHMS) \
        | set(algorithms.SB3_ALGORITHMS)
    assert cli.NOISE_ALGOS >= {"ddpg", "sac", "td3", "tqc"}
    assert not {"dqn", "sac", "td3", "ddpg"} & cli.MULTI_ENV_ALGOS
    assert cli.HER_MODEL_CLASSES == ("dqn", "sac", "ddpg", "td3")
    assert {a.name for a in algorithms.ALGORITHMS.values() if a.mpi} == {"PPO1", "TRPO", "GAIL", "DDPG"}
    assert algorithms.get("GAIL").extends == "TRPO" and algorithms.get("gail") is algorithms.get("GAIL")
    assert algorithms.find("nope") is None
    with pytest.raises(KeyError, match="unknown algorithm 'nope'"):
        algorithms.get("nope")


def test_each_entry_names_its_class():
    for algo in algorithms.ALGORITHMS.values():
        cls = algo.load()
        assert cls.__name__ == algo.name and getattr(sbtf, algo.name) is cls
        assert algo.family in algorithms.FAMILIES


def test_a_missing_algorithm_module_is_a_clear_import_error(monkeypatch):
    import dataclasses
    missing = dataclasses.replace(algorithms.get("ACER"), target="sbtf._test_missing_module:ACER")
    with pytest.raises(algorithms.AlgorithmNotAvailableError,
                       match=r"sbtf.ACER is not available in this version of sbtf \(sbtf._test_missing_module is"):
        missing.load()
    with pytest.raises(ValueError, match="family must be one of"):
        algorithms.Algorithm("X", "sbtf.x:X", "sideways")


# ------------------------------------------------------------------------------------------------ format hooks

@pytest.fixture
def no_plugins(monkeypatch):
    """The hooks as in an installation without sbtf_converters."""
    monkeypatch.setattr(formats, "_READERS", {})
    monkeypatch.setattr(formats, "_EXPORTER", [])
    monkeypatch.setattr(formats, "_searched", [False])
    monkeypatch.setattr(formats, "FALLBACK_PLUGINS", ("sbtf_test_no_such_plugin.plugin",))
    monkeypatch.setattr(formats, "_entry_points", lambda: [])


def test_without_converters_an_sb2_file_says_what_to_install(no_plugins, tmp_path):
    path = tmp_path / "old.pkl"
    path.write_bytes(b"\x80\x04N.")  # a pickle: what stable-baselines 2 wrote
    with pytest.raises(formats.MissingReaderError, match=r"is a stable-baselines 2.x file \(sb2-pkl\); reading it "
                                                         r"needs the sbtf_converters package \(part of the sbtf"):
        sbtf.PPO2.load(str(path))
    assert issubclass(formats.MissingReaderError, ValueError)  # a ModelFileError, as before


def test_without_converters_export_says_what_to_install(no_plugins, tmp_path):
    model = sbtf.PPO2("MlpPolicy", "CartPole-v1", n_steps=8, seed=0)
    with pytest.raises(formats.MissingExporterError, match=r"pip install sbtf.*'sbtf\[export\]'"):
        model.export(str(tmp_path / "out"))


def test_plugins_are_found_through_entry_points(no_plugins):
    calls = []

    class _EntryPoint:  # the part of importlib.metadata.EntryPoint that the loader uses
        name, value = "fake", "fake_plugin:register"

        @staticmethod
        def load():
            return lambda: calls.append(formats.register_model_reader("fake-kind", lambda cls, payload, **kw: "m"))

    formats._entry_points = lambda: [_EntryPoint()]  # no_plugins restores it
    reader = formats.model_reader("fake-kind")
    assert calls and reader(None, b"") == "m"
    formats.model_reader("fake-kind")
    assert len(calls) == 1  # searched once


def test_fallback_finds_the_converters_without_entry_points():
    """The dev install predates the entry points: the converters are found by import, in a fresh interpreter."""
    result = _python(
        "import sys; from sbtf.common.fileio import formats; "
        "assert 'sbtf_converters' not in sys.modules; "
        "readers = formats.registered_model_readers(); exporter = formats.exporter(); "
        "print(sorted(readers), exporter.__module__, 'tensorflow' in sys.modules)")
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["['sb2-pkl',", "'sb2-zip',", "'sb3-zip']", "sbtf_converters.plugin",
                                     "False"]


def test_importing_the_converters_registers_them(no_plugins):
    plugin = importlib.import_module("sbtf_converters.plugin")
    plugin.register_formats()
    assert set(formats._READERS) == {"sb2-zip", "sb2-pkl", "sb3-zip"} and formats._EXPORTER == [plugin.export_model]


def test_vecnormalize_has_a_public_constructor_from_data():
    from sbtf.common.running_mean_std import RunningMeanStd
    from sbtf.common.vec_env import VecNormalize
    vec = VecNormalize.from_data({"obs_rms": RunningMeanStd(shape=(3,)), "ret_rms": {"mean": 0.0, "var": 1.0,
                                                                                        "count": 4.0},
                                  "clip_obs": 5.0})
    assert vec.clip_obs == 5.0 and vec.obs_rms.mean.shape == (3,) and vec.ret_rms.count == 4.0
    from sbtf.common.file_errors import ModelDataError
    with pytest.raises(ModelDataError, match="ret_rms"):
        VecNormalize.from_data({"obs_rms": RunningMeanStd(shape=(3,))})


# ------------------------------------------------------------------------------------------------ CLI plugins

def test_the_command_line_finds_convert_and_export_without_entry_points():
    result = _python("import sys; from sbtf.cli import main; code = main(['--help']); "
                     "print('tensorflow' in sys.modules); sys.exit(code)")
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.split()
    assert lines[-1] == "False"  # building the command line imports no TensorFlow
    positions = [lines.index(name) for name in ("train", "enjoy", "convert", "export")]
    assert positions == sorted(positions)  # sbtf's own first, then the plugins


def test_subcommand_plugins_from_entry_points(monkeypatch, capsys):
    from sbtf.cli import plugins
    monkeypatch.setattr(plugins, "_SUBCOMMANDS", dict(plugins._SUBCOMMANDS))
    monkeypatch.setattr(plugins, "_plugins_loaded", False)
    monkeypatch.setattr(plugins, "SUBCOMMAND_MODULES", ("sbtf_test_no_such_module.cli",))

    class _EntryPoint:
        value = "fake_plugin:register"

        @staticmethod
        def load():
            return lambda: plugins.register_subcommand("fake", lambda args: 0, help="a fake plugin")

    import importlib.metadata
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: [_EntryPoint()] if group == "sbtf.cli"
                        else [])
    assert "fake" in plugins.registered_subcommands()
    assert capsys.readouterr().err == ""  # a plugin module that is not installed is skipped silently
