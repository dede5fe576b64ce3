"""Reports: renderers of one :class:`~glasskit_eval.summary.RunSummary`, and the live display.

What lives here: the console (``console``, ``progress``), JSON (``json_report``), JUnit
(``junit``), GitHub annotations and job summary (``annotations``), HTML (``html``,
``thumbnails``, ``publish``), baselines and ``compare`` (``baseline``; why a comparison is
inconclusive: ``stretch``), reading reports back (``loading``), the arms' table and the jitter
block (``arms_table``, ``jitter``), early-stop decisions (``early_stop``), the label check
(``labels``) and where a sample stands in its case file (``locations``).

What it may not know: how results are made, adapters or the command line. Renderers are pure;
``publish`` and ``write_report`` are the file edges.
"""
