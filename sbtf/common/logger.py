"""stable-baselines3's ``common.logger``: :func:`configure` returns a new :class:`Logger` (for ``model.set_logger``)
instead of replacing the global one, as :func:`sbtf.logger.configure` (stable-baselines 2's) does. The logger
itself, its output formats and the free functions are :mod:`sbtf.logger`'s."""
from __future__ import annotations

import datetime
import os
import tempfile
from typing import List, Optional

from sbtf.logger import (CSVOutputFormat, DEBUG, DISABLED, ERROR, HumanOutputFormat, INFO, JSONOutputFormat, KVWriter,
                         Logger, SeqWriter, TensorBoardOutputFormat, WARN, make_output_format, read_csv, read_json)

__all__ = ["configure", "Logger", "KVWriter", "SeqWriter", "HumanOutputFormat", "JSONOutputFormat", "CSVOutputFormat",
           "TensorBoardOutputFormat", "make_output_format", "read_csv", "read_json", "DEBUG", "INFO", "WARN", "ERROR",
           "DISABLED"]


def configure(folder: Optional[str] = None, format_strings: Optional[List[str]] = None) -> Logger:
    """
    A new logger (stable-baselines3's ``configure``); give it to a model with ``model.set_logger(logger)``.

    :param folder: the folder of the log files (None: ``$SB3_LOGDIR``, else a new ``SB3-<date>`` folder in the
        temporary directory)
    :param format_strings: the output formats among ``"stdout"``, ``"log"``, ``"json"``, ``"csv"``,
        ``"tensorboard"`` (None: ``$SB3_LOG_FORMAT``, else stdout, log and csv)
    :return: the logger
    """
    if folder is None:
        folder = os.getenv("SB3_LOGDIR")
    if folder is None:
        folder = os.path.join(tempfile.gettempdir(), datetime.datetime.now().strftime("SB3-%Y-%m-%d-%H-%M-%S-%f"))
    folder = os.fspath(folder)
    if format_strings is None:
        format_strings = os.getenv("SB3_LOG_FORMAT", "stdout,log,csv").split(",")
    format_strings = [f.strip() for f in format_strings if f and f.strip()]
    output_formats = [make_output_format(f, folder) for f in format_strings]
    logger = Logger(folder=folder, output_formats=output_formats)
    if format_strings and format_strings != ["stdout"]:
        logger.log(f"Logging to {folder}")
    return logger
