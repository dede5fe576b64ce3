"""YAML with lines and minimal-diff edits: read values with where each came from, and write
an edit that keeps everything around it byte for byte.

Doors: ``source`` (loading, with located problems) and ``edit`` (text edits). Modules named
``_*`` are back rooms: values straight from parser events (``_events``), composed nodes
(``_nodes``), rendering values (``_render``), text surgery (``_morph``) and matching an edited
list's items (``_seqplan``).

What it may not know: what a case file means; ``cases`` gives it that.
"""
