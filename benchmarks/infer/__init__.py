"""Measurements of ``toolguard infer`` (``python -m benchmarks.infer``)."""
