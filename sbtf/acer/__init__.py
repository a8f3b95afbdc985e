from sbtf.acer.acer_simple import ACER

__all__ = ["ACER"]
