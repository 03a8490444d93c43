"""Plan verification: a planned sequence of calls checked before its first step runs
(``plan.py``: steps, references and verdicts; ``check.py``: each step's checks against the
trajectory's bindings and what earlier steps produce; ``run.py``: the plan on a fork;
``walk.py``: references resolved without recursion)."""
