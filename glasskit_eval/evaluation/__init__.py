"""The engine ``run`` and ``seed`` share: every :class:`~glasskit_eval.results.SampleResult` is made here.

What lives here: trials and their call stacks (``trials``, ``options``), one case's samples
through the adapter (``case``), decode order and the shared frame store (``ordering``,
``framestore``), clip samples' frames shared by reference (``clipframes``), judging a call into its one result (``judge``), gates (``gates``), reuse of
checkpointed results (``reuse``), failure artifacts (``failures``), the observation cache
(``observation_cache``, ``observation_store``; whole replay streams: ``streamcache``), arms on one decode (``fanout``), neighbouring
frames of knife-edge labels (``jitter``) and seed's proposals (``proposals``).

What it may not know: argparse, requests or what a command prints; it talks to the outside
through a listener, a result store and the options it is given.
"""
