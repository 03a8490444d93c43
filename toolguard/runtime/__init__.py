"""The runtime guard: wraps tools, checks each call, writes its span.

Internal: import the public API from `toolguard`. This wing imports no agent framework and
never the report; it shares only the span contract (`toolguard._contract`) with it.
"""
