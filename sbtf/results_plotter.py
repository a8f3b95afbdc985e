"""Plot learning curves from ``Monitor`` logs (stable-baselines 2.x ``results_plotter``).

``plot_results`` / ``plot_curves`` draw on a new matplotlib figure and return it (stable-baselines
returned nothing); ``figsize`` is an extra keyword with the old size as default. A colour of
``COLORS`` that matplotlib does not know (``'lightpurple'``) is drawn as ``'mediumpurple'``, and
more curves than colours cycle through the list instead of failing.

Beyond stable-baselines: :func:`plot_learning_curves` draws groups of runs (e.g. one algorithm on one env,
several seeds) as smoothed curves, with the mean and a +/- one standard deviation band over the runs of a group,
on a figure that does not touch pyplot's state (``sbtf plot`` and the ``learning_curve.png`` of ``sbtf train``).
"""
from __future__ import annotations

import argparse
import os
from typing import Any, Callable, List, Optional, Sequence, Tuple

import numpy as np

from sbtf.bench.monitor import load_results

X_TIMESTEPS = "timesteps"
X_EPISODES = "episodes"
X_WALLTIME = "walltime_hrs"
POSSIBLE_X_AXES = [X_TIMESTEPS, X_EPISODES, X_WALLTIME]
EPISODES_WINDOW = 100
COLORS = [
    "blue", "green", "red", "cyan", "magenta", "yellow", "black", "purple", "pink", "brown", "orange", "teal",
    "coral", "lightblue", "lime", "lavender", "turquoise", "darkgreen", "tan", "salmon", "gold", "lightpurple",
    "darkred", "darkblue",
]

__all__ = [
    "X_TIMESTEPS", "X_EPISODES", "X_WALLTIME", "POSSIBLE_X_AXES", "EPISODES_WINDOW", "COLORS", "rolling_window",
    "window_func", "ts2xy", "plot_curves", "plot_results", "load_results", "main", "smooth", "load_curve",
    "mean_std_curve", "plot_learning_curves", "LearningCurves",
]


def rolling_window(array: np.ndarray, window: int) -> np.ndarray:
    """
    apply a rolling window to a np.ndarray

    :param array: (np.ndarray) the input Array
    :param window: (int) length of the rolling window
    :return: (np.ndarray) rolling window on the input array, shape ``array.shape[:-1] + (n - window + 1, window)``
    """
    array = np.asarray(array)
    if window < 1 or window > array.shape[-1]:
        raise ValueError("window must be between 1 and the array length {}, got {}".format(array.shape[-1], window))
    shape = array.shape[:-1] + (array.shape[-1] - window + 1, window)
    strides = array.strides + (array.strides[-1],)
    return np.lib.stride_tricks.as_strided(array, shape=shape, strides=strides, writeable=False)


def window_func(
    var_1: np.ndarray, var_2: np.ndarray, window: int, func: Callable[..., np.ndarray]
) -> Tuple[np.ndarray, np.ndarray]:
    """
    apply a function to the rolling window of 2 arrays

    :param var_1: (np.ndarray) variable 1
    :param var_2: (np.ndarray) variable 2
    :param window: (int) length of the rolling window
    :param func: (numpy function) function to apply on the rolling window on variable 2 (such as np.mean)
    :return: (np.ndarray, np.ndarray)  the rolling output with applied function
    """
    var_2_window = rolling_window(var_2, window)
    function_on_var2 = func(var_2_window, axis=-1)
    return np.asarray(var_1)[window - 1:], function_on_var2


def ts2xy(timesteps: Any, xaxis: str) -> Tuple[np.ndarray, np.ndarray]:
    """
    Decompose a timesteps variable to x ans ys

    :param timesteps: (pandas DataFrame) the input data (from ``load_results``)
    :param xaxis: (str) the axis for the x and y output
        (can be X_TIMESTEPS='timesteps', X_EPISODES='episodes' or X_WALLTIME='walltime_hrs')
    :return: (np.ndarray, np.ndarray) the x and y output
    """
    if xaxis == X_TIMESTEPS:
        x_var = np.cumsum(timesteps.l.values)
        y_var = timesteps.r.values
    elif xaxis == X_EPISODES:
        x_var = np.arange(len(timesteps))
        y_var = timesteps.r.values
    elif xaxis == X_WALLTIME:
        x_var = timesteps.t.values / 3600.0
        y_var = timesteps.r.values
    else:
        raise NotImplementedError("xaxis must be one of {}, got {!r}".format(POSSIBLE_X_AXES, xaxis))
    return x_var, y_var


def _color(index: int) -> str:
    from matplotlib.colors import is_color_like

    color = COLORS[index % len(COLORS)]
    return color if is_color_like(color) else "mediumpurple"


def plot_curves(
    xy_list: Sequence[Tuple[np.ndarray, np.ndarray]], xaxis: str, title: str, figsize: Tuple[float, float] = (8, 2)
) -> Any:
    """
    plot the curves

    :param xy_list: ([(np.ndarray, np.ndarray)]) the x and y coordinates to plot
    :param xaxis: (str) the axis for the x and y output
        (can be X_TIMESTEPS='timesteps', X_EPISODES='episodes' or X_WALLTIME='walltime_hrs')
    :param title: (str) the title of the plot
    :param figsize: (tuple) size of the figure in inches
    :return: (matplotlib.figure.Figure) the figure drawn on
    """
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=figsize)
    non_empty = [xy for xy in xy_list if len(xy[0]) > 0]
    maxx = max((xy[0][-1] for xy in non_empty), default=1)
    minx = 0
    for (i, (x_var, y_var)) in enumerate(xy_list):
        color = _color(i)
        plt.scatter(x_var, y_var, s=2, color=color)
        # Do not plot the smoothed curve at all if the timeseries is shorter than window size.
        if len(x_var) >= EPISODES_WINDOW:
            x_smooth, y_mean = window_func(x_var, y_var, EPISODES_WINDOW, np.mean)
            plt.plot(x_smooth, y_mean, color=color)
    if maxx > minx:
        plt.xlim(minx, maxx)
    plt.title(title)
    plt.xlabel(xaxis)
    plt.ylabel("Episode Rewards")
    plt.tight_layout()
    return fig


def plot_results(
    dirs: Sequence[str],
    num_timesteps: Optional[int],
    xaxis: str,
    task_name: str,
    figsize: Tuple[float, float] = (8, 2),
) -> Any:
    """
    plot the results

    :param dirs: ([str]) the save location of the results to plot
    :param num_timesteps: (int or None) only plot the points below this value
    :param xaxis: (str) the axis for the x and y output
        (can be X_TIMESTEPS='timesteps', X_EPISODES='episodes' or X_WALLTIME='walltime_hrs')
    :param task_name: (str) the title of the task to plot
    :param figsize: (tuple) size of the figure in inches
    :return: (matplotlib.figure.Figure) the figure drawn on
    """
    tslist = []
    for folder in dirs:
        timesteps = load_results(folder)
        if num_timesteps is not None:
            timesteps = timesteps[timesteps.l.cumsum() <= num_timesteps]
        tslist.append(timesteps)
    xy_list = [ts2xy(timesteps_item, xaxis) for timesteps_item in tslist]
    return plot_curves(xy_list, xaxis, task_name, figsize=figsize)


def smooth(values: Any, window: int) -> np.ndarray:
    """
    Moving average over the last ``window`` values (fewer at the start, so the output is as long as the input).

    :param values: (np.ndarray) 1-D values (episode returns)
    :param window: (int) window length (1: no smoothing)
    :return: (np.ndarray) float array, same length
    """
    values = np.asarray(values, dtype=np.float64).reshape(-1)
    if window < 1:
        raise ValueError("the smoothing window must be at least 1, got {}".format(window))
    if values.size == 0:
        return values
    cumsum = np.concatenate([[0.0], np.cumsum(values)])
    ends = np.arange(1, values.size + 1)
    starts = np.maximum(ends - window, 0)
    return (cumsum[ends] - cumsum[starts]) / (ends - starts)


def load_curve(folder: str, xaxis: str = X_TIMESTEPS, max_x: Optional[float] = None) -> Tuple[np.ndarray, np.ndarray]:
    """
    The learning curve of one run: x (``xaxis``) and the episode returns, from the ``Monitor`` files of ``folder``
    (all its ``*.monitor.csv``, episodes ordered by the time they ended).

    :param folder: (str) a folder with monitor files (a run folder of ``sbtf train``)
    :param xaxis: (str) X_TIMESTEPS, X_EPISODES or X_WALLTIME
    :param max_x: (float) keep only the episodes up to this x
    :return: (np.ndarray, np.ndarray) x and returns
    """
    x_var, y_var = ts2xy(load_results(folder), xaxis)
    x_var, y_var = np.asarray(x_var, dtype=np.float64), np.asarray(y_var, dtype=np.float64)
    if max_x is not None:
        keep = x_var <= max_x
        x_var, y_var = x_var[keep], y_var[keep]
    return x_var, y_var


def mean_std_curve(curves: Sequence[Tuple[np.ndarray, np.ndarray]], window: int = EPISODES_WINDOW,
                   n_points: int = 200) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """
    Smooth each run's curve, interpolate them on a common x grid (the x range every run covers) and return their
    mean and standard deviation there.

    :param curves: ([(np.ndarray, np.ndarray)]) the (x, returns) of each run (x increasing)
    :param window: (int) smoothing window (episodes)
    :param n_points: (int) points of the common grid
    :return: (np.ndarray, np.ndarray, np.ndarray) grid, mean, std
    """
    curves = [(np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)) for x, y in curves if len(x) > 0]
    if not curves:
        raise ValueError("no episodes to draw")
    low, high = max(x[0] for x, _ in curves), min(x[-1] for x, _ in curves)
    grid = np.array([low]) if high <= low else np.linspace(low, high, n_points)
    stacked = np.stack([np.interp(grid, x, smooth(y, window)) for x, y in curves])
    return grid, stacked.mean(axis=0), stacked.std(axis=0)


#: the curves of ``plot_learning_curves``: (label, [(x, returns) of each run])
LearningCurves = Sequence[Tuple[str, Sequence[Tuple[np.ndarray, np.ndarray]]]]

_X_LABELS = {X_TIMESTEPS: "Timesteps", X_EPISODES: "Episodes", X_WALLTIME: "Wall time (hours)"}


def plot_learning_curves(groups: LearningCurves, xaxis: str = X_TIMESTEPS, title: str = "",
                         window: int = EPISODES_WINDOW, figsize: Tuple[float, float] = (8, 4.5)) -> Any:
    """
    Draw learning curves on a new figure (not registered with pyplot: save it with ``fig.savefig(path)``).

    A group with one run is drawn as its raw episode returns (faint dots) and their moving average; a group with
    several runs (seeds) as the mean of their smoothed curves with a band of +/- one standard deviation.

    :param groups: ([(str, [(np.ndarray, np.ndarray)])]) a label and the (x, returns) of each run, per group
    :param xaxis: (str) X_TIMESTEPS, X_EPISODES or X_WALLTIME (the x label)
    :param title: (str) the figure's title
    :param window: (int) smoothing window (episodes)
    :param figsize: (tuple) size in inches
    :return: (matplotlib.figure.Figure)
    """
    from matplotlib.figure import Figure  # pylint: disable=import-outside-toplevel

    fig = Figure(figsize=figsize)
    axes = fig.add_subplot(1, 1, 1)
    for index, (label, curves) in enumerate(groups):
        color = _color(index)
        curves = [curve for curve in curves if len(curve[0]) > 0]
        if not curves:
            continue
        if len(curves) == 1:
            x_var, y_var = curves[0]
            axes.scatter(x_var, y_var, s=4, color=color, alpha=0.35, linewidths=0)
            axes.plot(x_var, smooth(y_var, window), color=color, label=label)
        else:
            grid, mean, std = mean_std_curve(curves, window)
            axes.plot(grid, mean, color=color, label="{} (mean of {} runs)".format(label, len(curves)))
            axes.fill_between(grid, mean - std, mean + std, color=color, alpha=0.2, linewidth=0)
    axes.set_xlabel(_X_LABELS.get(xaxis, xaxis))
    axes.set_ylabel("Episode return (moving average over {} episodes)".format(window) if window > 1
                    else "Episode return")
    axes.set_title(title)
    axes.grid(alpha=0.3)
    if axes.get_legend_handles_labels()[0]:
        axes.legend(loc="best")
    fig.tight_layout()
    return fig


def main(argv: Optional[List[str]] = None) -> None:
    """
    Example usage in jupyter-notebook

    .. code-block:: python

        from sbtf import results_plotter
        %matplotlib inline
        results_plotter.plot_results(["./log"], 10e6, results_plotter.X_TIMESTEPS, "Breakout")

    Here ./log is a directory containing the monitor.csv files

    :param argv: ([str] or None) the command line (``sys.argv[1:]`` when None)
    """
    parser = argparse.ArgumentParser(formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--dirs", help="List of log directories", nargs="*", default=["./log"])
    parser.add_argument("--num_timesteps", type=int, default=int(10e6))
    parser.add_argument("--xaxis", help="Varible on X-axis", default=X_TIMESTEPS, choices=POSSIBLE_X_AXES)
    parser.add_argument("--task_name", help="Title of plot", default="Breakout")
    parser.add_argument("--output", help="Save the figure to this file instead of showing it", default=None)
    args = parser.parse_args(argv)
    args.dirs = [os.path.abspath(folder) for folder in args.dirs]
    import matplotlib.pyplot as plt

    fig = plot_results(args.dirs, args.num_timesteps, args.xaxis, args.task_name)
    if args.output is not None:
        fig.savefig(args.output)
        plt.close(fig)
    else:
        plt.show()


if __name__ == "__main__":
    main()
