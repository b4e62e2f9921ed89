# Two entry points (see README): `make sweep` and `make test`. Both install into .venv first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install sweep test lint

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[local,test]'
	touch $@

# The checkout's Python compiled ahead (an editable install is not compiled by pip, and where PYTHONDONTWRITEBYTECODE
# is set every process would compile trtsweep again: each module, lane and client of every run); only what changed,
# not the Triton model templates (copied into model repositories as they are).
install: $(VENV)/.installed
	$(BIN)/python -m compileall -q -x /templates/ src action_plugins callback_plugins filter_plugins lookup_plugins >/dev/null

# The embedded default sweep: demo model on CPU, real Triton server, results in results/<sweep>/.
sweep: install
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/ansible-playbook sweep.yml

# The suite in three steps, each failing with the names of its failed tests (CONTRIBUTING.md, "CI's time"):
# the unit tests first (a mistake shows in the first minutes), then the real-server tests in parallel workers, a
# module (or an xdist_group) to a worker, the longest first, then the few whose timing windows need a quiet machine.
# TEST_REPORTS=<dir> keeps each step's junit XML there (tools/test_durations.py reads them).
PYTEST := PATH="$(abspath $(BIN)):$$PATH" $(BIN)/pytest -rfE
TEST_WORKERS ?= 2
TEST_REPORTS ?=
junit = $(if $(TEST_REPORTS),--junitxml=$(abspath $(TEST_REPORTS))/$(1).xml)
# Two workers share two cores: each one's torch (a served model, an in-process one) gets one thread (two each made
# them fight for the cores, OpenMP threads spinning: two concurrent generations took 97 s instead of 35 s).
SHARED_CORES := OMP_NUM_THREADS=1
SERVER_TESTS := tests/integration tests/fleet tests/container tests/slurm
# Step 2 is two sessions side by side: the real-server tests in TEST_WORKERS workers, and beside them, one after
# another in a session of their own, the tests that wait more than they compute (marked `waits`: stand-in servers,
# the Slurm bed; tests/scheduling.py WAITS), which cost the workers little. Its output follows the workers'; the step
# fails if either session failed. Its ports (TEST_PORT_SLOT=3: 29000-31999, tests/conftest.py free_block) lie below
# Linux's ephemeral range (32768-60999), as the workers' do (slots 0-2).
# The suite's disk peak: about 6 GiB above the installed checkout (CONTRIBUTING.md, "Disk"); checked first, in one line.
TEST_FREE_GIB ?= 7
test: install
	$(BIN)/python tools/free_space.py $(TEST_FREE_GIB)
	$(SHARED_CORES) $(PYTEST) tests/unit -m "not quiet" -n 2 --dist loadfile $(call junit,unit)
	@log=$$(mktemp); \
	( $(SHARED_CORES) TEST_PORT_SLOT=3 $(PYTEST) $(SERVER_TESTS) -m "waits and not quiet" -p no:xdist \
		$(call junit,waits) >$$log 2>&1; echo $$? >$$log.rc ) & \
	$(SHARED_CORES) $(PYTEST) $(SERVER_TESTS) -m "not waits and not quiet" -n $(TEST_WORKERS) --dist loadgroup \
		$(call junit,parallel); workers=$$?; \
	wait; echo "== the waiting tests (a session beside the workers) =="; cat $$log; waited=$$(cat $$log.rc); \
	rm -f $$log $$log.rc; test $$workers -eq 0 && test $$waited -eq 0
	$(PYTEST) tests/unit tests/integration tests/fleet -m quiet -p no:xdist $(call junit,quiet)

lint: install
	$(BIN)/ruff check . && $(BIN)/ruff format --check . && PATH="$(abspath $(BIN)):$$PATH" $(BIN)/ansible-lint
