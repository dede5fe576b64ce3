"""The frame engine: the exact frame for each requested time, on every container PyAV reads.

Doors (used from outside): ``frames`` (``decode_at``, ``DecodedFrame``), ``probe`` (video facts),
``frametable`` (the presentation-time table), ``timeline`` (frame times and the selection rule,
for tables with or without timestamps), ``strategy`` (decode cost model), ``png``,
``fingerprint`` (pixel hashes) and ``damage`` (warnings about damaged files). Modules named
``_*`` are back rooms: MP4 boxes and index reading (``_mp4boxes``, ``_mp4index``), orientation
(``_orientation``), RGB conversion (``_pixels``), planned and sequential decoding (``_segments``,
``_sequential``) and the decoder's selection state (``_selection``).

What it may not know: cases, samples, adapters or results; it is asked for times and answers
with frames.
"""
