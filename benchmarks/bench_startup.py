"""Start-up cost of glasskit_eval against what any Python tool must pay, measured side by side.

    python benchmarks/bench_startup.py [--rounds 15] [--no-site] [--upstream /opt/upstream/bin/glasskit] [--check]

Each round runs every command once, in a fresh process, interleaved so that machine noise
hits all of them alike; the report shows medians and the two ratios the project targets:

* ``python -m glasskit_eval --help``  <= 1.5x ``python -c pass``
* ``validate`` on the demo eval       <= 1.2x a script that only imports av and opens its video

Both in wall time and in CPU time (user + system of the child): on a machine other work keeps
busy the CPU figures move much less than the wall figures. ``--no-site`` starts every command with
``python -S`` (site-packages on PYTHONPATH instead), so that ``.pth`` hooks a machine runs at every
start (an editable install's finder, a certificate injector) are not counted on either side.

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
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import ROOT, interleave

DEMO = ROOT / "fixtures" / "demo" / "eval"
VIDEO = DEMO / "cases" / "kitchen.mp4"
TARGETS = {"help": 1.5, "validate": 1.2}


def commands(python: str, upstream: str | None, flags: Sequence[str] = ()) -> dict[str, list[str]]:
    cmds = {
        "python -c pass": [python, *flags, "-c", "pass"],
        "glasskit_eval --help": [python, *flags, "-m", "glasskit_eval", "--help"],
        "import av + open video": [python, *flags, "-c", "import av, sys; av.open(sys.argv[1]).close()",
                                   str(VIDEO)],
        "glasskit_eval validate": [python, *flags, "-m", "glasskit_eval", "validate", "--eval-dir", str(DEMO)],
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


def run_once(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of one run of ``cmd``; a failing command stops the benchmark."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    errors = proc.stderr.read()
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {errors.decode()[-400:]}")
    return wall, usage.ru_utime + usage.ru_stime


def measure(cmds: dict[str, list[str]], rounds: int,
            env: dict[str, str]) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Per command, the wall times and the CPU times of ``rounds`` interleaved runs."""
    def once(name: str) -> dict[str, float]:
        seconds, used = run_once(cmds[name], env)
        return {"wall": seconds, "cpu": used}

    interleave(2, list(cmds), once)  # warm the bytecode cache and the OS file cache
    results = interleave(rounds, list(cmds), once)
    return ({name: [r["wall"] for r in runs] for name, runs in results.items()},
            {name: [r["cpu"] for r in runs] for name, runs in results.items()})


def ratios(times: dict[str, list[float]]) -> tuple[dict[str, float], dict[str, float]]:
    """The two target ratios, of medians and of fastest runs."""
    pairs = {"help": ("glasskit_eval --help", "python -c pass"),
             "validate": ("glasskit_eval validate", "import av + open video")}
    med = {k: statistics.median(times[a]) / statistics.median(times[b]) for k, (a, b) in pairs.items()}
    best = {k: min(times[a]) / min(times[b]) for k, (a, b) in pairs.items()}
    return med, best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--python", default=sys.executable, help="interpreter to measure (default: this one)")
    parser.add_argument("--upstream", help="also time the upstream CLI at this path, for reference")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target ratio is missed (CPU medians)")
    parser.add_argument("--no-site", action="store_true",
                        help="start every command with python -S (site-packages on PYTHONPATH): no .pth hooks")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="bench-pycache-") as pycache:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        path = [str(ROOT)]
        if args.no_site:
            path += subprocess.run([args.python, "-c", "import site; print('\\n'.join(site.getsitepackages()))"],
                                   capture_output=True, text=True, check=True).stdout.split()
        env.update(PYTHONPYCACHEPREFIX=pycache, PYTHONPATH=os.pathsep.join(path))
        times, cpu = measure(commands(args.python, args.upstream, ["-S"] if args.no_site else []), args.rounds, env)
    med = {name: statistics.median(values) for name, values in times.items()}

    version = subprocess.run([args.python, "-c", "import sys, av; print(sys.version.split()[0], av.__version__)"],
                             capture_output=True, text=True, check=False).stdout.split()
    print(f"Python {version[0] if version else '?'}, av {version[1] if len(version) > 1 else '?'}, "
          f"{args.rounds} rounds, medians{', python -S' if args.no_site else ''}; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    width = max(map(len, med))
    for name, value in med.items():
        spread = f"{min(times[name]) * 1000:.1f}-{max(times[name]) * 1000:.1f}"
        print(f"  {name:<{width}}  {value * 1000:7.1f} ms wall (range {spread} ms), "
              f"{statistics.median(cpu[name]) * 1000:7.1f} ms CPU")
    wall_med, wall_best = ratios(times)
    cpu_med, cpu_best = ratios(cpu)
    # Fastest runs too: on a busy machine they track the real cost better than medians.
    for key, label in (("help", "--help   / python -c pass  "), ("validate", "validate / import av + open")):
        print(f"{label} = {cpu_med[key]:.2f}x CPU median, {cpu_best[key]:.2f}x CPU fastest, "
              f"{wall_med[key]:.2f}x wall median, {wall_best[key]:.2f}x wall fastest (target <= {TARGETS[key]}x)")
    if args.upstream:
        print(f"upstream --help   / its python -c pass = "
              f"{med['upstream: glasskit --help'] / med['upstream: python -c pass']:.2f}x")
        print(f"upstream validate / its av + open      = "
              f"{med['upstream: eval validate'] / med['upstream: import av + open']:.2f}x")
    missed = [k for k, v in cpu_med.items() if v > TARGETS[k]]
    if missed:
        print("missed: " + ", ".join(missed))
    return 1 if missed and args.check else 0


if __name__ == "__main__":
    raise SystemExit(main())
