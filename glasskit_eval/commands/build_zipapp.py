"""The ``build-zipapp`` command: one reproducible file to run glasskit_eval from."""

from __future__ import annotations

from typing import TextIO

from ..dist.zipapp import build_zipapp


def execute_build_zipapp(output: str, out: TextIO, *, include_deps: bool, interpreter: str) -> None:
    print(build_zipapp(output, include_deps=include_deps, interpreter=interpreter).describe(), file=out)
