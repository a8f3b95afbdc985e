"""``stable_baselines.bench`` and ``stable_baselines.bench.monitor``: SB2's ``Monitor`` with the old gym API (see
:mod:`stable_baselines._compat.old_gym_api`) and sbtf's readers of its files (``load_results``, ...); sbtf's
gymnasium ``Monitor`` is ``sbtf.bench.Monitor``."""
from sbtf.bench.monitor import LoadMonitorResultsError, get_monitor_files, load_results
from stable_baselines._compat.old_gym_api import Monitor

__all__ = ["Monitor", "load_results", "get_monitor_files", "LoadMonitorResultsError"]
