"""sbtf_converters: read stable-baselines 2.x agent files and export sbtf policies."""
