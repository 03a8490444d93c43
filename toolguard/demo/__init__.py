"""The demo: a guarded contacts app and scripted agents (``python -m toolguard.demo``)."""
