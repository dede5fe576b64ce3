"""The engine ``run`` and ``seed`` share: every :class:`~glasskit_eval.results.SampleResult` is made here.

What lives here: the one trial loop over lanes (``trials``; a plain run is one arm) and what its
trials share (``_engine``: listener, result store, case splits, the schedule it plays; ``options``);
the one door every evaluator is opened, wrapped, checked, cancelled and closed through
(``lanes``); one case's samples through a caller (``case``), from one decode handed to every
lane (``_tee``) through the thread-to-loop hand-off (``_bridge``); decode order and the shared
frame store (``_ordering``, ``_framestore``), clip samples' frames shared by reference
(``_clipframes``); judging a call into its one result (``_judge``); every gate (``gates``; which
stream targets get theirs: ``streamgates``); reuse of checkpointed results (``reuse``); failure
artifacts (``failures``); the observation cache (``observation_cache``, ``observation_store``;
whole replay streams: ``_streamcache``); stream targets fed and scored (``streams``, the paced
clock ``_pacing``, every lane's streams ``_streamlanes``, ``_streamscore``, ``_streamrecord``);
neighbouring frames of knife-edge labels (``jitter``), seed's proposals (``proposals``), and
``run --early-stop``: the gates it decides, each arm's tracker and its schedule of seeded blocks
(``earlystop``), and the blocks the observation cache answers before any call (``_readahead``).

Doors (the only modules the rooms above, ``commands/`` and ``cli/``, may import): ``trials``,
``options``, ``lanes``, ``case``, ``gates``, ``streamgates``, ``streams``, ``reuse``,
``failures``, ``jitter``, ``proposals``, ``earlystop``, ``observation_cache`` and
``observation_store``. The back rooms, used only from inside the engine, are marked private
(``_engine``, ``_tee``, …).

What it may not know: argparse, requests or what a command prints; it talks to the outside
through a listener, a result store and the options it is given.
"""
