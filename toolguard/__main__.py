"""``python -m toolguard report ...``: the same as the ``toolguard`` command."""

import sys

from ._cli import main

if __name__ == "__main__":
    sys.exit(main())
