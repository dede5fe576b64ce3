"""Ground floor utilities every room may use: files, JSON values, the one strict reader of files
read back (``strictjson``), times, threads, interrupts.

What it may not know: anything of glasskit_eval above it (only ``errors``).
"""
