"""Comparators: whether an observed value matches an expectation, as plain functions.

What lives here: field extraction by dotted path and the comparison modes (``values``), with
the mode names kept apart for a light start-up (``modes``).

What it may not know: samples, videos, adapters or reports. Pure: no I/O.
"""
