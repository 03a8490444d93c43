"""The ``toolguard`` command, also as ``python -m toolguard ...``.

Imports the command it runs, and only that: without the [report] extra (numpy, orjson, the
SDK) ``toolguard report`` says in one line what to install instead of a traceback.
"""

import sys
from collections.abc import Sequence

from ._commands import DELEGATED, delegate, missing_report_extra
from ._extras import is_missing


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``toolguard`` command; returns the exit status."""
    words = list(sys.argv[1:] if argv is None else argv)
    if words and words[0] in DELEGATED:
        return delegate(words[0], words[1:])
    try:
        from ._cli import main as cli
    except ImportError as exc:
        if not is_missing(exc, "report"):
            raise
        return missing_report_extra(words[0] if words else "", exc)
    return cli(argv)


if __name__ == "__main__":
    sys.exit(main())
