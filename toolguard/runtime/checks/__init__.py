"""The checks of one call, in the protocol's precedence order, each a stage built once per
tool from its contract: schema (``schema.py``), dependency (``dependencies.py``),
precondition (``conditions.py``), information (``information.py``), and after the call
state consistency (``outcome.py``: exceptions, error results, postconditions). A check
that raises is ``guard_error.py``'s; what a stage is, ``stage.py``'s."""
