"""Adapters: how an app is called, whatever its kind, and one record per call.

What lives here: the adapter-facing ``Sample``/``Target`` and the evaluator protocol (``base``),
choosing an adapter from the options (``choose``), the four kinds (``python``; ``command`` with
the sans-IO NDJSON protocol in ``_protocol`` with its handshake (``_handshake``), JSON messages
(``_messages``) and what a sample sends (``_wire``), its process in ``_process`` with the OS side in
``_procio`` and its stdin in ``_linewriter``, and its stream requests in ``_commandstreams``; ``_http`` with its transport in ``_httpio``; ``_exec``), the call record and
its callers for samples and streams (``calls``) and the call policy (``resilient``: timeouts,
retries, rate limit). Modules named ``_*`` are back rooms: only this package uses them.

What it may not know: results, judging, reports or the command line. A call ends in a
:class:`~.calls.Call` record; what it means for a sample is decided above.
"""
