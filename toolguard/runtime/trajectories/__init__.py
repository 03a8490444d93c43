"""Trajectories: steps, bound values and the summary span (``trajectory.py``), what the agent
has seen (``seen.py``, ``leaves.py``), trajectories kept by key (``registry.py``) and which
trajectory a call counts in (``nesting.py``)."""
