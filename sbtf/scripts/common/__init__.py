"""Self-tests that stable-baselines 2 ran as ``python -m stable_baselines.common.<module>`` (under ``mpirun``)."""
