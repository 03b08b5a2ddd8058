# Lakegate: `make demo` runs the main job on the local stack; `make test` runs every test.
# Both install what they need (venv, pip, npm) on a fresh machine.
SHELL := /bin/bash
PY_BOOT ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
IDP_DIR := devstack/idp
AZURITE_DIR := devstack/azurite
export PYSPARK_PYTHON := $(abspath $(PY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(PY))
export NO_PROXY := localhost,127.0.0.1
# Spark (the demo, the long job, the e2e tests) binds and advertises loopback only.
export SPARK_LOCAL_IP := 127.0.0.1
export no_proxy := localhost,127.0.0.1

.PHONY: venv azurite prometheus-bin jvm demo long-job test test-unit test-integration bench harden soak proto proto-check unasync lint clean devstack-up devstack-down client-min-deps lock

venv: $(STAMP)

$(STAMP): requirements/dev.lock pyproject.toml clients/python/pyproject.toml devstack/pyproject.toml $(IDP_DIR)/package-lock.json
	test -x $(PY) || $(PY_BOOT) -m venv $(VENV)
	$(PY) -m pip install -q -U pip
	$(PY) -m pip install -q --require-hashes -r requirements/dev.lock
	$(PY) -m pip install -q --no-deps -e clients/python -e . -e devstack
	$(PY) -m pip check
	cd $(IDP_DIR) && npm ci --no-audit --no-fund --loglevel=error
	touch $(STAMP)

# Azurite (the ADLS stack, ~360 MB of npm packages, ~50 s): only for what runs ADLS, i.e. the
# tests and `make demo DEMO_ARGS="--storage adls"`; the default S3 demo does not wait for it.
AZURITE_STAMP := $(AZURITE_DIR)/node_modules/.installed
azurite: $(AZURITE_STAMP)

$(AZURITE_STAMP): $(AZURITE_DIR)/package-lock.json
	cd $(AZURITE_DIR) && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error
	touch $(AZURITE_STAMP)

# requirements/*.lock: every transitive package pinned with hashes (pip-compile from pip-tools,
# in its own cached tool venv .venv-lock), from requirements/dev.txt (tests, `make venv`) and
# requirements/daemon.in (the daemon image). Run after editing either input.
LOCK_TOOLS := .venv-lock/bin/pip-compile
PIP_COMPILE := $(LOCK_TOOLS) -q --generate-hashes --allow-unsafe --strip-extras --no-emit-index-url --no-emit-find-links
lock:
	test -x $(LOCK_TOOLS) || { $(PY_BOOT) -m venv .venv-lock && .venv-lock/bin/pip install -q pip==26.3 pip-tools==7.6.2; }
	timeout 1200 $(PIP_COMPILE) -o requirements/dev.lock requirements/dev.txt
	timeout 600 $(PIP_COMPILE) -o requirements/daemon.lock requirements/daemon.in

# Prometheus + promtool from Debian's `prometheus` package, for tests/deploy (rule checks and the
# scrape integration test). Skipped when promtool is already on PATH.
prometheus-bin:
	@command -v promtool >/dev/null 2>&1 || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus \
	  || { $$SUDO apt-get update -qq && \
	       $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus; }; }

# The JVM path (Iceberg's Spark runtime, S3A, ABFS, the GCS connector, delta-spark): lakegate-hadoop
# (clients/jvm/lakegate-hadoop, JUnit-tested on every build), the jars of
# clients/jvm/spark-jars/pom.xml from Maven Central (~240 MB, into ~/.m2, each jar's SHA-256
# checked against clients/jvm/spark-jars.sha256, nothing else admitted) and .venv-jvm with
# PySpark 4.1.4 (requirements/jvm.lock: Iceberg has no runtime for the dev venv's Spark 4.3).
# Both are stamped, so a second `make test` fetches nothing.
JVM_DIR := clients/jvm
JVM_JARS := $(JVM_DIR)/spark-jars/target/jars
JVM_JARS_STAMP := $(JVM_JARS)/.verified
JVM_VENV_STAMP := .venv-jvm/.installed
# lakegate-hadoop (the credential providers): built and unit-tested (JUnit 5, Surefire) whenever
# its sources or poms change.
JVM_LIB := $(JVM_DIR)/lakegate-hadoop/target/lakegate-hadoop-0.1.0.jar
JVM_LIB_SRC := $(shell find $(JVM_DIR)/lakegate-hadoop/src -type f 2>/dev/null)
jvm: $(JVM_JARS_STAMP) $(JVM_LIB) $(JVM_VENV_STAMP)

$(JVM_JARS_STAMP): $(JVM_DIR)/pom.xml $(JVM_DIR)/spark-jars/pom.xml $(JVM_DIR)/spark-jars.sha256
	rm -rf $(JVM_JARS)
	cd $(JVM_DIR) && timeout 1200 mvn -B -q -C -pl spark-jars -am package
	cd $(JVM_JARS) && sha256sum --strict --quiet -c $(abspath $(JVM_DIR)/spark-jars.sha256)
	test "$$(ls $(JVM_JARS)/*.jar | wc -l)" = "$$(wc -l < $(JVM_DIR)/spark-jars.sha256)"
	touch $@

$(JVM_LIB): $(JVM_DIR)/pom.xml $(JVM_DIR)/lakegate-hadoop/pom.xml $(JVM_LIB_SRC)
	cd $(JVM_DIR) && timeout 900 mvn -B -q -C -pl lakegate-hadoop -am package
	touch $@

$(JVM_VENV_STAMP): requirements/jvm.lock
	test -x .venv-jvm/bin/python || $(PY_BOOT) -m venv .venv-jvm
	timeout 1200 .venv-jvm/bin/python -m pip install -q --disable-pip-version-check --require-hashes -r requirements/jvm.lock
	touch $@

demo: venv $(if $(findstring adls,$(DEMO_ARGS)),azurite)
	$(PY) -m demo $(DEMO_ARGS)

LINT_PATHS := gateway clients/python devstack demo loadtest hardening tests proto

lint: venv
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/mypy --strict gateway clients/python/src/lakegate_client

test: venv azurite prometheus-bin jvm
	$(MAKE) --no-print-directory lint
	$(PY) proto/generate.py --check
	$(PY) clients/python/unasync.py --check
	$(MAKE) --no-print-directory client-min-deps
	$(PY) -m pytest -p no:cacheprovider tests clients/python/tests

# Three clean venvs, cached (rebuilt only when their pins or the client's declared dependencies
# change): the core client next to protobuf 4.25 / grpcio 1.62 (.venv-min-core),
# lakegate-client[grpc] at its declared floors (.venv-min-grpc), and the core client next to
# PySpark 3.5 (.venv-min-spark35). tests/integration/client/test_client_min_installs.py runs a
# probe in each against the real gateway of the local stack.
client-min-deps: venv
	timeout 1800 $(PY) -m tests.deploy.client_min_deps

test-unit: venv
	$(PY) -m pytest -p no:cacheprovider tests/unit clients/python/tests

test-integration: venv azurite
	$(PY) -m pytest -p no:cacheprovider tests/integration

bench: venv
	$(PY) -m loadtest --standard --profile

harden: venv azurite
	$(PY) -m hardening $(HARDEN_ARGS)

soak: venv
	$(PY) -m hardening --soak

# A Spark job whose tasks outlive their first 900 s STS credential (~17 min; not part of `test`).
long-job: venv
	$(PY) -m demo.long_job $(LONG_JOB_ARGS)

proto: venv
	$(PY) proto/generate.py

# The blocking Client, generated from the asyncio AsyncClient (clients/python/unasync.py).
unasync: venv
	$(PY) clients/python/unasync.py

devstack-up: venv azurite
	$(PY) -m devstack up

devstack-down: venv
	$(PY) -m devstack down

clean:
	-$(PY) -m devstack down 2>/dev/null
	rm -rf $(VENV) .venv-jvm $(JVM_DIR)/spark-jars/target $(JVM_DIR)/lakegate-hadoop/target .venv-min-core .venv-min-grpc .venv-min-spark35 .venv-proto .venv-lock .devstack $(IDP_DIR)/node_modules $(AZURITE_DIR)/node_modules
