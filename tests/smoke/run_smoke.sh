#!/usr/bin/env bash
# Smoke suite for one interpreter with glasskit_eval installed (CI runs it on Python 3.10 and 3.13):
# demo eval, command adapters, export-frames, and zipapps (plain, and with bundled dependencies).
#
#   tests/smoke/run_smoke.sh /path/to/venv/bin/python
#
# Every command runs from a temporary directory, so the installed package is what is tested,
# not the checkout; everything it writes goes there and is removed at exit.
set -euo pipefail

PY=${1:?usage: run_smoke.sh PYTHON}
case "$PY" in
    */*) PY="$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY")" ;;  # keep the venv's symlink
    *) PY=$(command -v "$PY") ;;
esac
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/glasskit-smoke.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
unset PYTHONPATH
# A copy: runs write checkpoints under <eval-dir>/runs/, which must not land in the checkout.
cp -R "$ROOT/fixtures/demo/eval" "$WORK/demo-eval"
rm -rf "$WORK/demo-eval/runs" "$WORK/demo-eval/__pycache__"
DEMO="$WORK/demo-eval"

version=$("$PY" -c 'import sys, av, PIL, yaml; print(sys.version.split()[0], "av", av.__version__, "pillow", PIL.__version__, "pyyaml", yaml.__version__)')
echo "smoke: Python $version"
fail() { echo "smoke FAILED ($version): $*" >&2; exit 1; }
step() { echo "smoke: $*"; }

# summary REPORT KEY -> prints report["summary"][KEY]
summary() { "$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["summary"][sys.argv[2]])' "$1" "$2"; }

step "installed package is used"
where=$("$PY" -c 'import glasskit_eval; print(glasskit_eval.__file__)')
case "$where" in "$ROOT"/glasskit_eval/*) fail "imported the checkout ($where), not the installed package";; esac

step "demo eval"
"$PY" -m glasskit_eval run --eval-dir "$DEMO" --output-json demo.json >demo.out || fail "demo eval exited $?"
[ "$(summary demo.json passed_attempts)" = 12 ] || fail "demo eval: expected 12 passed samples"
"$PY" -m glasskit_eval validate --eval-dir "$DEMO" >/dev/null || fail "validate"

step "command adapter (Python protocol server)"
"$PY" -m glasskit_eval run --eval-dir "$DEMO" --output-json served.json \
    --adapter-command "$PY -m glasskit_eval.protocol_server $DEMO/adapter.py:create_evaluator" >/dev/null \
    || fail "demo eval through the protocol server exited $?"
[ "$(summary served.json passed_attempts)" = 12 ] || fail "protocol server: expected 12 passed samples"

if command -v node >/dev/null; then
    step "command adapter (node)"
    set +e
    # The single-frame targets only: the echo adapter takes no streams.
    "$PY" -m glasskit_eval run --eval-dir "$DEMO" --output-json node.json --target lights_on --target brightness \
        --adapter-command "node $ROOT/fixtures/adapters/js/echo_adapter.mjs" >/dev/null 2>node.err
    code=$?
    set -e
    # The echo adapter reports what it received, so the demo's expectations fail: exit 1, no errors.
    [ "$code" = 1 ] || fail "node adapter run exited $code: $(cat node.err)"
    [ "$(summary node.json evaluated_attempts)" = 9 ] && [ "$(summary node.json error_attempts)" = 0 ] \
        || fail "node adapter: expected 9 evaluated samples and no errors"
else
    step "command adapter (node): skipped, node is not installed"
fi

step "export-frames"
"$PY" -m glasskit_eval export-frames --eval-dir "$DEMO" --case kitchen --at 0.5 --at 3 --output-dir frames \
    >frames.out || fail "export-frames exited $?"
[ "$(find frames -name 'at-*.png' | wc -l)" = 2 ] || fail "export-frames: expected 2 PNGs"

step "zipapp (plain)"
"$PY" -m glasskit_eval build-zipapp plain.pyz >/dev/null || fail "build-zipapp exited $?"
"$PY" -m glasskit_eval build-zipapp again.pyz >/dev/null
cmp -s plain.pyz again.pyz || fail "build-zipapp is not reproducible"
"$PY" plain.pyz run --eval-dir "$DEMO" --output-json plain.json >/dev/null || fail "plain zipapp run exited $?"
[ "$(summary plain.json passed_attempts)" = 12 ] || fail "plain zipapp: expected 12 passed samples"
set +e
"$PY" -I -S plain.pyz --version >/dev/null 2>missing.err
code=$?
set -e
[ "$code" = 2 ] && grep -q "pip install 'pyyaml" missing.err || fail "plain zipapp without deps: $(cat missing.err)"

step "zipapp (--include-deps), run without site-packages"
"$PY" -m glasskit_eval build-zipapp --include-deps full.pyz >/dev/null || fail "build-zipapp --include-deps"
GLASSKIT_EVAL_CACHE_DIR="$WORK/cache" "$PY" -I -S full.pyz run --eval-dir "$DEMO" --output-json full.json \
    >/dev/null || fail "bundled zipapp run exited $?"
[ "$(summary full.json passed_attempts)" = 12 ] || fail "bundled zipapp: expected 12 passed samples"

echo "smoke: all passed on Python $version"
