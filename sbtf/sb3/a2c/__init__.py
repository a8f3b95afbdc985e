"""stable-baselines3's A2C (``stable_baselines3.a2c``) on sbtf's core (``sbtf.A2C`` stays stable-baselines 2's)."""
from sbtf.sb3.a2c.a2c import A2C
from sbtf.sb3.a2c.policies import CnnPolicy, MlpPolicy, MultiInputPolicy

__all__ = ["A2C", "CnnPolicy", "MlpPolicy", "MultiInputPolicy"]
