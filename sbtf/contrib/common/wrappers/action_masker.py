"""sb3-contrib's ``common.wrappers.action_masker`` module path (the class lives in
:mod:`sbtf.contrib.common.maskable.wrappers`)."""
from sbtf.contrib.common.maskable.wrappers import ActionMasker

__all__ = ["ActionMasker"]
