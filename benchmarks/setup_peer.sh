#!/usr/bin/env bash
# Recreates benchmarks/.venv-torchmonarch: Meta's torchmonarch 0.7.0, the peer that
# benchmarks/run.py measures our runtime against. The folder is gitignored.
#
# torch is installed first and pinned to the CPU build 2.13.0: torchmonarch 0.7.0 does not
# depend on torch at all, and an unpinned `torch` could pull a multi-GB CUDA build. Where a
# local wheel directory is configured (pip's find-links), pip takes the CPU wheel from there.
#
# The checks run with `python -I`: run from the repository root, a plain `python -` would import
# this checkout's monarch/ (the working directory comes first on sys.path) instead of torchmonarch.
#
# Usage: bash benchmarks/setup_peer.sh [--force]   (--force deletes and rebuilds the venv;
#        PEER_VENV=/other/path builds it elsewhere, PYTHON=python3.11 picks the interpreter)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="${PEER_VENV:-$here/.venv-torchmonarch}"
python="${PYTHON:-python3}"

if [[ "${1:-}" == "--force" ]]; then
    rm -rf "$venv"
fi

if [[ -x "$venv/bin/python" ]] && "$venv/bin/python" -I - <<'PY' 2>/dev/null
import importlib.metadata as md
assert md.version("torchmonarch") == "0.7.0"
import monarch.actor, numpy, torch
PY
then
    echo "setup_peer: $venv already has torchmonarch 0.7.0; use --force to rebuild." >&2
    exit 0
fi

"$python" -m venv "$venv"
"$venv/bin/pip" install --quiet "torch==2.13.0" numpy
"$venv/bin/pip" install --quiet "torchmonarch==0.7.0"
"$venv/bin/python" -I - <<'PY'
import importlib.metadata as md
import monarch.actor  # noqa: F401  (fails here, not in the benchmark, if the wheel is broken)
print("setup_peer: torchmonarch", md.version("torchmonarch"), "torch", md.version("torch"))
PY
