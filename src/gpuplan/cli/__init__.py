"""The command line (thin: parse, call the core, render)."""
