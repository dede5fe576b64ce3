"""Planning: which samples a command runs, on which frames, from which videos.

What lives here: expanding case files into scheduled samples (``schedule``), the plan with its
videos probed (``planning``), clip samples' frames and their checks (``clips``), stream
targets' feeds (``feeds``), resolving a case's video, local or downloaded (``videos``),
shards (``shard``), ``--early-stop``'s blocks and their seeded order (``blocks``) and frame pins,
the ``<case>.frames.lock`` files (``pins``, ``pinning``,
``pinfiles``).

What it may not know: adapters, results or reports.
"""
