# The two Quick start commands, `make demo` and `make test`, set everything up on a fresh
# machine: they create .venv and install the project with its dev and notebook extras.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint unit compat compat-reference bench bench-quick upstream docs clean

$(STAMP): pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# The CPU build of torch 2.13.0 (a plain `torch` requirement downloads a CUDA build).
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev,notebook,torch]'
	# The real-workload examples and their tests (torchtitan, torchft); where they cannot
	# install, those tests skip, so this step never fails the build.
	$(PY) -m pip install -q -e '.[titan]' || echo "the titan extra is unavailable: its tests will skip"
	# The browser test (tests/e2e) uses Debian's chromium (Playwright cannot download one
	# offline); where apt is unusable it skips, so this step never fails the build.
	command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium) \
		|| echo "chromium unavailable: the browser test will skip"
	# SlurmJob's test starts a one-node Slurm (slurmctld, slurmd, munged) of its own.
	command -v slurmctld >/dev/null || (apt-get update -qq && apt-get install -y -qq slurm-wlm munge) \
		|| echo "slurm unavailable: the SlurmJob test will skip"
	# The terminal tests of `monarch debug` and `monarch top` drive them in tmux.
	command -v tmux >/dev/null || (apt-get update -qq && apt-get install -y -qq tmux) \
		|| echo "tmux unavailable: the terminal tests will skip"
	# The metrics test starts a real Prometheus (Debian's) scraping a process's /metrics.
	command -v prometheus >/dev/null || (apt-get update -qq && apt-get install -y -qq prometheus) \
		|| echo "prometheus unavailable: the Prometheus scrape test will skip"
	# The mount tests (tests/mount) mount FUSE file systems through Debian's libfuse3.
	command -v fusermount3 >/dev/null || (apt-get update -qq && apt-get install -y -qq fuse3) \
		|| echo "fuse3 unavailable: the mount tests will skip"
	touch $(STAMP)

demo: $(STAMP)
	$(PY) cookbook/demo.py

test: $(STAMP) lint
	$(PY) -m pytest -q -p no:cacheprovider tests tutorials --nbval-lax --nbval-current-env

# The lint gate: ruff with the rules chosen in pyproject.toml over the whole tree (notebooks
# included), then `mypy --strict` over monarch/ as tests/unit/test_typing.py runs it (settings in
# pyproject.toml; incremental, so a second run takes seconds). .pre-commit-config.yaml runs the
# same two commands.
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(PY) -m mypy --no-error-summary

unit: $(STAMP)
	$(PY) -m pytest -q tests/unit

# The compatibility programs (tests/compat/programs) on this implementation (`make test` runs
# them too), and the same programs on Meta's torchmonarch 0.7.0, whose output the golden files
# hold: both must pass. benchmarks/setup_peer.sh builds torchmonarch's venv once.
PEER_PY := benchmarks/.venv-torchmonarch/bin/python

compat: $(STAMP)
	$(PY) tests/compat/run.py

compat-reference:
	bash benchmarks/setup_peer.sh
	$(PYTHON) tests/compat/run.py --python $(PEER_PY)

# Every benchmark (W1-W5 side by side with torchmonarch, whose venv benchmarks/setup_peer.sh
# builds; W6, W7, W8 and the standalone ones), one after the other: each report goes to
# benchmarks/results/<date>-<name>.json with the load and the commit (benchmarks/all.py).
# `make bench-quick` runs their smoke tests into a temporary folder.
bench: $(STAMP)
	$(PY) benchmarks/all.py

bench-quick: $(STAMP)
	$(PY) benchmarks/all.py --quick

# Monarch's own tests (python/tests) and examples, unmodified, on ours and on torchmonarch
# 0.7.0 side by side, from Monarch's mirror (UPSTREAM=DIR: a bare git mirror or a checkout;
# nothing is fetched, nothing of theirs lands in this checkout): per-file tables on stdout,
# the report in benchmarks/results/<date>-upstream.json. A measurement, not part of `make test`.
# pyre-extensions, which upstream's tests import, goes into .venv (torchmonarch depends on it).
UPSTREAM ?= /work/.mirror/meta-pytorch+monarch/repo

upstream: $(STAMP)
	bash benchmarks/setup_peer.sh
	$(PEER_PY) -m pip install -q pytest==9.2.0 pytest-timeout==2.4.0 pytest-asyncio==1.5.0
	$(PY) -m pip install -q pyre-extensions==0.0.32
	UPSTREAM=$(UPSTREAM) $(PY) benchmarks/upstream.py

# The guides and the API reference (docs/_build/html/index.html); `make test` builds them too,
# with warnings as errors (tests/docs/test_api_reference.py).
docs: $(STAMP)
	MONARCH_PRESTART=0 $(PY) -m sphinx -W --keep-going -q -b html docs docs/_build/html

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache docs/_build
