# Two commands: `make run` and `make test`. Each installs whatever is missing first
# (virtualenv + pinned Python packages, the JVM jars from Maven Central) and is a no-op
# for the parts already installed.

PYTHON  ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
MVN     := mvn -q -B -s deps/maven-settings.xml
# Spark's Kafka connector and what pyspark does not already bundle.
SPARK_KAFKA_JARS := spark-sql-kafka-0-10_2.13,spark-token-provider-kafka-0-10_2.13,kafka-clients,commons-pool2

SUDO    := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: run test check soak screenshots bench install lint constraints clean-deps tools java maven browser wrk caddy node tracker

run: install
	$(BIN)/tally up --demo

# Two pytest-xdist workers share the suite (tests/workers.py): one runs the stacks and the
# browser tests, the other the rest, then both share what is left. 42:15 for 2,462 tests in CI
# (stop 49); three workers pushed the load average to 30-36 on 2 cores and tests timed out.
# TEST_WORKERS=0: one process.
TEST_WORKERS ?= 2
test: install
	$(BIN)/pytest $(if $(filter-out 0,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder) $(PYTEST_ARGS)

# The inner loop (a few minutes): lint, then the unit tests and the tests that need only the
# ClickHouse endpoint and take under about 2 s each (tests/lanes.py picks them).
check: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/pytest -m fast $(PYTEST_ARGS)

# The soak (tests/fault/test_soak.py, issue 33): the local stack under the load generator's page
# views at TALLY_SOAK_RATE per second for TALLY_SOAK_SECONDS (default 100 for 300: the short form;
# the long form is TALLY_SOAK_RATE=500 TALLY_SOAK_SECONDS=3600), sampled every TALLY_SOAK_SAMPLE_S;
# report under bench/results/. Not part of `make test`. Ctrl-C stops the load and the stack.
soak: install
	$(BIN)/pytest -m soak tests/fault/test_soak.py tests/fault/test_soak_interrupt.py $(PYTEST_ARGS)

# Redraw the README's pictures in docs/screenshots/ with the browser tests (tests/browser/screenshots.py:
# other runs keep theirs under test-artifacts/, so a test run never rewrites committed files).
screenshots: install
	TALLY_SCREENSHOTS=docs $(BIN)/pytest tests/browser $(PYTEST_ARGS)

# One fixed scenario on the local stack (about 10 minutes); report under bench/results/.
bench: install wrk
	$(BIN)/tally bench

# The stream jobs' JVM code (the per-visitor stateful operator), compiled against pyspark's jars.
SPARK_APP_JAR := .deps/spark-app/tally-stream-jobs.jar

install: tools $(VENV)/.installed .deps/kafka/.resolved .deps/spark/.resolved $(SPARK_APP_JAR) browser caddy wrk tracker

# The tracking snippet the collector serves (collector/tracker.js) is built from its readable
# source by terser, pinned in collector/tracker/package-lock.json and installed from npm into
# .deps/tracker (npm ci wants the manifest beside node_modules, so both are copied there, and is
# run inside it: with --prefix through a symlinked .deps, npm takes the folder for a dependency);
# collector/tracker/terser.json holds the options, which tests/unit/test_tracker_build.py uses too.
TRACKER_SRC := collector/tracker
TERSER      := .deps/tracker/node_modules/terser/bin/terser

tracker: collector/tracker.js

collector/tracker.js: $(TRACKER_SRC)/tracker.src.js $(TRACKER_SRC)/terser.json .deps/tracker/.installed
	node $(TERSER) --config-file $(TRACKER_SRC)/terser.json $(TRACKER_SRC)/tracker.src.js -o $@ \
		|| { echo "error: terser could not build collector/tracker.js from $(TRACKER_SRC)/tracker.src.js"; exit 1; }

.deps/tracker/.installed: $(TRACKER_SRC)/package.json $(TRACKER_SRC)/package-lock.json | node
	rm -rf .deps/tracker && mkdir -p .deps/tracker
	cp $(TRACKER_SRC)/package.json $(TRACKER_SRC)/package-lock.json .deps/tracker/
	cd .deps/tracker && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error \
		|| { echo "error: could not install the tracker's minifier (terser) from npm"; exit 1; }
	touch $@

# Browser tests drive Debian's Chromium (never a browser downloaded by a test tool).
browser:
	@command -v chromium >/dev/null || { \
	  echo "installing Debian's chromium for the browser tests"; \
	  $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq chromium >/dev/null; } \
	  || { echo "error: could not install chromium (apt-get install chromium)"; exit 1; }

# The security tests run deploy/Caddyfile in front of the dashboard with Debian's caddy
# (tests/security/test_client_ip.py); docker-compose.yml runs Caddy's own image. The package
# starts a system-wide caddy (:80) where systemd runs: the tests start their own, so stop it.
caddy:
	@command -v caddy >/dev/null || { \
	  echo "installing Debian's caddy for the proxy tests"; \
	  $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq caddy >/dev/null \
	  && { $(SUDO) systemctl disable --now caddy >/dev/null 2>&1 || true; }; } \
	  || { echo "error: could not install caddy (apt-get install caddy)"; exit 1; }

# npm installs the tracker's pinned minifier: Debian's nodejs and npm when missing.
node:
	@{ command -v node && command -v npm; } >/dev/null || { \
	  echo "installing Debian's nodejs and npm (npm installs the tracker's minifier)"; \
	  $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq nodejs npm >/dev/null; } \
	  || { echo "error: could not install Node.js (apt-get install nodejs npm)"; exit 1; }

# The benchmark drives the collector with Debian's wrk (an independent HTTP load generator);
# make test runs it too, in the benchmark's smoke test (tests/fault/test_bench_smoke.py).
wrk:
	@command -v wrk >/dev/null || { \
	  echo "installing Debian's wrk for the collector benchmark"; \
	  $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq wrk >/dev/null; } \
	  || { echo "error: could not install wrk (apt-get install wrk)"; exit 1; }

# Kafka 4.x and Spark need Java 17+; Maven resolves their jars. Both come from Debian when
# missing, like chromium and wrk.
tools: java maven

JAVA_17 := java -version 2>&1 | awk -F'"' '/version/ { split($$2, v, "."); ok = v[1] >= 17 } END { exit !ok }'

java:
	@$(JAVA_17) || { \
	  echo "installing Debian's openjdk-17-jdk-headless (Kafka and Spark need Java 17+)"; \
	  $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq openjdk-17-jdk-headless >/dev/null; } \
	  || { echo "error: could not install Java 17 (apt-get install openjdk-17-jdk-headless)"; exit 1; }
	@$(JAVA_17) || { echo "error: Java 17+ is installed but \`java\` on PATH is older: update-alternatives --config java"; exit 1; }
	@command -v javac >/dev/null || { \
	  echo "installing Debian's openjdk-17-jdk-headless (javac compiles the stream jobs' JVM code)"; \
	  $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq openjdk-17-jdk-headless >/dev/null; } \
	  || { echo "error: could not install javac (apt-get install openjdk-17-jdk-headless)"; exit 1; }

maven:
	@command -v mvn >/dev/null || { \
	  echo "installing Debian's maven (it fetches the Kafka and Spark jars)"; \
	  $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq maven >/dev/null; } \
	  || { echo "error: could not install Maven (apt-get install maven)"; exit 1; }

$(VENV)/.installed: pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -c constraints.txt -e '.[dev]'
	touch $@

.deps/kafka/.resolved: deps/kafka/pom.xml deps/maven-settings.xml | tools
	rm -rf .deps/kafka
	$(MVN) -f deps/kafka/pom.xml dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory=$(CURDIR)/.deps/kafka \
		|| { echo "error: could not resolve the Kafka broker jars from Maven Central"; exit 1; }
	touch $@

.deps/spark/.resolved: deps/spark/pom.xml deps/maven-settings.xml | tools
	rm -rf .deps/spark
	$(MVN) -f deps/spark/pom.xml dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory=$(CURDIR)/.deps/spark \
		-DincludeArtifactIds=$(SPARK_KAFKA_JARS) \
		|| { echo "error: could not resolve Spark's Kafka connector jars from Maven Central"; exit 1; }
	touch $@

$(SPARK_APP_JAR): $(wildcard stream_jobs/jvm/src/tally/stream/*.java) stream_jobs/jvm/build $(VENV)/.installed | tools
	stream_jobs/jvm/build $(BIN)/python $@ \
		|| { echo "error: could not compile the stream jobs' JVM code (needs javac, from a JDK 17)"; exit 1; }

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

constraints: $(VENV)/.installed
	{ echo "# The whole dependency tree, pinned (pip install -c). Regenerate with: make constraints"; \
	  $(BIN)/pip list --format=freeze --exclude-editable | grep -v -i -E '^(pip|setuptools)=='; } > constraints.txt

clean-deps:
	rm -rf $(VENV) .deps
