"""sbtf_converters: read stable-baselines 2.x agent files and export sbtf policies.

A plugin of sbtf: importing this package registers its readers and exporter with sbtf's format hooks
(:mod:`sbtf_converters.plugin`); sbtf finds it through the ``sbtf.plugins`` entry point without importing it by name.
"""
from sbtf_converters.plugin import register_formats

register_formats()
