"""``sbtf plot`` and the learning curves behind it: smoothing, mean +/- std over seeds, the PNG, and the
``learning_curve.png`` that ``sbtf train`` writes."""
from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pytest
from PIL import Image

from sbtf import results_plotter as rp
from sbtf.cli import main


def write_run(folder, returns, ep_len=20, n_envs=1):
    """A run folder with monitor files: episode i of each env returns ``returns[i]`` and lasts ``ep_len`` steps."""
    folder.mkdir(parents=True, exist_ok=True)
    for rank in range(n_envs):
        with open(folder / "{}.monitor.csv".format(rank), "w", encoding="utf-8") as handle:
            handle.write("#{}\n".format(json.dumps({"t_start": 1000.0, "env_id": "CartPole-v1"})))
            handle.write("r,l,t\n")
            for index, value in enumerate(returns):
                handle.write("{},{},{}\n".format(float(value), ep_len, 0.5 * index + 0.01 * rank))
    return folder


def test_smooth_is_a_causal_moving_average_of_the_same_length():
    values = np.array([0.0, 2.0, 4.0, 6.0, 8.0])
    np.testing.assert_allclose(rp.smooth(values, 2), [0.0, 1.0, 3.0, 5.0, 7.0])
    np.testing.assert_allclose(rp.smooth(values, 1), values)
    np.testing.assert_allclose(rp.smooth(values, 100), np.cumsum(values) / np.arange(1, 6))
    with pytest.raises(ValueError, match="at least 1"):
        rp.smooth(values, 0)


def test_mean_std_curve_interpolates_runs_on_the_common_range():
    x_a, x_b = np.arange(1, 11) * 10.0, np.arange(1, 21) * 5.0  # both cover 10..100
    grid, mean, std = rp.mean_std_curve([(x_a, np.full(10, 100.0)), (x_b, np.full(20, 300.0))], window=1,
                                        n_points=5)
    np.testing.assert_allclose(grid, [10.0, 32.5, 55.0, 77.5, 100.0])
    np.testing.assert_allclose(mean, 200.0)
    np.testing.assert_allclose(std, 100.0)
    with pytest.raises(ValueError, match="no episodes"):
        rp.mean_std_curve([(np.array([]), np.array([]))])


def test_load_curve_merges_the_envs_of_a_run(tmp_path):
    run = write_run(tmp_path / "run", [1, 2, 3, 4], ep_len=10, n_envs=2)
    x_var, y_var = rp.load_curve(str(run), rp.X_TIMESTEPS)
    np.testing.assert_allclose(x_var, np.arange(1, 9) * 10)  # 8 episodes of 10 steps, by end time
    np.testing.assert_allclose(y_var, [1, 1, 2, 2, 3, 3, 4, 4])
    x_eps, _ = rp.load_curve(str(run), rp.X_EPISODES, max_x=3)
    assert x_eps.tolist() == [0, 1, 2, 3]


def _colour_pixels(path, rgb, tolerance=12):
    pixels = np.asarray(Image.open(path).convert("RGB")).astype(int)
    return int(np.sum(np.all(np.abs(pixels - np.array(rgb)) <= tolerance, axis=-1)))


def test_sbtf_plot_draws_mean_and_band_over_seeds(tmp_path, capsys):
    logs = tmp_path / "logs"
    rng = np.random.default_rng(0)
    for run_id, level in ((1, 100.0), (2, 200.0), (3, 300.0)):  # three seeds: mean 200, std 81.6
        write_run(logs / "ppo2" / "CartPole-v1_{}".format(run_id), level + rng.normal(0, 1, 120))
    write_run(logs / "a2c" / "CartPole-v1_1", np.linspace(0, 500, 120))
    out_png = tmp_path / "plots" / "curves.png"
    assert main(["plot", "-f", str(logs), "--algo", "ppo2", "a2c", "--env", "CartPole-v1", "-o", str(out_png),
                 "-w", "10", "--figsize", "6", "4"]) == 0
    out = capsys.readouterr().out
    assert "ppo2 on CartPole-v1: 3 run(s) (120 episodes, 120 episodes, 120 episodes)" in out
    assert "a2c on CartPole-v1: 1 run(s)" in out
    assert "Saved the learning curves to {}".format(out_png) in out
    with Image.open(out_png) as image:
        assert image.format == "PNG" and image.size == (600, 400)
    # ppo2 (first colour, blue): a mean line and a light band of alpha 0.2 over white; a2c (green): a line
    assert _colour_pixels(out_png, (0, 0, 255), tolerance=40) > 300
    assert _colour_pixels(out_png, (204, 204, 255), tolerance=10) > 3000
    assert _colour_pixels(out_png, (0, 128, 0), tolerance=40) > 200

    # only run 1, x = episodes, default output name in the log folder
    assert main(["plot", "-f", str(logs), "--algo", "ppo2", "--env", "CartPole-v1", "--exp-id", "1",
                 "-x", "episodes"]) == 0
    assert "ppo2 on CartPole-v1: 1 run(s) (120 episodes)" in capsys.readouterr().out
    assert (logs / "CartPole-v1_ppo2.png").is_file()


def test_sbtf_plot_errors_are_one_line(tmp_path, capsys):
    assert main(["plot", "-f", str(tmp_path), "--algo", "ppo2", "--env", "CartPole-v1"]) == 2
    err = capsys.readouterr().err
    assert "no runs with monitor files in {} for ppo2/CartPole-v1_*".format(tmp_path) in err
    assert "Traceback" not in err
    write_run(tmp_path / "ppo2" / "CartPole-v1_1", [1.0, 2.0])
    assert main(["plot", "-f", str(tmp_path), "--algo", "ppo2", "--env", "CartPole-v1", "-w", "0"]) == 2
    assert "--window must be at least 1" in capsys.readouterr().err


def test_train_writes_learning_curve_png(tmp_path):
    logs = tmp_path / "logs"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["train", "--algo", "a2c", "--env", "CartPole-v1", "-n", "1000", "-f", str(logs), "--eval-freq",
                     "0", "--no-progress", "--verbose", "0"]) == 0
    png = logs / "a2c" / "CartPole-v1_1" / "learning_curve.png"
    assert "Saved the learning curve to {}".format(png) in out.getvalue()
    with Image.open(png) as image:
        assert image.format == "PNG" and image.size == (800, 450)
    assert _colour_pixels(png, (0, 0, 255), tolerance=40) > 100  # the curve was drawn
