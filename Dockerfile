# The Tally services image (collector, archiver, stream jobs driver, dashboard, CLI).
# Kafka, ClickHouse and Spark run from their own upstream images (docker-compose.yml).

FROM maven:3.9-eclipse-temurin-17 AS jars
WORKDIR /src
COPY deps deps
RUN mvn -q -B -s deps/maven-settings.xml -f deps/spark/pom.xml dependency:copy-dependencies \
      -DincludeScope=runtime -DoutputDirectory=/jars/spark \
      -DincludeArtifactIds=spark-sql-kafka-0-10_2.13,spark-token-provider-kafka-0-10_2.13,kafka-clients,commons-pool2

# The stream jobs' JVM code (stream_jobs/jvm), compiled against the pinned pyspark's own jars.
FROM python:3.11-slim-bookworm AS spark-app
RUN apt-get update && apt-get install -y --no-install-recommends openjdk-17-jdk-headless \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY constraints.txt ./
RUN pip install --no-cache-dir -c constraints.txt pyspark
COPY stream_jobs/jvm stream_jobs/jvm
RUN stream_jobs/jvm/build python /jars/spark-app/tally-stream-jobs.jar

FROM python:3.11-slim-bookworm
RUN apt-get update && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml constraints.txt README.md ./
COPY tally tally
COPY collector collector
COPY storage storage
COPY stream_jobs stream_jobs
COPY dashboard dashboard
COPY loadgen loadgen
COPY alerts alerts
RUN pip install --no-cache-dir -c constraints.txt .
COPY --from=jars /jars /app/.deps
COPY --from=spark-app /jars/spark-app /app/.deps/spark-app
ENV TALLY_HOME=/data TALLY_JARS_DIR=/app/.deps PYTHONUNBUFFERED=1
VOLUME /data
