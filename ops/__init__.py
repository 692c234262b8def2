"""The operator package: the `tally` CLI, the local stack (supervisord and the components it
runs) and the local ClickHouse endpoint. It sits on top of the building: it may import every
component; no component imports it (tests/unit/test_dependency_rule.py)."""
