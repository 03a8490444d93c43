"""Spans: the guard's calls into OpenTelemetry, each guarded so telemetry never breaks a call
(``spans.py``), and the embedded file export (``export.py``, ``span_queue.py``,
``span_file.py``: the only modules that import the SDK, inside ``setup_file_export``)."""
