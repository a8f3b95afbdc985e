"""Console formatting helpers of stable-baselines 2.x (``fmt_row``, ``fmt_item``, ``colorize``)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

COLOR_TO_NUM = dict(gray=30, red=31, green=32, yellow=33, blue=34, magenta=35, cyan=36, white=37, crimson=38)


def fmt_item(item: Any, min_width: int) -> str:
    """Right-aligned text of ``item`` (floats in %g), at least ``min_width`` wide."""
    if isinstance(item, np.ndarray):
        assert item.ndim == 0
        item = item.item()
    if isinstance(item, (float, np.floating)):
        rep = f"{item:g}"
    else:
        rep = str(item)
    return " " * (min_width - len(rep)) + rep


def fmt_row(width: int, row: Sequence[Any], header: bool = False) -> str:
    """One table row of ``width``-wide cells separated by `` | ``; a header row is followed by a rule."""
    out = " | ".join(fmt_item(x, width) for x in row)
    if header:
        out = out + "\n" + "-" * len(out)
    return out


def colorize(string: str, color: str, bold: bool = False, highlight: bool = False) -> str:
    """``string`` wrapped in ANSI colour codes."""
    attr = []
    num = COLOR_TO_NUM[color]
    if highlight:
        num += 10
    attr.append(str(num))
    if bold:
        attr.append("1")
    return f"\x1b[{';'.join(attr)}m{string}\x1b[0m"
