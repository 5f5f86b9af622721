# mlroute: `make demo` runs the main job on the default fabric, `make test` runs the tests.
# Both install what they need first (a venv in .venv with pinned dependencies).
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.installed
# The OpenFlow framework: Ryu 4.34 where it installs (Python 3.11), os-ken 4 on 3.12 and later
# (`make install PYTHON=python3.12 VENV=.venv312`); FRAMEWORK=ryu or osken overrides.
PYMINOR := $(shell $(PYTHON) -c 'import sys; print(sys.version_info[1])' 2>/dev/null)
FRAMEWORK ?= $(if $(filter 11,$(PYMINOR)),ryu,osken)

.PHONY: install system test test-live test-unit test-fast docs demo demo-fattree demo-srv6 controller bench paper paper-quick clean

install: $(STAMP)

# Ryu 4.34 on Python 3.11 needs the old setuptools, no build isolation and a one-line patch of
# ryu/app/wsgi.py (eventlet >= 0.30.3 has no ALREADY_HANDLED); see docs/environment.md.
# os-ken installs from its pins (requirements-osken.txt).
$(STAMP): requirements.txt requirements-osken.txt setup.cfg setup.py
	$(PYTHON) -m venv $(VENV)
ifeq ($(FRAMEWORK),ryu)
	$(PIP) install -q setuptools==57.5.0 pbr==7.1.3 wheel
	$(PIP) install -q --no-build-isolation ryu==4.34 eventlet==0.33.3 dnspython==2.9.2 greenlet==3.5.6
	W=$$($(PY) -c 'import os,ryu; print(os.path.join(os.path.dirname(ryu.__file__),"app","wsgi.py"))'); \
	  sed -i 's/^\( *\)from eventlet\.wsgi import ALREADY_HANDLED$$/\1ALREADY_HANDLED = getattr(__import__("eventlet.wsgi", fromlist=["wsgi"]), "ALREADY_HANDLED", [])/' "$$W"
else
	$(PIP) install -q -r requirements-osken.txt
endif
	$(PIP) install -q -r requirements.txt
	$(PIP) install -q --no-build-isolation --no-deps -e .
	$(VENV)/bin/mlroute-controller --version
	touch $(STAMP)

# System packages and a running Open vSwitch (root; used by the emulation and its tests).
# Also: SimGrid (an independent max-min oracle for the fluid model), etcd (redundant
# controllers), Chromium and its driver (the web view's browser test), PyTorch (gloo) and
# Open MPI with mpi4py (real collective libraries in Mininet hosts, system Python), socat (the
# live PyTorch hook test relays a host's REST requests to the controller), lldpd (hosts' LLDP
# agents: their chassis id joins a host's interfaces across planes), pmacct (pmacctd's sfprobe:
# sFlow from Linux routers, tests/test_sflow_pmacct_netns.py).
SYSTEM_TOOLS := mn ovs-vsctl iperf3 ping ethtool etcd chromium chromedriver mpirun socat lldpd \
  pmacctd
system:
	@missing=0; for t in $(SYSTEM_TOOLS); do command -v $$t >/dev/null || missing=1; done; \
	  /usr/bin/python3 -c 'import simgrid' 2>/dev/null || missing=1; \
	  /usr/bin/python3 -c 'import torch.distributed, mpi4py' 2>/dev/null || missing=1; \
	  [ $$missing = 0 ] || { \
	  export DEBIAN_FRONTEND=noninteractive; apt-get update -qq && \
	  apt-get install -y -qq --no-install-recommends mininet openvswitch-switch \
	    openvswitch-testcontroller iperf3 iputils-ping ethtool tcpdump python3-simgrid \
	    etcd-server chromium chromium-driver python3-torch openmpi-bin python3-mpi4py \
	    socat lldpd pmacct >/dev/null; }
	@/usr/share/openvswitch/scripts/ovs-ctl status >/dev/null 2>&1 || \
	  /usr/share/openvswitch/scripts/ovs-ctl --system-id=random start >/dev/null 2>&1
	@/usr/share/openvswitch/scripts/ovs-ctl status

# Unit tests run on both cores (pytest-xdist); integration tests one at a time (one Open vSwitch).
WORKERS ?= 2

# Lint, the manual, every unit test, then one live test per capability and fabric shape (about
# 20 minutes on 2 cores). As root, the integration tests' system packages and Open vSwitch are
# installed first; without root they skip themselves (and say so).
# The two venvs install side by side (pip waits on the network and the disk as much as on a
# core), then the manual builds.
test:
	@$(MAKE) --no-print-directory -j2 install $(DOCS_STAMP)
	@$(MAKE) --no-print-directory docs
	@if [ "$$(id -u)" = 0 ]; then $(MAKE) --no-print-directory system; \
	  else echo "make test: not root: the integration tests (Mininet, Open vSwitch) will be skipped"; fi
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -q -n $(WORKERS) -m "not integration"
	$(PY) -m pytest -q -m "integration and not extended" --durations=25

# Every integration test: make test's, and the further cases marked `extended` (other libraries,
# modes and sequences of what make test proves on the same shape; about 50 minutes). Root.
test-live: install system
	$(PY) -m pytest -q -m integration

# The manual (docs/, mkdocs.yml): the pages generated from the code and bench/*.json are written
# with the controller's venv, then MkDocs and the Material theme, pinned in requirements-docs.txt
# and kept in a venv of their own, build it into site/ with warnings as errors. No root, no OVS.
DOCS_VENV ?= .venv-docs
DOCS_STAMP := $(DOCS_VENV)/.installed
$(DOCS_STAMP): requirements-docs.txt
	$(PYTHON) -m venv $(DOCS_VENV)
	$(DOCS_VENV)/bin/pip install -q -r requirements-docs.txt
	touch $(DOCS_STAMP)

docs: install $(DOCS_STAMP)
	$(PY) docs/gen_reference.py
	NO_MKDOCS_2_WARNING=1 $(DOCS_VENV)/bin/mkdocs build --strict --quiet

# Everything that needs no root, Open vSwitch or Mininet (CI runs it on Python 3.12 and 3.13).
test-unit: install
	$(PY) -m pytest -q -n $(WORKERS) -m "not integration"

# The fast tier (about a minute and a half on 2 cores): unit, property and doctests without
# the tests marked slow (they run in test and test-unit; a property test's full example count
# among them) and without Mininet.
test-fast: install
	$(PY) -m pytest -q -n $(WORKERS) -m "not slow and not integration"

# The controller's ports in the demos (`make demo REST_PORT=8081 OF_PORT=6654 SFLOW_PORT=6344`:
# beside a controller that holds the defaults, 8080, 6653 and 6343); ARGS: more options of
# emulation/demo.py (`make demo ARGS="--mode sr"`).
DEMO_PORTS = $(if $(REST_PORT),--rest-port $(REST_PORT)) $(if $(OF_PORT),--of-port $(OF_PORT)) \
	$(if $(SFLOW_PORT),--sflow-port $(SFLOW_PORT))

demo: install system
	$(PY) -m emulation.demo $(DEMO_PORTS) $(ARGS)

# The three-tier demo: ECMP against mlroute on an emulated k = 4 fat-tree.
demo-fattree: install system
	$(PY) -m emulation.demo --fat-tree $(DEMO_PORTS) $(ARGS)

# The demo's two rings on a fabric without OpenFlow: Linux routers with static SRv6 SIDs, the
# controller with --mlroute-southbound none and one mlroute-agent per host (ECMP against the
# plan the hosts push). FABRIC=fattree: three tiers of routers (k = 4) with real collectives,
# gloo and Open MPI rings and an all-to-all, each job's step against the prediction.
demo-srv6: install system
	$(PY) -m emulation.demo_srv6 $(if $(filter fattree,$(FABRIC)),--fat-tree) $(ARGS)

# The controller with no configuration: it discovers the fabric (start Mininet beside it, see
# docs/howto/run-controller.md or the first tutorial, docs/tutorials/first-route.md). One
# command on either framework: mlroute-controller runs Ryu where it is installed, else os-ken
# (controller/shell/launch.py); `ryu-manager --user-flags controller/shell/flags.py
# controller/shell/app.py` still runs the same app under Ryu. ARGS: its options
# (`make controller ARGS="--wsapi-port 8081 --mlroute-fabric fabric.json"`; all of them:
# `mlroute-controller --help`).
controller: install
	$(VENV)/bin/mlroute-controller $(ARGS)

bench: install system
	$(PY) -m benchmarks.planner
	$(PY) -m benchmarks.learning --lifecycle
	$(PY) -m simulation.trace_report --workers 2
	$(PY) -m benchmarks.cuts --workers 2
	$(PY) -m benchmarks.fabrics
	$(PY) -m benchmarks.request_path
	$(PY) -m benchmarks.churn
	$(PY) -m benchmarks.replan
	$(PY) -m benchmarks.jobs_search
	$(PY) -m benchmarks.patterns --out bench/patterns.json
	$(PY) -m benchmarks.entries
	$(PY) -m benchmarks.controlplane --fat-tree 16 --repeat 5 --out bench/controlplane.json
	$(PY) -m benchmarks.emulation
	$(PY) -m benchmarks.reconcile
	$(PY) -m benchmarks.hostmode
	$(PY) -m benchmarks.failover
	$(PY) -m benchmarks.shared
	$(PY) -m benchmarks.connect
	$(PY) -m benchmarks.zeroconfig
	$(PY) -m benchmarks.collectives
	$(PY) -m benchmarks.fattree
	$(PY) -m benchmarks.scale
	$(PY) -m benchmarks.liveness --fat-tree 16 --rounds 50
	$(PY) -m benchmarks.srv6
	$(PY) -m benchmarks.pathsets
	$(PY) -m benchmarks.agents
	$(PY) -m benchmarks.chaos

paper: install
	$(PY) -m simulation.paper
	$(PY) -m simulation.paper_clos

paper-quick: install
	$(PY) -m simulation.paper --quick
	$(PY) -m simulation.paper_clos --quick

clean:
	rm -rf $(VENV) $(DOCS_VENV) site *.egg-info .pytest_cache .hypothesis
