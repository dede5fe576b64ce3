"""Distribution: the reproducible zipapp (``zipapp``) that carries glasskit_eval (and, optionally,
its dependencies) in one file.

What it may not know: evals, runs or adapters; it packs files.
"""
