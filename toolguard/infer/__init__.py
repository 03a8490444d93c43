"""``toolguard infer``: a contract proposed from recorded runs, deterministically.

Reads recorded runs with replay's readers, traces where each argument value of each accepted
call first appeared (``flow.py``) and what became of bound values later (``lifetime.py``),
proposes ``refs`` + ``produces``, ``grounded`` and ``invalidates`` where the evidence clears
``--min-support`` and ``--min-share`` (``propose.py``, ``invalidates.py``), and writes an ordinary
contract file, every rule under a comment with its evidence (``render.py``). Nothing read is
ever evaluated; recorded values appear in the output only with ``--show-values``.
"""

from __future__ import annotations

from .flow import Flow, trace_runs
from .propose import Proposal, propose
from .render import render
from .values import CommonRule

__all__ = ["CommonRule", "Flow", "Proposal", "propose", "render", "trace_runs"]
