"""Labels: whether a run's own votes back each sample's hand-made label.

What lives here: the consensus of a sample's judged observations across repeats and arms, and the
rule that turns it into a *suspect label* or an *ambiguous* sample (``consensus``). Pure: no I/O,
no randomness; comparison of observed values is :mod:`compare`'s, pass or fail is the judge's.

What it may not know: how results were made, adapters, reports, files or the command line.
"""
