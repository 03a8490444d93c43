"""Declaring a tool: its declaration (``spec.py``, ``markers.py``), its compiled form
(``tool.py``: validators built once), its argument schema (``schema.py``, ``json_schema.py``,
``schema_core.py``), its conditions (``conditions.py``), the places ``produces`` reads
(``places.py``) and the names a misspelt call is offered (``suggest.py``)."""
