"""One call through its stages (``pipeline.py``): its state and closing (``call.py``), its
public face (``pending.py``), the stages a tool's contract chooses (``stages.py``), the dry
run (``dry_run.py``, ``transaction.py``), the record of an accepted result (``record.py``)
and the wrapt entry point of a function called directly (``wrappers.py``)."""
