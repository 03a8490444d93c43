"""Fork strategies: how a dry run gets a state to try a call on (``strategies.py``), the exact
undo log (``undolog.py``, ``undolog_classes.py``, ``undolog_restore.py``) and SQLite
savepoints (``sqlite.py``, ``sqlite_plain.py``). The dry run itself is a call stage
(``calls/dry_run.py``, ``calls/transaction.py``)."""
