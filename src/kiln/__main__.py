"""``python -m kiln ...``: the same command line as the ``kiln`` script."""
import sys

from kiln.cli import main

if __name__ == "__main__":
    sys.exit(main())
