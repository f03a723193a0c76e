# Two commands for a newcomer: `make demo` and `make test`.  Everything else is a building block.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=
PYTHON311 ?= python3.11

.PHONY: venv release-check demo night demo-fair-share cluster-up cluster-down cluster-status cluster-clean airflow-up airflow-down airflow-status test test-off-bed test-min-airflow test-python-lanes test-worker-package test-unit test-integration lint typecheck screenshots dist test-bed-py312 docs test-oldest-kueue

# Both distributions from this tree, editable, in one resolve (the provider requires the worker package at its
# own version; the worker's editable install is its metadata, the provider's serves the whole package tree),
# with pyproject's [dependency-groups] dev (pip >= 25.1). Works on a new venv and on one an earlier recipe made.
$(VENV)/.installed: pyproject.toml setup.py worker-package/pyproject.toml airflow_kueue_provider/__init__.py
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q --group dev -e ./worker-package -e .
	touch $@

venv: $(VENV)/.installed

## The nightly genomics example end to end on the local cluster (scaled to DEMO_SHARDS=40), then a summary.
demo: venv
	$(PY) tools/demo.py

## One whole night on the bed's real Airflow deployment (benchmarks/night.py): 48 genomics samples and a risk
## team's 1,000 shards in one cohort, Spot evictions, a triggerer killed, the UI read at the peak; this provider
## and the cncf provider's Kueue path in turn. Needs `make cluster-up`; NIGHT_ARGS for a smaller night.
NIGHT_ARGS ?=
night: venv
	$(PY) benchmarks/night.py $(NIGHT_ARGS)

## The Monte Carlo example's scenario B on a real Airflow deployment of its own (.demo/fair-share): the research
## batch borrows, the risk run preempts it (InCohortReclamation), both succeed; then a summary.
demo-fair-share: venv
	$(PY) tools/demo_fair_share.py

## Local cluster (etcd, kube-apiserver, controller-manager, scheduler, KWOK, Kueue, Azurite) as processes.
cluster-up: venv
	$(PY) -m devcluster up

cluster-down: venv
	$(PY) -m devcluster down

cluster-status: venv
	$(PY) -m devcluster status

cluster-clean: cluster-down
	rm -rf .devcluster

## A real Airflow deployment on the local cluster: PostgreSQL, API server, scheduler (LocalExecutor), DAG
## processor and AIRFLOW_TRIGGERERS triggerers as processes; state and logs in .devcluster/airflow.
AIRFLOW_TRIGGERERS ?= 1
AIRFLOW_DAGS ?= example_dags
airflow-up: cluster-up
	$(PY) -m tests.integration.deployment up --triggerers $(AIRFLOW_TRIGGERERS) --dags $(AIRFLOW_DAGS)

airflow-down: venv
	$(PY) -m tests.integration.deployment down

airflow-status: venv
	$(PY) -m tests.integration.deployment status

## Tests: every test; the integration fixture starts the cluster when it is not running.  Three passes: the
## tests that share the cluster peacefully run on TEST_WORKERS pytest-xdist workers, then the `serial` ones
## (they stop Azurite, a node or the whole cluster) alone, without the MultiKueue workers the parallel pass
## started (two idle clusters on 2 cores), then the `quiet` ones (an Airflow deployment of their own, asserts
## on wall-clock time) QUIET_WORKERS modules at a time.  Every pass always runs; the last line sums them up
## and fails the target when a test failed, a pass left no report, or no test ran at all.  The parallel pass
## distributes by work stealing: its bed tests last from 1 s to 3 min, and an idle worker takes tests queued
## on a busy one instead of waiting out the longest tail. tests/unit/packaging (pip installs into fresh venvs,
## about 3 min of a worker's CPU) runs once, in the lowest-versions lane beside the serial pass: the same
## Python, and venvs of its own either way.
TEST_WORKERS ?= 4
QUIET_WORKERS ?= 2
TEST_REPORTS ?= .test-reports
test: venv
	@rm -rf $(TEST_REPORTS); mkdir -p $(TEST_REPORTS)
	-$(PY) -m pytest $(PYTEST_ARGS) -n $(TEST_WORKERS) --dist worksteal -m "not serial and not quiet and not soak" \
		--ignore=tests/unit/packaging --durations=15 --junitxml=$(TEST_REPORTS)/parallel.xml tests
	-$(PY) -m devcluster multikueue down
	@echo "serial, then quiet pass; beside them, niced, the checks that need no cluster ($(TEST_REPORTS)/off-bed.log)"
	-@nice -n 19 $(MAKE) --no-print-directory test-off-bed PYTEST_ARGS="$(PYTEST_ARGS)" \
		>$(TEST_REPORTS)/off-bed.log 2>&1 & off_bed=$$!; \
	$(PY) -m pytest $(PYTEST_ARGS) -m "serial and not soak" --durations=10 \
		--junitxml=$(TEST_REPORTS)/serial.xml tests; \
	$(PY) -m pytest $(PYTEST_ARGS) -n $(QUIET_WORKERS) --dist loadfile -m "quiet and not serial and not soak" \
		--durations=10 --junitxml=$(TEST_REPORTS)/quiet.xml tests; \
	wait $$off_bed; cat $(TEST_REPORTS)/off-bed.log
	-$(MAKE) --no-print-directory test-bed-py312 PYTEST_ARGS="$(PYTEST_ARGS)"
	@$(PY) tools/test_summary.py $(TEST_REPORTS)/parallel.xml $(TEST_REPORTS)/serial.xml $(TEST_REPORTS)/quiet.xml \
		$(TEST_REPORTS)/min-airflow.xml $(foreach v,$(PY_LANES),$(TEST_REPORTS)/unit-py$(v).xml) \
		$(TEST_REPORTS)/bed-py3.12.xml $(TEST_REPORTS)/worker-package.xml $(TEST_REPORTS)/docs.xml \
		$(TEST_REPORTS)/dist.xml

## What needs no cluster: the unit tests on the lowest supported versions and on the other Pythons, the worker
## package alone, the docs and the distributions. `make test` runs them at nice 19 beside the serial and quiet
## passes (not the parallel one: CPU-bound, and the lowest-versions lane builds wheels into the tree).
test-off-bed: venv
	@mkdir -p $(TEST_REPORTS); date +%s >$(TEST_REPORTS)/off-bed.started
	-$(MAKE) --no-print-directory test-min-airflow PYTEST_ARGS="$(PYTEST_ARGS) --junitxml=$(TEST_REPORTS)/min-airflow.xml"
	-$(MAKE) --no-print-directory test-python-lanes PYTEST_ARGS="$(PYTEST_ARGS)"
	-$(MAKE) --no-print-directory test-worker-package PYTEST_ARGS="$(PYTEST_ARGS)"
	-$(PY) tools/junit_step.py $(TEST_REPORTS)/lint.xml lint -- $(VENV)/bin/ruff check .
	-$(PY) tools/junit_step.py $(TEST_REPORTS)/typecheck.xml typecheck -- $(VENV)/bin/mypy airflow_kueue_provider devcluster
	-$(PY) tools/junit_step.py $(TEST_REPORTS)/docs.xml docs -- bash tools/build_docs.sh
	-$(PY) tools/junit_step.py $(TEST_REPORTS)/dist.xml dist -- $(PYTHON311) tools/check_dist.py --no-install
	@echo "the checks that need no cluster took $$(( $$(date +%s) - $$(cat $(TEST_REPORTS)/off-bed.started) )) s"

## The lowest supported versions: build the wheel, install it in a venv of its own (kept outside the repo) with
## every direct dependency at its pyproject floor (tools/lowest_requirements.py: Airflow 3.1, cncf-kubernetes
## 10.6, kubernetes 32, ...), import it from there, run the unit tests.
MIN_VENV ?= $(HOME)/.cache/airflow-kueue-provider/venv-airflow-min
test-min-airflow: venv
	@rm -rf dist build; $(PY) -m pip wheel -q --no-deps -w dist ./worker-package . \
		&& rm -rf build airflow_kueue_provider.egg-info
	@test -x $(MIN_VENV)/bin/python || python3 -m venv $(MIN_VENV)
	@# Both out first: a same-version wheel of before the split owns kueue/, storage/ and worker/ too, and
	@# replacing it after the worker package would delete the worker package's files (docs/install.md).
	$(MIN_VENV)/bin/pip uninstall -q -y airflow-kueue-provider airflow-kueue-provider-worker
	$(MIN_VENV)/bin/pip install -q $$($(PY) tools/lowest_requirements.py) dist/*.whl \
		pytest pytest-timeout pytest-xdist hypothesis
	cd "$$(mktemp -d)" && $(MIN_VENV)/bin/python -c "import airflow, airflow_kueue_provider as p; \
		from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator; \
		from airflow_kueue_provider.plugins.kueue_ui import KueueUiPlugin; \
		assert '/site-packages/' in p.__file__, p.__file__; \
		print('installed wheel', p.__version__, 'on Airflow', airflow.__version__)"
	$(MIN_VENV)/bin/python -m pytest $(PYTEST_ARGS) -n 2 -q tests/unit

## The unit tests on the other Pythons pyproject declares (3.12, 3.13; the rest of `make test` runs on 3.11):
## a venv each, kept outside the repo, from pyenv's installs (or python3.X on PATH). Not tests/unit/packaging:
## its pip installs into fresh venvs (a third of a lane's CPU) check the install commands, which the 3.11 and
## lowest-versions lanes run.
PY_LANES ?= 3.12 3.13
test-python-lanes: venv
	@mkdir -p $(TEST_REPORTS); status=0; for v in $(PY_LANES); do \
	  py=$$(ls -d $(HOME)/.pyenv/versions/$$v.*/bin/python$$v 2>/dev/null | tail -1); \
	  py=$${py:-$$(command -v python$$v)}; \
	  if [ -z "$$py" ]; then echo "test-python-lanes: no Python $$v here: pyenv install $$v, or set PY_LANES" >&2; \
	    status=1; continue; fi; \
	  venv=$(HOME)/.cache/airflow-kueue-provider/venv-py$$v; \
	  test -x $$venv/bin/python || $$py -m venv $$venv; \
	  $$venv/bin/pip install -q 'pip>=25.1' && $$venv/bin/pip install -q --group dev -e ./worker-package -e . \
	    || { status=1; continue; }; \
	  echo "unit tests on $$($$venv/bin/python --version)"; \
	  $$venv/bin/python -m pytest $(PYTEST_ARGS) -n 2 -q --junitxml=$(TEST_REPORTS)/unit-py$$v.xml \
	    --ignore=tests/unit/packaging tests/unit \
	    || status=1; \
	done; exit $$status

## A bed lane on Python 3.12 (Airflow's images default to it): @task.kueue on the local cluster (operator, hooks,
## Blob ledger, results, the Kueue tab's app), from test-python-lanes' 3.12 venv (run it first); the process
## nodes' shards run on the bed's own venv. BED_LANE_TESTS=tests/integration/triggers adds the trigger suite.
BED_LANE_TESTS ?= tests/integration/decorators
test-bed-py312: venv
	@mkdir -p $(TEST_REPORTS); venv=$(HOME)/.cache/airflow-kueue-provider/venv-py3.12; \
	test -x $$venv/bin/python || { echo "test-bed-py312: run make test-python-lanes first ($$venv)" >&2; exit 1; }; \
	echo "bed lane on $$($$venv/bin/python --version)"; \
	$$venv/bin/python -m pytest $(PYTEST_ARGS) -q -m "not serial and not quiet and not soak" \
		--junitxml=$(TEST_REPORTS)/bed-py3.12.xml $(BED_LANE_TESTS)

## The worker package (worker-package/, what a shard's image installs): built from this tree, installed alone
## in a venv of its own (kept outside the repo), checked to import without Airflow, and the worker SDK's unit
## tests run against the installed copy (from a copy of the tests outside the repo, so the tree is not imported).
## Without the provider, airflow_kueue_provider is a namespace package: the worker must not need its __init__.
WORKER_VENV ?= $(HOME)/.cache/airflow-kueue-provider/venv-worker
test-worker-package: venv
	@build=$$(mktemp -d) && mkdir -p $(TEST_REPORTS) && \
	$(PY) -m pip wheel -q --no-deps -w $$build/dist ./worker-package && \
	{ test -x $(WORKER_VENV)/bin/python || python3 -m venv $(WORKER_VENV); } && \
	$(WORKER_VENV)/bin/pip install -q $$build/dist/*.whl pytest pytest-timeout hypothesis && \
	$(WORKER_VENV)/bin/pip install -q --force-reinstall --no-deps $$build/dist/*.whl && \
	mkdir -p $$build/tests/unit && cp tests/__init__.py tests/conftest.py $$build/tests/ && \
	cp tests/unit/__init__.py $$build/tests/unit/ && cp -r tests/unit/worker $$build/tests/unit/ && \
	cd $$build && $(WORKER_VENV)/bin/python -c "import importlib.util as u, airflow_kueue_provider.worker as w; \
		assert '/site-packages/' in w.__file__, w.__file__; \
		assert not [m for m in ('airflow', 'kubernetes') if u.find_spec(m)], 'Airflow or Kubernetes installed'; \
		print('worker package', w.__file__)" && \
	$(WORKER_VENV)/bin/python -m pytest $(PYTEST_ARGS) -q -p no:cacheprovider \
		--junitxml=$(CURDIR)/$(TEST_REPORTS)/worker-package.xml tests/unit/worker

## The release artifacts: the provider's sdist and wheel and the worker package's wheel in dist/, no installed
## file in both wheels, twine check --strict, and both wheels installed in a clean venv (python3.11, kept
## outside the repo) where `airflow providers list` must list the provider (tools/check_dist.py). Needs
## python3.11 and the package index only: not the project's venv (build and twine live in a tool venv).
dist:
	$(PYTHON311) tools/check_dist.py

## Whether this tree could be released as it is (tools/release_check.py, docs/release.md): the version, its
## CHANGELOG section, the tag it would get, [project.urls], and make dist's artifacts built, twine-clean and
## owning disjoint files. Prints "releasable" or "not releasable" with each missing item and its fix.
release-check:
	$(PYTHON311) tools/release_check.py

test-unit: venv
	$(PY) -m pytest $(PYTEST_ARGS) tests/unit

test-integration: venv
	$(PY) -m pytest $(PYTEST_ARGS) tests/integration

lint: venv
	$(VENV)/bin/ruff check .

typecheck: venv
	$(VENV)/bin/mypy airflow_kueue_provider devcluster

# The README's pictures: copies of what the browser tests saved in the last `make test`.
SHOTS := kueue-queues-waiting kueue-queues-admitted kueue-task-live kueue-task-finished kueue-queues-history \
	kueue-task-trend kueue-queues-over-time kueue-queues-recent-runs test_another_operators_tab_says_it_has_no_kueue_job \
	kueue-nights
screenshots:
	mkdir -p docs/screenshots
	for s in $(SHOTS); do cp .test-reports/screenshots/$$s.png docs/screenshots/; done

## The docs site (mkdocs.yml) with warnings as errors, built outside the repository: tools/build_docs.sh.
docs:
	bash tools/build_docs.sh

## The oldest Kueue the docs claim (docs/compatibility.md) on a side bed of its own beside the main one: the
## pinned bed's binaries with OLDEST_KUEUE built in a module of its own (devcluster/build_kueue.sh), every port
## moved by 1,000, both kueue.x-k8s.io versions served as that release ships; then the lane's tests, and the
## side bed stopped. Not part of `make test` (its figures: benchmarks/results/oldest_kueue.md).
OLDEST_KUEUE ?= v0.15.2
OLDEST_KUEUE_STATE ?= $(CURDIR)/.devcluster-oldest-kueue
OLDEST_KUEUE_TESTS ?= tests/integration/operators/test_indexed_job_outcomes.py \
	tests/integration/operators/test_indexed_job_queueing.py tests/integration/operators/test_checkpointing.py \
	tests/integration/operators/test_partial_admission.py tests/integration/operators/test_jobset.py \
	tests/integration/operators/test_queue_setup.py tests/integration/operators/test_deadline.py \
	tests/integration/triggers/test_kueue_job_trigger.py tests/integration/hooks/test_kueue_hook.py
# The position in the queue comes from the visibility API, which a release older than v0.17 runs without here.
OLDEST_KUEUE_DESELECT ?= --deselect \
	tests/integration/operators/test_indexed_job_queueing.py::test_task_waits_in_a_full_queue_logs_its_position_and_succeeds
test-oldest-kueue: venv
	@mkdir -p $(TEST_REPORTS); export DEVCLUSTER_STATE=$(OLDEST_KUEUE_STATE) DEVCLUSTER_PORT_SHIFT=1000 \
		DEVCLUSTER_KUEUE_VERSION=$(OLDEST_KUEUE) DEVCLUSTER_KUEUE_API=both; \
	$(PY) -m devcluster up && \
	$(PY) -m pytest $(PYTEST_ARGS) -q -m "not serial and not quiet and not soak" -p no:cacheprovider \
		--junitxml=$(TEST_REPORTS)/oldest-kueue.xml $(OLDEST_KUEUE_DESELECT) $(OLDEST_KUEUE_TESTS); rc=$$?; \
	$(PY) -m devcluster down; exit $$rc
