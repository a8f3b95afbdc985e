"""Benchmark helpers of stable-baselines 2.x: the ``Monitor`` wrapper and its log readers."""
from sbtf.bench.monitor import LoadMonitorResultsError, Monitor, get_monitor_files, load_results

__all__ = ["Monitor", "load_results", "get_monitor_files", "LoadMonitorResultsError"]
