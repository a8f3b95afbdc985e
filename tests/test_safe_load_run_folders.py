"""Run folders, zoo folders and YAML files are data: every hostile one gets a typed error (one line from the command),
in bounded memory and work, and nothing is written outside the run folder (issue #34).

Each case is a crafted run folder (``LOG/ppo2/CartPole-v1_1/``: the model, ``config.yml``, maybe ``zoo.yml``) or zoo
folder (``ZOO/ppo2/CartPole-v1.zip`` + ``ZOO/ppo2/CartPole-v1/config.yml``) built in the test. Work is bounded by
bytes (tracemalloc peaks) and items counted, never by seconds.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tracemalloc

import pytest

from sbtf.cli import main
from sbtf.common.fileio import safe_yaml
from sbtf.common.file_errors import CorruptedFileError, FileLimitError, ModelFileError, UnsafeFileError
from sbtf.common.fileio.safe_yaml import MAX_YAML_BYTES, load_yaml, read_yaml
from sbtf.zoo import load_zoo_agent, read_zoo_yaml
from sbtf.zoo.config import (check_env_kwargs, check_frame_stack, check_n_envs,
                             check_normalize_kwargs, check_seed, check_wrapper_kwargs)
from sbtf.zoo.errors import ConfigLimitError, UnsafeConfigError, ZooConfigError

ENV_ID = "CartPole-v1"


def billion_laughs(key: str) -> str:
    """A ~500-byte document whose ``key`` stands for 10**9 strings through 9 levels of aliases."""
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, 9):
        name, previous = chr(ord("a") + level), chr(ord("a") + level - 1)
        lines.append("{0}: &{0} [{1}]".format(name, ",".join(["*" + previous] * 10)))
    lines.append("{}: *i".format(key))
    return "\n".join(lines) + "\n"


DEEP_NEST = "a: " + "[" * 20000 + "]" * 20000 + "\n"
COLLIDING_KEYS = "{" + ", ".join("{}: 1".format(k * (2 ** 61 - 1)) for k in range(300)) + "}\n"


@pytest.fixture(params=["libyaml", "python"], autouse=False)
def both_parsers(request, monkeypatch):
    """Run a test with libyaml's parser and with PyYAML's pure-Python one (same limits)."""
    if request.param == "libyaml":
        if safe_yaml._CParser is None:
            pytest.skip("PyYAML without libyaml")
        monkeypatch.setattr(safe_yaml, "SafeYamlLoader", safe_yaml._CLoader)
    else:
        monkeypatch.setattr(safe_yaml, "SafeYamlLoader", safe_yaml._PyLoader)
    return request.param


def _peak_bytes(function, *args, **kwargs):
    """(result or exception, peak bytes allocated while calling)."""
    tracemalloc.start()
    try:
        try:
            outcome = function(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - returned to the test
            outcome = exc
        return outcome, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# --------------------------------------------------------------------------------------------------- the reader

@pytest.mark.usefixtures("both_parsers")
@pytest.mark.parametrize("key", ["normalize", "n_envs", "deterministic"])
def test_billion_laughs_is_refused_in_small_memory(key):
    text = billion_laughs(key)
    assert len(text.encode()) < 600
    outcome, peak = _peak_bytes(load_yaml, text, "config.yml")
    assert isinstance(outcome, FileLimitError), outcome
    assert "config.yml: the YAML expands to more than" in str(outcome) and "aliases" in str(outcome)
    assert peak < 4 << 20, peak  # the expansion (10**9 strings) is never built nor walked


@pytest.mark.usefixtures("both_parsers")
def test_merge_key_bomb_is_refused():
    lines = ["m0: &m0 {k0: 1}"] + ["m{0}: &m{0} {{<<: [{1}], k{0}: 1}}".format(
        i, ", ".join(["*m{}".format(i - 1)] * 10)) for i in range(1, 9)]
    outcome, peak = _peak_bytes(load_yaml, "\n".join(lines), "hyper.yml")
    assert isinstance(outcome, FileLimitError) and "expands to more than" in str(outcome), outcome
    assert peak < 4 << 20


@pytest.mark.usefixtures("both_parsers")
def test_aliases_within_the_budget_load():
    # real files may share a value through an anchor: expanded, it stays within the file-size budget
    data = load_yaml("arch: &arch [64, 64]\npolicy_kwargs: {pi: *arch, vf: *arch}\n", "config.yml")
    assert data == {"arch": [64, 64], "policy_kwargs": {"pi": [64, 64], "vf": [64, 64]}}


@pytest.mark.usefixtures("both_parsers")
def test_deep_nest_is_a_limit_error_not_a_recursion_error(monkeypatch):
    # the pure-Python scanner would check every open "[" level at each token (quadratic work): count that work
    from yaml.scanner import Scanner

    checked = [0]
    original = Scanner.stale_possible_simple_keys

    def counting(self):
        checked[0] += len(self.possible_simple_keys)
        return original(self)

    monkeypatch.setattr(Scanner, "stale_possible_simple_keys", counting)
    for text in (DEEP_NEST, "a:\n" + "".join("  " * i + "- \n" for i in range(1, 300))):
        with pytest.raises(FileLimitError, match=r"config.yml: the YAML is nested more than 64 levels deep"):
            load_yaml(text, "config.yml")
    assert checked[0] < 100_000, checked[0]


@pytest.mark.usefixtures("both_parsers")
def test_self_referencing_alias_is_refused():
    with pytest.raises(FileLimitError, match="refers to the value that contains it"):
        load_yaml("a: &x [1, *x]\n", "config.yml")


@pytest.mark.usefixtures("both_parsers")
@pytest.mark.parametrize("text, error, fragment", [
    ("- a\n- b\n", CorruptedFileError, "config.yml must hold a mapping (name: value, ...), got a list"),
    (b"normalize: \xff\xfe\n", CorruptedFileError, "config.yml is not UTF-8 text (byte 11"),
    ("a: !!python/object/apply:os.system ['touch /tmp/sbtf_h2_canary']\n", UnsafeFileError,
     "config.yml: The YAML tag !!python/object/apply:os.system at line 1 asks for a Python object to be built"),
    ("a: !!python/name:os.system\n", UnsafeFileError, "Nothing was run"),
    ("a: !custom 1\n", CorruptedFileError, "config.yml is not a valid YAML file"),
    ("a: [1, 2\n", CorruptedFileError, "config.yml is not a valid YAML file"),
    ("a: " + "9" * 5000 + "\n", CorruptedFileError, "config.yml is not a valid YAML file"),
    ("a: 2001-01-01\n", CorruptedFileError, "holds a date value"),
    (COLLIDING_KEYS, FileLimitError, "keys that are not strings"),
    ("{1: a}\n", CorruptedFileError, "names must be strings"),
])
def test_malformed_yaml_gives_a_typed_error_naming_the_file(text, error, fragment):
    with pytest.raises(error) as info:
        load_yaml(text, "config.yml")
    assert fragment in str(info.value)
    assert isinstance(info.value, ModelFileError) and len(str(info.value)) < 600
    assert not os.path.exists("/tmp/sbtf_h2_canary")


def test_zoo_ordered_dict_tag_is_read_as_a_dict():
    text = "!!python/object/apply:collections.OrderedDict\n- - [n_envs, 8]\n  - [policy, MlpPolicy]\n"
    data = load_yaml(text, "config.yml")
    assert type(data) is dict and list(data.items()) == [("n_envs", 8), ("policy", "MlpPolicy")]


def test_file_size_is_bounded_before_reading(tmp_path):
    path = tmp_path / "config.yml"
    path.write_text("a: " + "x" * MAX_YAML_BYTES + "\n")
    with pytest.raises(FileLimitError, match=r"config.yml is 262,1\d\d bytes; a settings file is a few kB"):
        read_yaml(path)
    with pytest.raises(CorruptedFileError, match="is not a regular file"):
        read_yaml(tmp_path)
    fifo = tmp_path / "fifo.yml"
    os.mkfifo(fifo)
    with pytest.raises(CorruptedFileError, match="is not a regular file"):  # never opened: open() would block
        read_yaml(fifo)


def test_zoo_reader_keeps_its_error_types(tmp_path):
    path = tmp_path / "config.yml"
    path.write_text(billion_laughs("normalize"))
    with pytest.raises(ConfigLimitError):
        read_zoo_yaml(str(path))
    path.write_text("a: !!python/object/apply:os.system ['true']\n")
    with pytest.raises(UnsafeConfigError):
        read_zoo_yaml(str(path))
    path.write_bytes(b"\xff\n")
    with pytest.raises(ZooConfigError, match="not UTF-8"):
        read_zoo_yaml(str(path))


# --------------------------------------------------------------------------------------------------- the values

def test_value_checks():
    assert check_frame_stack(4, "c") == 4 and check_frame_stack(None, "c") == 0 and check_frame_stack(4.0, "c") == 4
    with pytest.raises(ConfigLimitError, match=r"frame_stack in c is 1000000000: sbtf stacks at most 64 frames"):
        check_frame_stack(1_000_000_000, "c")
    with pytest.raises(ZooConfigError, match="non-negative integer"):
        check_frame_stack("four", "c")
    assert check_seed(0, "s") == 0 and check_seed(2 ** 32 - 1, "s") == 2 ** 32 - 1
    for seed in (-1, -2 ** 62, 2 ** 32, 1.5, True, "3"):
        with pytest.raises(ZooConfigError, match=r"seed in s must be an integer from 0 to 2\*\*32 - 1"):
            check_seed(seed, "s")
    assert check_n_envs(8, "h") == 8
    with pytest.raises(ConfigLimitError, match="n_envs in h is 1,000,000,000"):
        check_n_envs(10 ** 9, "h")
    with pytest.raises(ZooConfigError, match="n_envs in h must be a positive integer"):
        check_n_envs([1], "h")
    assert check_normalize_kwargs({"norm_obs": True, "clip_obs": 10, "gamma": 0.99}, "c")["clip_obs"] == 10
    for bad in ({"clip_obs": "x"}, {"epsilon": 0}, {"gamma": 2.0}, {"norm_obs": 1}, {"clip_obs": float("inf")}):
        with pytest.raises(ZooConfigError, match="normalize in c: "):
            check_normalize_kwargs(bad, "c")


def test_messages_never_repr_a_huge_value():
    huge = ["x" * 200_000] * 1000
    for check in (lambda: check_frame_stack(huge, "c"), lambda: check_seed(huge, "c"),
                  lambda: check_n_envs(huge, "c"), lambda: check_normalize_kwargs({"gamma": huge}, "c")):
        outcome, peak = _peak_bytes(check)
        assert isinstance(outcome, ZooConfigError) and len(str(outcome)) < 600, outcome
        assert peak < 1 << 20


@pytest.mark.parametrize("path, kwargs, error, fragment", [
    ("sbtf.common.monitor.Monitor", {"filename": "/tmp/anywhere"}, ZooConfigError,
     "the argument 'filename' names a file"),
    ("gymnasium.wrappers.RecordVideo", {"video_folder": "/tmp/v"}, ZooConfigError, "'video_folder' names a file"),
    ("gymnasium.wrappers.RecordVideo", {"name_prefix": "../x"}, ZooConfigError, "'name_prefix' names a file"),
    ("gymnasium.wrappers.FrameStackObservation", {"stack_size": 3e8}, ConfigLimitError,
     "stack_size is 300,000,000, beyond the 64"),
    ("sbtf.common.atari_wrappers.FrameStack", {"n_frames": 10 ** 9}, ConfigLimitError, "n_frames is 1,000,000,000"),
    ("gymnasium.wrappers.ResizeObservation", {"shape": [100000, 100000]}, ConfigLimitError, "shape"),
    ("sbtf.common.atari_wrappers.WarpFrame", {"width": 10 ** 6}, ConfigLimitError, "width is 1,000,000"),
    ("gymnasium.wrappers.MaxAndSkipObservation", {"skip": 10 ** 9}, ConfigLimitError, "skip is"),
    ("gymnasium.wrappers.DelayObservation", {"delay": 2.5}, ZooConfigError, "delay must be a non-negative integer"),
    ("gymnasium.wrappers.TransformObservation", {"func": "os.system"}, ZooConfigError,
     "the argument 'func' takes a function"),
    ("gymnasium.wrappers.RecordVideo", {"episode_trigger": 1}, ZooConfigError, "takes a function"),
])
def test_wrapper_arguments_from_a_file_are_checked(path, kwargs, error, fragment):
    with pytest.raises(error) as info:
        check_wrapper_kwargs(path, kwargs, "run/config.yml")
    assert fragment in str(info.value) and "run/config.yml" in str(info.value)


def test_plain_wrapper_arguments_pass():
    assert check_wrapper_kwargs("gymnasium.wrappers.TimeLimit", {"max_episode_steps": 10 ** 9}, "c") == {
        "max_episode_steps": 10 ** 9}
    assert check_wrapper_kwargs("gymnasium.wrappers.FrameStackObservation", {"stack_size": 4}, "c")
    assert check_env_kwargs({"render_mode": None, "g": 9.8}, "c")
    with pytest.raises(ZooConfigError, match="env_kwargs in c: the argument 'xml_file' names a file"):
        check_env_kwargs({"xml_file": "/dev/zero"}, "c")


# --------------------------------------------------------------------------------------------------- run folders

@pytest.fixture(scope="module")
def model_zip(tmp_path_factory):
    from sbtf import PPO2

    path = tmp_path_factory.mktemp("model") / "CartPole-v1.zip"
    PPO2("MlpPolicy", ENV_ID, n_steps=16, seed=0).save(str(path))
    return path


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    """tmp_path/cwd is the working directory; returns a function listing every file under tmp_path."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)

    def files():
        return sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())

    return files


def _run_folder(root, model_zip, config=None, zoo=None):
    run_dir = root / "logs" / "ppo2" / "CartPole-v1_1"
    run_dir.mkdir(parents=True)
    shutil.copy(model_zip, run_dir / "CartPole-v1.zip")
    for name, text in (("config.yml", config), ("zoo.yml", zoo)):
        if text is not None:
            (run_dir / name).write_bytes(text if isinstance(text, bytes) else text.encode())
    return run_dir


def _zoo_folder(root, model_zip, config):
    folder = root / "trained_agents"
    (folder / "ppo2" / ENV_ID).mkdir(parents=True)
    shutil.copy(model_zip, folder / "ppo2" / "CartPole-v1.zip")
    (folder / "ppo2" / ENV_ID / "config.yml").write_bytes(config if isinstance(config, bytes) else config.encode())
    return folder


def _one_line_error(capsys, argv, code=2):
    assert main(argv) == code
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and "\n" not in err, err
    assert len(err) < 2100
    return err


def _enjoy(tmp_path, *extra):
    return ["enjoy", "--algo", "ppo2", "--env", ENV_ID, "-f", str(tmp_path / "logs"), "-n", "3"] + list(extra)


OUTSIDE = "/tmp/sbtf_h2_outside"

RUN_FOLDER_CASES = [
    ("billion laughs as normalize", billion_laughs("normalize"), "the YAML expands to more than"),
    ("billion laughs as n_envs", billion_laughs("n_envs"), "the YAML expands to more than"),
    ("20,000 levels", DEEP_NEST, "the YAML is nested more than 64 levels deep"),
    ("not UTF-8", b"policy: MlpPolicy\nnormalize: \xff\n", "is not UTF-8 text"),
    ("a list", "- normalize\n- true\n", "config.yml must hold a mapping"),
    ("python tag", "normalize: !!python/object/apply:os.system ['touch {}']\n".format(OUTSIDE),
     "asks for a Python object to be built"),
    ("frame_stack", "frame_stack: 1000000000\n", "frame_stack in {run}/config.yml is 1000000000: sbtf stacks at most"),
    ("frame stack wrapper", "env_wrapper:\n  gymnasium.wrappers.FrameStackObservation: {stack_size: 3.0e+8}\n",
     "stack_size is 300,000,000"),
    ("Monitor filename", "env_wrapper:\n  sbtf.common.monitor.Monitor: {{filename: {}}}\n".format(OUTSIDE),
     "the argument 'filename' names a file or folder"),
    ("RecordVideo", "env_wrapper:\n- gymnasium.wrappers.RecordVideo: {{video_folder: {}}}\n".format(OUTSIDE),
     "the argument 'video_folder' names a file or folder"),
    ("normalize type", "normalize: {clip_obs: abc}\n", "clip_obs must be a finite number > 0, got 'abc'"),
    ("env_kwargs path", "env_kwargs: {log_file: /tmp/x}\n", "the argument 'log_file' names a file or folder"),
    ("colliding keys", "n_steps: 8\nenv_kwargs: " + COLLIDING_KEYS, "keys that are not strings"),
    ("5,000 wrappers", "env_wrapper: [{}]\n".format(", ".join(["gymnasium.wrappers.ClipAction"] * 5000)),
     "lists 5,000 wrappers; sbtf applies at most 32"),
]


@pytest.mark.parametrize("name, config, fragment", RUN_FOLDER_CASES, ids=[case[0] for case in RUN_FOLDER_CASES])
def test_enjoy_refuses_a_hostile_run_folder_in_one_line(tmp_path, model_zip, workspace, capsys, name, config,
                                                        fragment):
    run_dir = _run_folder(tmp_path, model_zip, config=config)
    before = workspace()
    outcome, peak = _peak_bytes(_one_line_error, capsys, _enjoy(tmp_path))
    assert not isinstance(outcome, Exception), outcome
    assert outcome.startswith("sbtf enjoy: error: ")
    assert fragment.format(run=run_dir) in outcome
    assert peak < 64 << 20, peak  # no expansion, no frame buffer, no Monitor file
    assert workspace() == before  # nothing written, in the run folder or anywhere under tmp_path
    assert not any(os.path.exists(OUTSIDE + suffix) for suffix in ("", ".monitor.csv"))


def test_enjoy_refuses_a_hostile_zoo_yml(tmp_path, model_zip, workspace, capsys):
    _run_folder(tmp_path, model_zip, config="policy: MlpPolicy\n", zoo=billion_laughs("deterministic"))
    err = _one_line_error(capsys, _enjoy(tmp_path))
    assert "zoo.yml: the YAML expands to more than" in err
    run_dir = tmp_path / "logs" / "ppo2" / "CartPole-v1_1"
    (run_dir / "zoo.yml").write_text("deterministic: " + "y" * 100_000 + "\n")
    err = _one_line_error(capsys, _enjoy(tmp_path))
    assert "zoo.yml: deterministic must be true or false" in err and len(err) < 800


def test_enjoy_plays_a_benign_run_folder(tmp_path, model_zip, workspace, capsys):
    # the reference for the cases above: the same folder with a plain config plays
    _run_folder(tmp_path, model_zip, config="policy: MlpPolicy\nn_envs: 1\nnormalize: false\n"
                "env_wrapper:\n  gymnasium.wrappers.TimeLimit: {max_episode_steps: 50}\n", zoo="deterministic: true\n")
    before = workspace()
    assert main(_enjoy(tmp_path)) == 0
    assert workspace() == before


@pytest.mark.parametrize("seed", ["-1", str(-2 ** 62), str(2 ** 32)])
def test_seed_out_of_range_is_a_usage_error(tmp_path, model_zip, workspace, capsys, seed):
    _run_folder(tmp_path, model_zip, config="policy: MlpPolicy\n")
    assert main(_enjoy(tmp_path, "--seed", seed)) == 2
    err = capsys.readouterr().err
    assert "--seed: expected an integer from 0 to 2**32 - 1" in err and "Traceback" not in err
    with pytest.raises(ZooConfigError, match=r"seed in the seed argument must be an integer from 0"):
        load_zoo_agent(str(tmp_path), "ppo2", ENV_ID, seed=int(seed))


ZOO_CASES = [
    ("billion laughs", billion_laughs("normalize"), "the YAML expands to more than"),
    ("frame_stack", "frame_stack: 1000000000\n", "frame_stack in"),
    ("Monitor filename", "env_wrapper:\n  sbtf.common.monitor.Monitor: {{filename: {}}}\n".format(OUTSIDE),
     "the argument 'filename' names a file or folder"),
    ("20,000 levels", DEEP_NEST, "nested more than 64 levels deep"),
    ("python tag", "!!python/object/apply:os.system ['touch {}']\n".format(OUTSIDE), "Nothing was run"),
]


@pytest.mark.parametrize("name, config, fragment", ZOO_CASES, ids=[case[0] for case in ZOO_CASES])
def test_zoo_folder_enjoy_and_convert_refuse_in_one_line(tmp_path, model_zip, workspace, capsys, name, config,
                                                         fragment):
    pytest.importorskip("sbtf_converters")
    folder = _zoo_folder(tmp_path, model_zip, config)
    before = workspace()
    err = _one_line_error(capsys, ["enjoy", "--algo", "ppo2", "--env", ENV_ID, "--folder", str(folder), "-n", "3"])
    assert err.startswith("sbtf enjoy: error: cannot load the ppo2 agent") and fragment in err
    err = _one_line_error(capsys, ["convert", "--folder", str(folder), "--algo", "ppo2", "--env", ENV_ID, "-f",
                                   str(tmp_path / "logs")])
    assert err.startswith("sbtf convert: error: cannot convert the ppo2 agent") and fragment in err
    assert workspace() == before
    assert not any(os.path.exists(OUTSIDE + suffix) for suffix in ("", ".monitor.csv"))


def test_train_refuses_hostile_hyperparameter_files(tmp_path, workspace, capsys):
    logs = tmp_path / "logs"
    cases = [
        (billion_laughs("n_envs"), "the YAML expands to more than"),
        ("n_envs: 1000000000\n", "n_envs in the hyperparameters is 1,000,000,000"),
        ("n_envs: [1, 2]\n", "n_envs must be an integer >= 1, got [1, 2]"),
        ("frame_stack: 1000000000\n", "frame_stack in the hyperparameters is 1000000000"),
        ("env_wrapper:\n  sbtf.common.monitor.Monitor: {{filename: {}}}\n".format(OUTSIDE), "names a file or folder"),
        ("- n_envs\n", "must hold a mapping"),
    ]
    for index, (text, fragment) in enumerate(cases):
        path = tmp_path / "hyper{}.yml".format(index)
        path.write_text(text)
        before = workspace()
        err = _one_line_error(capsys, ["train", "--algo", "ppo2", "--env", ENV_ID, "-n", "64", "-f", str(logs),
                                       "--eval-freq", "0", "--no-progress", "--hyperparams", str(path)])
        assert err.startswith("sbtf train: error: ") and fragment in err, (text, err)
        assert workspace() == before
    assert not logs.exists() or not any(logs.rglob("*.zip"))


def test_shipped_hyperparameters_read_through_the_bounded_reader(monkeypatch):
    from sbtf.cli import hyperparams

    seen = []
    original = hyperparams.read_yaml

    def recording(path, **kwargs):
        seen.append(os.path.basename(path))
        return original(path, **kwargs)

    monkeypatch.setattr(hyperparams, "read_yaml", recording)
    for algo in sorted(hyperparams.ALGOS):
        table = hyperparams.load_default_hyperparams(algo)
        assert all(isinstance(entry, dict) for entry in table.values())
    assert "ppo2.yml" in seen and "a2c.yml" in seen


def test_subprocess_prints_one_line_without_traceback(tmp_path, model_zip):
    _run_folder(tmp_path, model_zip, config=billion_laughs("normalize"))
    result = subprocess.run([sys.executable, "-m", "sbtf"] + _enjoy(tmp_path), capture_output=True, text=True,
                            timeout=600, cwd=str(tmp_path))
    err = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert err[-1].startswith("sbtf enjoy: error: ") and "the YAML expands to more than" in err[-1]


def test_enjoy_reports_a_wrapper_failing_while_playing_in_one_line(tmp_path, model_zip, workspace, capsys):
    # plain arguments a wrapper accepts but fails on at the first step
    _run_folder(tmp_path, model_zip, config="env_wrapper:\n  gymnasium.wrappers.ClipReward: {min_reward: abc}\n")
    err = _one_line_error(capsys, _enjoy(tmp_path), code=1)
    assert err.startswith("sbtf enjoy: error: playing CartPole-v1 failed (") and "env_wrapper" in err


SETTING_VALUES = [
    None, True, False, 0, -1, 2 ** 62, -2 ** 62, 1e300, float("nan"), 3.5, "", "x", "{'norm_obs': True}",
    "dict(clip_obs=-1)", "[" * 300, "lambda: 0", [], [1], {}, {"a": 1}, {"norm_obs": "x"}, {1: 2},
    "gymnasium.wrappers.TimeLimit", {"gymnasium.wrappers.TimeLimit": {"max_episode_steps": "x"}},
    {"gymnasium.wrappers.TimeLimit": None}, {"gymnasium.wrappers.TimeLimit": []}, ["gymnasium.wrappers.TimeLimit", 3],
    {"sbtf.common.wrappers.TimeFeatureWrapper": {"max_steps": -5}}, {"a.b": 1, "c.d": 2},
    {"gymnasium.wrappers.FrameStackObservation": {"stack_size": "x"}}, {"gymnasium.wrappers.ClipAction": {"bad": 1}},
    {"gymnasium.wrappers.ResizeObservation": {"shape": "abc"}}, "sbtf.common.vec_env.VecNormalize", ".", "a..b",
    {"x": {"y": [1, {"q": None}]}}, ["x"] * 10_000,
]


def test_malformed_settings_only_raise_typed_errors():
    """A seeded sample of malformed config.yml settings, through the command's and the zoo loader's routes (settings,
    wrapper names and arguments, wrapping an env): only CLIError / ModelFileError, each message bounded."""
    import random

    import gymnasium

    from sbtf.cli import CLIError, env_settings, wrapper_class
    from sbtf.zoo.agent import _resolve_wrapper
    from sbtf.zoo.config import zoo_settings

    def cli_route(config):
        settings = env_settings(config, (), "c.yml")
        wrap = wrapper_class(settings.env_wrapper, settings)
        if wrap is not None:
            wrap(gymnasium.make(ENV_ID))

    def zoo_route(config):
        for path, kwargs in zoo_settings(config, None, "c.yml").env_wrappers:
            _resolve_wrapper(path, kwargs, (), "c.yml")[1](gymnasium.make(ENV_ID))

    rng = random.Random(0)
    keys = ["normalize", "frame_stack", "env_wrapper", "env_kwargs"]
    typed = 0
    for _ in range(400):
        config = {key: rng.choice(SETTING_VALUES) for key in rng.sample(keys, rng.randint(1, 4))}
        for route in (cli_route, zoo_route):
            try:
                route(config)
            except (CLIError, ModelFileError) as exc:
                typed += 1
                assert len(str(exc)) < 2000, str(exc)[:300]
    assert typed > 400  # most samples are malformed


ZOO_CONFIG = """\
!!python/object/apply:collections.OrderedDict
- - [env_wrapper, {gymnasium.wrappers.TimeLimit: {max_episode_steps: 200}}]
  - [frame_stack, 4]
  - [n_envs, 8]
  - [n_timesteps, 1000000.0]
  - [normalize, '{"norm_obs": True, "norm_reward": False}']
  - [env_kwargs, {g: 9.8}]
  - [policy, MlpPolicy]
  - [policy_kwargs, 'dict(net_arch=[64, 64])']
"""
#: fragments a mutation inserts: YAML syntax that builds structure, aliases, tags, deep nests
FRAGMENTS = ["&a ", "*a", "[", "]", "{", "}", ": ", "- ", "\n  ", "!!python/object/apply:os.system ", "!!binary ",
             "<<: *a\n", "? ", "'", '"', "\\", "\xff", "&b [*a, *a, *a, *a]", "!!set ", "0x" + "f" * 40, "[" * 100,
             "~", ".nan", "1e400", "2001-01-01"]


@pytest.mark.usefixtures("both_parsers")
def test_fuzzed_configs_only_raise_typed_errors():
    """300 seeded mutants of a zoo config.yml (byte flips, deletions, inserted YAML syntax), read and turned into env
    settings as ``sbtf enjoy`` and the zoo loader do: each one loads or raises a typed error, in bounded memory."""
    import random

    from sbtf.cli import CLIError, env_settings
    from sbtf.zoo.config import zoo_settings

    rng = random.Random(34)
    base = ZOO_CONFIG.encode()
    outcomes = {"loaded": 0, "typed": 0}
    worst_peak = 0
    for _ in range(300):
        data = bytearray(base)
        for _ in range(rng.randint(1, 6)):
            position = rng.randrange(len(data))
            action = rng.random()
            if action < 0.3:
                data[position] = rng.randrange(256)
            elif action < 0.5:
                del data[position:position + rng.randint(1, 8)]
            else:
                fragment = rng.choice(FRAGMENTS)
                data[position:position] = fragment.encode("utf-8", "surrogateescape") if fragment != "\xff" \
                    else b"\xff"

        def read_and_apply(text=bytes(data)):
            config = load_yaml(text, "config.yml")
            env_settings(config, (), "config.yml")
            zoo_settings(config, None, "config.yml")
            return config

        outcome, peak = _peak_bytes(read_and_apply)
        worst_peak = max(worst_peak, peak)
        if isinstance(outcome, (CLIError, ModelFileError)):
            outcomes["typed"] += 1
            assert len(str(outcome)) < 2000
        else:
            assert not isinstance(outcome, Exception), repr(outcome)[:500]
            outcomes["loaded"] += 1
    assert outcomes["typed"] > 50 and outcomes["loaded"] > 10, outcomes
    assert worst_peak < 8 << 20, worst_peak
