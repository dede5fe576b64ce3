"""Ground floor utilities every room may use: files, JSON values, times, threads, interrupts.

What it may not know: anything of glasskit_eval above it (only ``errors``).
"""
