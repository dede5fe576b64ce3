"""Commands: one body per command, and the only code that decides what to write and print.

What lives here: ``run``, ``seed``, ``validate``, ``list_samples``, ``export_frames``, ``report``,
``compare``, ``merge_reports`` (with ``merging``), ``video_store``, ``review``, ``agreement`` and
``build_zipapp``; the label check of a finished run (``labelling``); the request records and every manifest check (``requests``); the run's CI
outputs (``ci_outputs``). Each body is ``execute_<command>(...)``.

What it may not know: argparse. The faces in ``cli/`` turn options into a call of a body;
the engine below (``evaluation/``) gets :class:`~glasskit_eval.evaluation.options.TrialOptions`,
never a request.
"""
