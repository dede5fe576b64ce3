"""Case files and the eval directory: reading, checking and writing the YAML users edit.

What lives here: the case model (``model``), parsing with located problems (``parse``,
``checks``; stream targets' ``events``: ``streams``; config.yaml's ``arms:``: ``armdecl``), the eval directory and its ``config.yaml``/``adapter.yaml`` (``evaldir``), and
writing case files without losing a concurrent edit (``write``, ``edit``).

What it may not know: videos' frames, adapters, runs or reports.
"""
