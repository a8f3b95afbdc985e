"""stable-baselines 2's ``ppo1/experiments`` scripts, on sbtf."""
