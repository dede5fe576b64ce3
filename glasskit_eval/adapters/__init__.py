"""Adapters: Python callables in-process, or commands speaking NDJSON protocol v1."""
