from sbtf.a2c.a2c import A2C

__all__ = ["A2C"]
