# The environment lives in .venv unless SCALEBENCH_VENV names another (CI keeps one outside
# the clone so that repeated runs do not each build a multi-GB environment).
VENV ?= $(or $(SCALEBENCH_VENV),.venv)
PY := $(VENV)/bin/python
PYTEST_ARGS ?=

.PHONY: setup sweep test test-quick lint horovod bench clean gpu-rehearsal

setup:
	@bash scripts/setup.sh $(VENV)

sweep: setup
	$(PY) -m scalebench sweep workloads/default.toml

test: setup
	@bash scripts/setup_slurm.sh
	@bash scripts/test.sh $(PY) $(PYTEST_ARGS)

test-quick: setup
	$(PY) -m pytest -q -n 2 -m "not slow" $(PYTEST_ARGS)

lint: setup
	$(VENV)/bin/ruff check scalebench tests benchmarks

horovod: setup
	bash scripts/install_horovod.sh $(VENV) --force

bench: setup
	$(PY) benchmarks/harness_overhead.py
	$(PY) benchmarks/horovod_overhead.py
	$(PY) benchmarks/ray_vs_ddp.py

# The GPU visit rehearsed on this machine (downloads several GB; not part of `make test`).
gpu-rehearsal:
	bash scripts/gpu-rehearsal.sh $(or $(REHEARSAL_WORK),$(or $(TMPDIR),/tmp)/scalebench-rehearsal)

clean:
	rm -rf results/default results/allreduce .pytest_cache
