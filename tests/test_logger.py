"""Behaviour of sbtf.logger: formats, configuration, levels, readers."""
import json
import os

import numpy as np
import pytest

from sbtf import logger


@pytest.fixture(autouse=True)
def _restore_logger():
    yield
    logger.reset()
    logger.Logger.DEFAULT.set_level(logger.INFO)


def test_constants_match_sb2():
    assert (logger.DEBUG, logger.INFO, logger.WARN, logger.ERROR, logger.DISABLED) == (10, 20, 30, 40, 50)
    assert logger.record_tabular is logger.logkv
    assert logger.dump_tabular is logger.dumpkvs


def test_configure_writes_stdout_log_csv_json(tmp_path, capsys):
    logger.configure(str(tmp_path), ["stdout", "log", "csv", "json"])
    assert logger.get_dir() == str(tmp_path)
    logger.logkv("a", 1)
    logger.logkv("b", 2.5)
    logger.logkv_mean("m", 1.0)
    logger.logkv_mean("m", 3.0)
    assert logger.getkvs()["m"] == pytest.approx(2.0)
    logger.dumpkvs()
    logger.logkvs({"a": 3, "b": np.float64(4.0), "m": 7})
    logger.dumpkvs()
    out = capsys.readouterr().out
    assert "Logging to %s" % tmp_path in out
    assert "| a | 1        |" in out and "| b | 2.5      |" in out
    logger.reset()

    csv = logger.read_csv(str(tmp_path / "progress.csv"))
    assert list(csv.columns) == ["a", "b", "m"]
    assert csv["a"].tolist() == [1, 3]
    assert csv["m"].tolist() == [2.0, 7]
    js = logger.read_json(str(tmp_path / "progress.json"))
    assert js["b"].tolist() == [2.5, 4.0]
    text = (tmp_path / "log.txt").read_text()
    assert "Logging to" in text and "| m | 2        |" in text


def test_csv_new_key_rewrites_header_and_pads_old_rows(tmp_path):
    fmt = logger.CSVOutputFormat(str(tmp_path / "p.csv"))
    fmt.writekvs({"x": 1})
    fmt.writekvs({"x": 2, "y": 5})
    fmt.writekvs({"y": 6})
    fmt.close()
    lines = (tmp_path / "p.csv").read_text().splitlines()
    assert lines == ["x,y", "1,", "2,5", ",6"]


def test_human_format_layout_and_truncation(tmp_path):
    path = tmp_path / "h.txt"
    fmt = logger.HumanOutputFormat(str(path))
    fmt.writekvs({"short": 0.123456, "a_very_long_key_name_that_goes_on": "v"})
    fmt.writeseq(["hello", "world"])
    fmt.close()
    lines = path.read_text().splitlines()
    assert lines[0] == "-" * len(lines[1]) and lines[3] == lines[0]
    assert lines[1].startswith("| a_very_long_key_name...")
    assert lines[2].startswith("| short") and "0.123   " in lines[2]
    assert lines[4] == "hello world"
    with pytest.warns(UserWarning):
        logger.HumanOutputFormat(str(tmp_path / "e.txt")).writekvs({})


def test_json_format_serialises_numpy(tmp_path):
    fmt = logger.JSONOutputFormat(str(tmp_path / "p.json"))
    fmt.writekvs({"scalar": np.float32(1.5), "vec": np.array([1, 2, 3]), "one": np.array([4.0])})
    fmt.close()
    row = json.loads((tmp_path / "p.json").read_text())
    assert row == {"one": 4.0, "scalar": 1.5, "vec": [1, 2, 3]}


def test_env_vars_choose_folder_and_formats(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_LOGDIR", str(tmp_path / "envdir"))
    monkeypatch.setenv("OPENAI_LOG_FORMAT", "csv,json")
    logger.configure()
    assert logger.get_dir() == str(tmp_path / "envdir")
    logger.logkv("k", 1)
    logger.dumpkvs()
    assert capsys.readouterr().out == ""  # no stdout format
    logger.reset()
    assert sorted(os.listdir(tmp_path / "envdir")) == ["progress.csv", "progress.json"]


def test_configure_without_folder_uses_tempdir(monkeypatch):
    monkeypatch.delenv("OPENAI_LOGDIR", raising=False)
    logger.configure(format_strs=[])
    assert os.path.basename(logger.get_dir()).startswith("openai-")
    assert os.path.isdir(logger.get_dir())


def test_levels(capsys):
    assert logger.get_level() == logger.INFO
    logger.debug("hidden-debug")
    logger.info("shown-info")
    logger.set_level(logger.DEBUG)
    assert logger.get_level() == logger.DEBUG
    logger.debug("shown-debug")
    logger.set_level(logger.ERROR)
    logger.warn("hidden-warn")
    logger.error("shown-error")
    logger.log("a", 1, "b", level=logger.ERROR)
    out = capsys.readouterr().out
    assert "hidden" not in out
    assert "shown-info" in out and "shown-debug" in out and "shown-error" in out and "a 1 b" in out


def test_disabled_level_skips_dump(tmp_path):
    logger.configure(str(tmp_path), ["csv"])
    logger.set_level(logger.DISABLED)
    logger.logkv("x", 1)
    logger.dumpkvs()
    logger.reset()
    assert (tmp_path / "progress.csv").read_text() == ""


def test_scoped_configure_restores_previous(tmp_path):
    before = logger.Logger.CURRENT
    with logger.ScopedConfigure(str(tmp_path / "scoped"), ["csv"]):
        assert logger.get_dir() == str(tmp_path / "scoped")
        logger.logkv("x", 5)
        logger.dumpkvs()
    assert logger.Logger.CURRENT is before
    assert logger.read_csv(str(tmp_path / "scoped" / "progress.csv"))["x"].tolist() == [5]


def test_reset_returns_to_default(tmp_path):
    logger.configure(str(tmp_path), ["csv"])
    assert logger.Logger.CURRENT is not logger.Logger.DEFAULT
    logger.reset()
    assert logger.Logger.CURRENT is logger.Logger.DEFAULT
    assert logger.get_dir() is None


def test_sb3_aliases(tmp_path):
    logger.configure(str(tmp_path), ["csv"])
    logger.record("r", 1.0)
    logger.record_mean("rm", 2.0)
    logger.record_mean("rm", 4.0)
    logger.dump()
    logger.reset()
    row = logger.read_csv(str(tmp_path / "progress.csv"))
    assert row["r"].tolist() == [1.0] and row["rm"].tolist() == [3.0]


def test_profile_records_wait_time():
    @logger.profile("work")
    def work(x):
        return x * 2

    assert work(3) == 6
    with logger.ProfileKV("block"):
        pass
    kvs = logger.getkvs()
    assert kvs["wait_work"] >= 0.0 and "wait_block" in kvs
    logger.Logger.CURRENT.name2val.clear()


def test_unknown_format_raises(tmp_path):
    with pytest.raises(ValueError, match="Unknown format"):
        logger.make_output_format("xml", str(tmp_path))


def test_valid_float_value():
    assert logger.valid_float_value(1) and logger.valid_float_value(np.float32(2.0))
    assert not logger.valid_float_value("abc") and not logger.valid_float_value(None)


def test_tensorboard_output_read_back(tmp_path):
    logger.configure(str(tmp_path), ["tensorboard"])
    for i in range(3):
        logger.logkv("loss", float(i) * 0.5)
        logger.logkv("name", "not-a-number")
        if i != 1:
            logger.logkv("sparse", i)
        logger.dumpkvs()
    logger.reset()
    tb_dir = tmp_path / "tb"
    assert any(f.startswith("events.") for f in os.listdir(tb_dir))
    frame = logger.read_tb(str(tb_dir))
    assert list(frame.columns) == ["loss", "sparse"]
    assert frame["loss"].tolist() == [0.0, 0.5, 1.0]
    assert frame["sparse"].iloc[0] == 0.0 and np.isnan(frame["sparse"].iloc[1]) and frame["sparse"].iloc[2] == 2.0

    import tensorflow as tf

    event_file = [os.path.join(tb_dir, f) for f in os.listdir(tb_dir) if f.startswith("events.")][0]
    steps = [e.step for e in tf.compat.v1.train.summary_iterator(event_file) if e.summary.value]
    assert sorted(set(steps)) == [1, 2, 3]
    with pytest.raises(NotImplementedError):
        logger.read_tb(str(tmp_path / "not_events.txt"))
