"""Reports: renderers of one :class:`~glasskit_eval.summary.RunSummary`, and the live display.

What lives here: the console (``console``, ``progress``, an adapter's printed lines:
``adapter_output``), plain-text tables (``tables``), JSON (``json_report``), JUnit (``junit``),
GitHub annotations and job summary (``annotations``), HTML (``html`` with its tables, arms,
streams, images and text formats: ``html_tables``, ``html_arms``, ``html_streams``,
``html_images``, ``html_text``; ``thumbnails``, ``stream_frames``, ``publish``), call costs
(``calls``), stream targets in the text reports (``streams``), baselines and ``compare``
(``baseline``; streams against a baseline: ``streambaseline``; why a comparison is
inconclusive: ``stretch``), reading reports back (``loading``, ``streamload``), the arms' table
and the jitter block (``arms_table``, ``jitter``), early-stop decisions (``early_stop``), the
label check (``labels``) and where a sample stands in its case file (``locations``).

What it may not know: how results are made, adapters or the command line; it decides no gate
(``evaluation.gates`` makes them, a report read back keeps the verdicts it recorded). Renderers
are pure; ``publish`` and ``write_report`` are the file edges.
"""
