"""Ground floor utilities every room may use: files, JSON values, the one strict reader of files
read back (``strictjson``), times, threads, interrupts.

What lives here: atomic writes and the file lock (``fsio``), writable outputs checked early
(``destinations``), package data (``resources``), ``--env-file`` (``dotenv``), JSON-like values
(``jsonvalues``), exact sample times (``timevalues``), the thread pool (``threads``), orderly
stops (``interrupts``), freed frame blocks kept for reuse (``allocator``), secrets cut from
output (``secretvalues``), outside text made safe to print (``outside``), adapter tracebacks
(``tracebacks``) and the likely typo in a missing path (``nearby``).

What it may not know: anything of glasskit_eval above it (only ``errors``).
"""
