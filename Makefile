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

test: setup
	$(VPY) -m pytest -q tests

demo: setup
	$(VPY) -m experiments.rl --config=configs/rl_tiny.py --workdir=runs/rl_tiny

clean-venv:
	rm -rf $(VENV)
