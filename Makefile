# c2jax: every target uses the project environment in .venv/.
PY ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup test demo clean-venv bwrap

setup: $(STAMP) bwrap

$(STAMP): setup.py
	test -x $(VPY) || $(PY) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -m pip install -q -e '.[dev,parity,ray]'
	touch $(STAMP)

# The coding sandbox needs Debian's bubblewrap; install it when missing and we are root.
bwrap:
	@command -v bwrap >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = "0" ]; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap) >/dev/null; \
	  else echo "bubblewrap (bwrap) is missing: run 'sudo apt-get install -y bubblewrap'"; exit 1; fi; }

# Two pytest-xdist workers (the suite is mostly single-threaded XLA compiles: 856 s -> 596 s on
# 2 cores); tests marked xdist_group("ray") share one worker. TEST_WORKERS=0 runs serially.
TEST_WORKERS ?= 2
test: setup
	$(VPY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup tests

demo: setup
	$(VPY) -m experiments.rl --config=configs/rl_tiny.py --workdir=runs/rl_tiny

clean-venv:
	rm -rf $(VENV)
