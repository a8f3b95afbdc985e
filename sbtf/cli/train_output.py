"""
What ``sbtf train`` prints while it learns: at ``--verbose 1`` one line per log interval (steps, mean episode return,
fps) above the progress bar instead of the algorithm's table; at ``--verbose 2`` the full tables.
"""
from __future__ import annotations

import contextlib
import math
import numbers
import sys
from typing import Any, Dict, Iterator, List, Optional, Sequence, TextIO

from sbtf import logger as sbtf_logger

__all__ = ["SummaryLineFormat", "summary_line", "one_line_logs"]

#: the columns of the one-line summary, each with the log keys the algorithms use for it (the first present wins):
#: stable-baselines3 / sb3-contrib, SB2's on-policy, SAC / TD3, DQN, the MPI family (PPO1, TRPO, GAIL), DDPG
SUMMARY_COLUMNS: Sequence[tuple] = (
    ("steps", ("time/total_timesteps", "total_timesteps", "total timesteps", "steps", "TimestepsSoFar",
               "total/steps")),
    ("ep_rew_mean", ("rollout/ep_rew_mean", "ep_reward_mean", "ep_rewmean", "mean 100 episode reward", "EpRewMean",
                     "rollout/return_history")),
    ("ep_len_mean", ("rollout/ep_len_mean", "ep_len_mean", "eplenmean", "EpLenMean")),
    ("fps", ("time/fps", "fps", "total/steps_per_second")),
)


def _format(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return str(value)
    number = float(value)
    if math.isfinite(number) and number == int(number) and abs(number) < 1e15:
        return str(int(number))
    return f"{number:.4g}" if abs(number) >= 1e4 or abs(number) < 1e-3 else f"{number:.1f}"


def summary_line(kvs: Dict[Any, Any]) -> Optional[str]:
    """
    The one-line summary of a log dump, e.g. ``steps 2048 | ep_rew_mean 23.1 | ep_len_mean 23.1 | fps 812``.

    :param kvs: (dict) the dumped key-values of any sbtf algorithm
    :return: (str or None) the line; None when the dump has none of the summary's keys
    """
    parts: List[str] = []
    for column, keys in SUMMARY_COLUMNS:
        for key in keys:
            value = kvs.get(key)
            if value is not None:
                parts.append(f"{column} {_format(value)}")
                break
    return " | ".join(parts) if parts else None


class SummaryLineFormat(sbtf_logger.KVWriter):
    """
    A logger output format that writes :func:`summary_line` of each dump, through ``tqdm.write`` so that a
    progress bar stays below it.

    :param file: (TextIO) where to write (None: the current ``sys.stdout`` at each write)
    """

    def __init__(self, file: Optional[TextIO] = None):
        self.file = file

    def writekvs(self, kvs: Dict[str, Any]) -> None:
        line = summary_line(kvs)
        if line is None:
            return
        from tqdm import tqdm

        tqdm.write(line, file=self.file if self.file is not None else sys.stdout)

    def close(self) -> None:
        """Nothing to close: the file belongs to the caller."""


@contextlib.contextmanager
def one_line_logs() -> Iterator[None]:
    """
    Within the block, the current logger writes :class:`SummaryLineFormat` lines where it wrote tables on stdout
    (its other outputs, files or TensorBoard, unchanged).
    """
    current = sbtf_logger.Logger.CURRENT
    if current is None:
        yield
        return
    previous = current.output_formats
    current.output_formats = [
        SummaryLineFormat() if isinstance(fmt, sbtf_logger.HumanOutputFormat) and fmt._follows_stdout else fmt
        for fmt in previous]
    try:
        yield
    finally:
        current.output_formats = previous
