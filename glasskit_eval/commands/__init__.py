"""Commands: one body per command, and the only code that decides what to write and print.

What lives here: ``run``, ``seed``, ``validate``, ``list_samples``, ``export_frames``, ``report``,
``compare``, ``merge_reports`` (with ``merging``), ``video_store``, ``review``, ``agreement`` and
``build_zipapp``; the label check of a finished run (``labelling``); a run's arms made ready
(``arming``) and compared with a baseline's (``arm_baselines``), its checks before the first call
(``preflight``), ``seed`` for stream targets (``seedstreams``); the request records, one frozen
group per option group (``requests``), and how a request records and checks its options in the
manifest (``recorded``); the run's CI outputs (``ci_outputs``). Each body is ``execute_<command>(...)``.

What it may not know: argparse. The faces in ``cli/`` turn options into a call of a body;
the engine below (``evaluation/``) gets :class:`~glasskit_eval.evaluation.options.TrialOptions`,
never a request.
"""
