"""The review page: a local server and UI to check and correct timed expectations.

What lives here: the loopback server, its connections and security (``server``,
``connections``, ``security``), the JSON API (``api``, ``edits``, ``eventedits``,
``eventsplice`` and ``eventnames`` for one stream event at a time, ``checks``, ``pins``) and its errors (``errors``), case and frame
data (``casedata``, ``media``, a sample's clip: ``clips``), a
report's overlay (``report``) and the page's static files.

What it may not know: the run engine or the command line (``commands/review.py`` starts it).
"""
