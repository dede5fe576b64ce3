"""Checkpoints: durable, resumable records of a run's or a seed's results.

What lives here: the append-only checkpoint store with its manifest (``store``), its records
file's framing (``framing``, read through ``support.strictjson``), input
fingerprints (``fingerprints``), the one lifecycle ``run`` and ``seed`` share (``lifecycle``:
resume, unchanged inputs, early stops, interrupts) and pruning old checkpoints (``prune``).

What it may not know: how results are made, the command line, or what a request holds (it
stores the invocation as the command gives it).
"""
