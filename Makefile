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

.PHONY: run test bench install lint constraints clean-deps check-tools browser wrk

run: install
	$(BIN)/tally up --demo

test: install
	$(BIN)/pytest $(PYTEST_ARGS)

# One fixed scenario on the local stack (about 10 minutes); report under bench/results/.
bench: install wrk
	$(BIN)/tally bench

install: check-tools $(VENV)/.installed .deps/kafka/.resolved .deps/spark/.resolved browser

# Browser tests drive Debian's Chromium (never a browser downloaded by a test tool).
browser:
	@command -v chromium >/dev/null || { \
	  echo "installing Debian's chromium for the browser tests"; \
	  $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq chromium >/dev/null; } \
	  || { echo "error: could not install chromium (apt-get install chromium)"; exit 1; }

# The benchmark drives the collector with Debian's wrk (an independent HTTP load generator).
wrk:
	@command -v wrk >/dev/null || { \
	  echo "installing Debian's wrk for the collector benchmark"; \
	  $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq wrk >/dev/null; } \
	  || { echo "error: could not install wrk (apt-get install wrk)"; exit 1; }

check-tools:
	@command -v java >/dev/null || { echo "error: Java 17+ is required (Debian: apt-get install openjdk-17-jre-headless)"; exit 1; }
	@command -v mvn >/dev/null || { echo "error: Maven is required to fetch the Kafka and Spark jars (Debian: apt-get install maven)"; exit 1; }

$(VENV)/.installed: pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -c constraints.txt -e '.[dev]'
	touch $@

.deps/kafka/.resolved: deps/kafka/pom.xml deps/maven-settings.xml
	rm -rf .deps/kafka
	$(MVN) -f deps/kafka/pom.xml dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory=$(CURDIR)/.deps/kafka \
		|| { echo "error: could not resolve the Kafka broker jars from Maven Central"; exit 1; }
	touch $@

.deps/spark/.resolved: deps/spark/pom.xml deps/maven-settings.xml
	rm -rf .deps/spark
	$(MVN) -f deps/spark/pom.xml dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory=$(CURDIR)/.deps/spark \
		-DincludeArtifactIds=$(SPARK_KAFKA_JARS) \
		|| { echo "error: could not resolve Spark's Kafka connector jars from Maven Central"; exit 1; }
	touch $@

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

constraints: $(VENV)/.installed
	{ echo "# The whole dependency tree, pinned (pip install -c). Regenerate with: make constraints"; \
	  $(BIN)/pip list --format=freeze --exclude-editable | grep -v -i -E '^(pip|setuptools)=='; } > constraints.txt

clean-deps:
	rm -rf $(VENV) .deps
