"""``python -m sbtf``: the ``sbtf`` command line tool (see :mod:`sbtf.cli`)."""
import sys

from sbtf.cli import main

if __name__ == "__main__":
    sys.exit(main())
