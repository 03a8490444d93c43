"""BFCL multi-turn harness: replay BFCL's own backends through toolguard and measure it.

Everything BFCL-specific is imported from the installed ``bfcl-eval`` package (pinned in the
Makefile); nothing of its code is copied here.
"""

BFCL_EVAL_VERSION = "2026.3.23"
CATEGORIES = ("base", "miss_param", "miss_func", "long_context")
