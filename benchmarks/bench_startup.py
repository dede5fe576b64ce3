"""Start-up cost of glasskit_eval against what any Python tool must pay, measured side by side.

    python benchmarks/bench_startup.py [--rounds 15] [--upstream /opt/upstream/bin/glasskit] [--check]

Each round runs every command once, in a fresh process, interleaved so that machine noise
hits all of them alike; the report shows medians and the two ratios the project targets:

* ``python -m glasskit_eval --help``  <= 5x   ``python -c pass``
* ``validate`` on the demo eval       <= 1.2x a script that only imports av and opens its video

Bytecode is cached in a temporary PYTHONPYCACHEPREFIX (as after ``pip install``) so that
neither side pays for compiling on every start, and the tree is not touched.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import ROOT, interleave

DEMO = ROOT / "fixtures" / "demo" / "eval"
VIDEO = DEMO / "cases" / "kitchen.mp4"
TARGETS = {"help": 5.0, "validate": 1.2}


def commands(python: str, upstream: str | None) -> dict[str, list[str]]:
    cmds = {
        "python -c pass": [python, "-c", "pass"],
        "glasskit_eval --help": [python, "-m", "glasskit_eval", "--help"],
        "import av + open video": [python, "-c", "import av, sys; av.open(sys.argv[1]).close()", str(VIDEO)],
        "glasskit_eval validate": [python, "-m", "glasskit_eval", "validate", "--eval-dir", str(DEMO)],
    }
    if upstream:
        up_python = _shebang_python(upstream)
        cmds["upstream: python -c pass"] = [up_python, "-c", "pass"]
        cmds["upstream: glasskit --help"] = [upstream, "--help"]
        cmds["upstream: import av + open"] = [up_python, "-c", "import av, sys; av.open(sys.argv[1]).close()",
                                              str(VIDEO)]
        cmds["upstream: eval validate"] = [upstream, "eval", "validate", "--eval-dir", str(DEMO)]
    return cmds


def _shebang_python(script: str) -> str:
    first = Path(script).read_bytes().split(b"\n", 1)[0].decode()
    return first[2:].strip().split()[0] if first.startswith("#!") else sys.executable


def measure(cmds: dict[str, list[str]], rounds: int, env: dict[str, str]) -> dict[str, list[float]]:
    def once(name: str) -> dict[str, float]:
        start = time.perf_counter()
        proc = subprocess.run(cmds[name], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
        wall = time.perf_counter() - start
        if proc.returncode != 0:
            raise SystemExit(f"{name} failed ({proc.returncode}): {proc.stderr.decode()[-400:]}")
        return {"wall": wall}

    interleave(2, list(cmds), once)  # warm the bytecode cache and the OS file cache
    return {name: [r["wall"] for r in runs] for name, runs in interleave(rounds, list(cmds), once).items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--python", default=sys.executable, help="interpreter to measure (default: this one)")
    parser.add_argument("--upstream", help="also time the upstream CLI at this path, for reference")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target ratio is missed")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="bench-pycache-") as pycache:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env.update(PYTHONPYCACHEPREFIX=pycache, PYTHONPATH=str(ROOT))
        times = measure(commands(args.python, args.upstream), args.rounds, env)
    med = {name: statistics.median(values) for name, values in times.items()}

    version = subprocess.run([args.python, "-c", "import sys, av; print(sys.version.split()[0], av.__version__)"],
                             capture_output=True, text=True, check=False).stdout.split()
    print(f"Python {version[0] if version else '?'}, av {version[1] if len(version) > 1 else '?'}, "
          f"{args.rounds} rounds, medians")
    width = max(map(len, med))
    for name, value in med.items():
        spread = f"{min(times[name]) * 1000:.1f}-{max(times[name]) * 1000:.1f}"
        print(f"  {name:<{width}}  {value * 1000:7.1f} ms   (range {spread} ms)")
    ratios = {
        "help": med["glasskit_eval --help"] / med["python -c pass"],
        "validate": med["glasskit_eval validate"] / med["import av + open video"],
    }
    best = {name: min(values) for name, values in times.items()}
    # Fastest runs too: on a busy machine they track the real cost better than medians.
    print(f"--help   / python -c pass      = {ratios['help']:.2f}x median, "
          f"{best['glasskit_eval --help'] / best['python -c pass']:.2f}x fastest (target <= {TARGETS['help']}x)")
    print(f"validate / import av + open    = {ratios['validate']:.2f}x median, "
          f"{best['glasskit_eval validate'] / best['import av + open video']:.2f}x fastest "
          f"(target <= {TARGETS['validate']}x)")
    if args.upstream:
        print(f"upstream --help   / its python -c pass = "
              f"{med['upstream: glasskit --help'] / med['upstream: python -c pass']:.2f}x")
        print(f"upstream validate / its av + open      = "
              f"{med['upstream: eval validate'] / med['upstream: import av + open']:.2f}x")
    missed = [k for k, v in ratios.items() if v > TARGETS[k]]
    if missed:
        print("missed: " + ", ".join(missed))
    return 1 if missed and args.check else 0


if __name__ == "__main__":
    raise SystemExit(main())
