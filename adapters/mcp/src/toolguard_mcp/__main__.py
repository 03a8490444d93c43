from .proxy import main

raise SystemExit(main(prog="python -m toolguard_mcp"))
