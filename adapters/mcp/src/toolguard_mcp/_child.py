"""The server subprocess dies with the proxy.

The server runs in a process group of its own (``process_group=0``: the proxy stops it and
whatever it started as a whole, and a Ctrl-C at the terminal reaches the proxy alone), and on
Linux asks the kernel for ``SIGTERM`` when the proxy goes away, however it goes (``kill -9``
included): ``prctl(PR_SET_PDEATHSIG)``. Elsewhere a server still sees its stdin close. A new
session (``start_new_session``) is not used: it costs Python servers milliseconds per call.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

_PR_SET_PDEATHSIG = 1


def spawn_options() -> dict[str, Any]:
    """Keyword arguments for ``create_subprocess_exec`` that tie the child to this process."""
    options: dict[str, Any] = {"process_group": 0}
    hook = _death_signal()
    if hook is not None:
        options["preexec_fn"] = hook
    return options


def _death_signal() -> Callable[[], None] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def hook() -> None:  # runs in the child between fork and exec
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent:  # the proxy died before the call above took effect
            os._exit(1)

    return hook
