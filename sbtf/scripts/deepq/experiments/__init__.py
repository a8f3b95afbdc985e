"""stable-baselines 2's ``deepq/experiments`` scripts (train / enjoy CartPole and MountainCar, Atari), on sbtf."""
