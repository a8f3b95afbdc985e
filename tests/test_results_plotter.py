"""Behaviour of sbtf.results_plotter on real monitor files, drawn with matplotlib's Agg backend."""
import json

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from sbtf import results_plotter as rp  # noqa: E402


def write_monitor(folder, n_episodes, t_start=1000.0, ep_len=10):
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "0.monitor.csv", "w") as f:
        f.write("#%s\n" % json.dumps({"t_start": t_start, "env_id": "CartPole-v1"}))
        f.write("r,l,t\n")
        for i in range(n_episodes):
            f.write("{},{},{}\n".format(float(i), ep_len, 36.0 * (i + 1)))
    return str(folder)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def test_constants():
    assert (rp.X_TIMESTEPS, rp.X_EPISODES, rp.X_WALLTIME) == ("timesteps", "episodes", "walltime_hrs")
    assert rp.POSSIBLE_X_AXES == [rp.X_TIMESTEPS, rp.X_EPISODES, rp.X_WALLTIME]
    assert rp.EPISODES_WINDOW == 100 and len(rp.COLORS) == 24 and rp.COLORS[0] == "blue"


def test_rolling_window_and_window_func():
    arr = np.arange(5.0)
    windows = rp.rolling_window(arr, 3)
    assert windows.tolist() == [[0, 1, 2], [1, 2, 3], [2, 3, 4]]
    x, y = rp.window_func(np.arange(10, 15), arr, 3, np.mean)
    assert x.tolist() == [12, 13, 14] and y.tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(ValueError):
        rp.rolling_window(arr, 6)


def test_ts2xy():
    frame = pd.DataFrame({"r": [1.0, 2.0, 3.0], "l": [5, 6, 7], "t": [3600.0, 7200.0, 10800.0]})
    x, y = rp.ts2xy(frame, rp.X_TIMESTEPS)
    assert x.tolist() == [5, 11, 18] and y.tolist() == [1.0, 2.0, 3.0]
    x, _ = rp.ts2xy(frame, rp.X_EPISODES)
    assert x.tolist() == [0, 1, 2]
    x, _ = rp.ts2xy(frame, rp.X_WALLTIME)
    assert x.tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(NotImplementedError):
        rp.ts2xy(frame, "bogus")


def test_plot_results_draws_scatter_and_smoothed_curve(tmp_path):
    log_dir = write_monitor(tmp_path / "a", n_episodes=150)
    fig = rp.plot_results([log_dir], None, rp.X_TIMESTEPS, "CartPole", figsize=(6, 3))
    assert isinstance(fig, Figure)
    assert tuple(fig.get_size_inches()) == (6.0, 3.0)
    ax = fig.axes[0]
    assert ax.get_title() == "CartPole" and ax.get_xlabel() == "timesteps" and ax.get_ylabel() == "Episode Rewards"
    scatter = ax.collections[0].get_offsets()
    assert len(scatter) == 150
    assert scatter[-1].tolist() == [1500.0, 149.0]
    (line,) = ax.get_lines()
    # smoothed: mean of a 100-episode window, starting at the 100th episode
    assert line.get_xdata()[0] == 1000 and line.get_ydata()[0] == pytest.approx(np.mean(np.arange(100)))
    assert ax.get_xlim() == (0.0, 1500.0)
    out = tmp_path / "plot.png"
    fig.savefig(out)
    assert out.stat().st_size > 1000


def test_plot_results_num_timesteps_and_short_runs(tmp_path):
    a = write_monitor(tmp_path / "a", n_episodes=50)
    b = write_monitor(tmp_path / "b", n_episodes=30, ep_len=20)
    fig = rp.plot_results([a, b], 200, rp.X_EPISODES, "two runs")
    ax = fig.axes[0]
    assert [len(c.get_offsets()) for c in ax.collections] == [20, 10]
    assert ax.get_lines() == []  # shorter than the window: no smoothed curve


def test_plot_curves_many_curves_does_not_fail():
    xy = [(np.arange(5), np.arange(5.0) * i) for i in range(30)]
    fig = rp.plot_curves(xy, rp.X_EPISODES, "many")
    assert len(fig.axes[0].collections) == 30


def test_main_cli_saves_figure(tmp_path):
    log_dir = write_monitor(tmp_path / "run", n_episodes=120)
    out = tmp_path / "cli.png"
    rp.main(["--dirs", log_dir, "--xaxis", rp.X_WALLTIME, "--task_name", "cli", "--output", str(out)])
    assert out.exists() and out.stat().st_size > 1000
    assert rp.load_results(log_dir)["r"].tolist()[:3] == [0.0, 1.0, 2.0]
