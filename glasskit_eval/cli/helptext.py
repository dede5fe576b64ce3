"""What each command's ``--help`` ends with: examples, exit codes, and for ``run`` the gate note.

Plain strings, kept apart from the parsers in :mod:`glasskit_eval.cli`; imported only when help is shown.
"""

from __future__ import annotations

_P = "python -m glasskit_eval"

_ERROR = (2, "usage error, invalid eval or case file, adapter, video or I/O error")
_INTERRUPTED = (130, "interrupted (Ctrl+C)")
#: Commands that keep a checkpoint take SIGTERM as they take Ctrl+C: they stop and say how to resume.
_STOPPED = (130, "interrupted (Ctrl+C or SIGTERM); a second one exits at once")

_EXAMPLES: dict[str, tuple[tuple[str, str], ...]] = {
    "run": (
        (f"{_P} run --eval-dir eval", "run every case with eval/adapter.py:create_evaluator"),
        (f"{_P} run --case walkthrough --min-pass-rate 0.95 --output-json out/report.json",
         "one case, gated, with a JSON report"),
        (f'{_P} run --adapter-command "node eval/adapter.mjs" --repeat 3 --max-flaky-samples 0',
         "a command adapter, three trials, no flaky samples allowed"),
    ),
    "seed": (
        (f"{_P} seed --case walkthrough", "propose expectations for the case's draft samples"),
        (f"{_P} seed --case walkthrough --target lights --replace", "re-propose one target's expectations"),
    ),
    "validate": (
        (f"{_P} validate --eval-dir eval", "check cases, videos and sample times"),
        (f"{_P} validate --adapter eval/adapter.py:create_evaluator", "also construct and close the adapter"),
    ),
    "list-samples": (
        (f"{_P} list-samples --case walkthrough", "the expanded schedule of one case"),
        (f"{_P} list-samples --case walkthrough --from 10 --until 20", "only samples from 10 s to 20 s"),
    ),
    "export-frames": (
        (f"{_P} export-frames --case walkthrough --at 12.5", "the exact frame the adapter gets at 12.5 s"),
        (f"{_P} export-frames --case walkthrough --at 1 --at 2 --output-dir frames/",
         "two frames into frames/"),
    ),
    "build-zipapp": (
        (f"{_P} build-zipapp glasskit_eval.pyz", "one file; needs pyyaml, pillow and av where it runs"),
        (f"{_P} build-zipapp --include-deps glasskit_eval.pyz", "one file that runs on its own"),
    ),
    "video-store": (
        (f"{_P} video-store pull", "download and verify every cloud video the cases use"),
        (f"{_P} video-store upload walk.mp4 --store main", "upload a video, print its case-file block"),
    ),
    "report": (
        (f"{_P} report out/report.json --html out/report.html", "one run's JSON report as a web page"),
        (f"{_P} report shard-*.json --html report.html --eval-dir eval",
         "shards merged, thumbnails decoded from the eval's videos"),
    ),
    "compare": (
        (f"{_P} compare main.json branch.json", "what changed from the main branch's run to this one"),
        (f"{_P} compare main.json branch.json --output-json diff.json", "the same, also as JSON"),
    ),
    "merge-reports": (
        (f"{_P} merge-reports shard-*.json --output-json all.json", "merge CI shards and apply the gates"),
        (f"{_P} merge-reports shard-*.json --junit-xml junit.xml --baseline main.json --fail-on-regression",
         "also JUnit XML, and fail on regressions against the main branch"),
    ),
    "review": (
        (f"{_P} review", "open the first case in a browser"),
        (f"{_P} review --case walkthrough --target lights --time 12.5",
         "open one sample (a failed run prints this command for its first failure)"),
        (f"{_P} review --report out/report.json --suspects",
         "step through a run's suspect labels (a run with --repeat or arms prints this command)"),
    ),
    "agreement": (
        (f"{_P} agreement labeller_a/eval labeller_b/eval", "per target and overall: agreement and Cohen's kappa"),
        (f"{_P} agreement a/cases/walk.yaml b/cases/walk.yaml --output-json agreement.json",
         "two case files of one video, also as JSON"),
    ),
}

_EXIT_CODES: dict[str, tuple[tuple[int, str], ...]] = {
    "run": ((0, "every gate passed"), (1, "a gate failed (pass rate, failures, flaky samples, adapter errors)"),
            _ERROR, _STOPPED),
    "seed": ((0, "expectations written"), (1, "some samples failed (with --keep-going); nothing was written"),
             _ERROR, _STOPPED),
    "validate": ((0, "the eval is valid"),
                 (1, "problems were found, each listed: invalid files, missing videos, an adapter that fails"),
                 (2, "usage error"), _INTERRUPTED),
    "compare": ((0, "no regressions"), (1, "B regressed (a pass turned into a failure, or a new error)"), _ERROR,
                _INTERRUPTED),
    "merge-reports": ((0, "every gate passed"), (1, "a gate failed"), _ERROR, _INTERRUPTED),
    # The server runs until stopped: Ctrl+C is how it ends, not a failure.
    "review": ((0, "stopped with Ctrl+C"), _ERROR),
}


def exit_codes(command: str) -> tuple[tuple[int, str], ...]:
    """What ``command`` exits with, and why: the same table ``--help`` prints."""
    return _EXIT_CODES.get(command, ((0, "done"), _ERROR, _INTERRUPTED))


_NOTES: dict[str, str] = {
    "run": "No correctness gate is on by default: failed samples do not fail the run until you set "
           "--min-pass-rate, --max-failures or --min-target-pass-rate, or thresholds in config.yaml "
           "or a case file. Adapter and comparison errors always fail it.",
}


def epilog(command: str, width: int = 78) -> str:
    """The text after the options in ``command --help``: prose wrapped to ``width``, examples as written."""
    lines = []
    note = _NOTES.get(command)
    if note:
        import textwrap

        lines += [*textwrap.wrap(note, max(width, 40)), ""]
    examples = _EXAMPLES.get(command, ())
    if examples:
        lines.append("examples:")
        for text, why in examples:
            lines += [f"  {text}", f"      {why}"]
        lines.append("")
    lines.append("exit codes:")
    lines += [f"  {code:>3}  {why}" for code, why in exit_codes(command)]
    return "\n".join(lines)
