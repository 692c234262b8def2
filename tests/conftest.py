"""Real services for the test session: Kafka, the ClickHouse endpoint, Spark.

Each is started once per session on free ports and stopped afterwards; tests keep out of
each other's way by using their own site names.
"""

pytest_plugins = [
    "tests.lanes",
    "tests.folder_timings",
    "tests.workers",
    "tests.fixtures.kafka",
    "tests.fixtures.clickhouse",
    "tests.fixtures.spark",
    "tests.fixtures.stack_settings",
    "tests.fixtures.local_stack",
    "tests.fixtures.cluster_stack",
    "tests.fixtures.collector_server",
    "tests.fixtures.browser",
    "tests.fixtures.dashboard_server",
    "tests.fixtures.smtp_inbox",
]
