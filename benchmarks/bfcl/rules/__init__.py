"""What each BFCL backend needs before a call can run, declared for the guard.

Preconditions read the live backend (``instance``, the object behind the proxy) so an
illegal call is caught before it runs: the file must exist before ``cat``, the user must be
logged in before ``send_message``, the ticket must exist before ``close_ticket``.
Dependencies say which ids must come from an earlier output, and which call makes one stale.
Grounded arguments must appear in what the agent has seen (user turns and tool outputs); only
arguments for which every ground-truth call passes that test are declared (see README).
"""

from benchmarks.bfcl.rules import filesystem, services, travel_vehicle  # noqa: F401 - register
from benchmarks.bfcl.rules.base import RULES, Rules

__all__ = ["RULES", "Rules"]
