"""``stable_baselines.bench.monitor``'s names: the ``Monitor`` wrapper and its log readers (they live in
:mod:`sbtf.common.monitor`, stable-baselines3's place)."""
from sbtf.common.monitor import LoadMonitorResultsError, Monitor, get_monitor_files, load_results

__all__ = ["Monitor", "LoadMonitorResultsError", "get_monitor_files", "load_results"]
