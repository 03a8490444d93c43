"""The offline report: OTLP span files in, prefix-executability metrics out.

Internal: import the public API from `toolguard`. This wing never imports the runtime guard;
it shares only the span contract (`toolguard._contract`) with it.
"""
