"""How `make test` shares the suite between two workers (pytest-xdist: `-n 2 --dist loadgroup
--no-loadscope-reorder`, see the Makefile).

A unit of work runs whole on one worker, so its module and package fixtures are set up once:
- the folders that start a whole stack of their own (tests/cluster: three brokers and a Spark
  cluster; tests/fault: the local stack) are one unit, run one after the other: two such stacks
  at once on 2 cores would eat each other's recovery time;
- tests/browser is one unit (one Chromium, one dashboard on the real services);
- every other test file is a unit of its own.

Units are handed out in collection order (no reordering by size), and the stacks' unit, the
longest (about 20 minutes), comes first: the other worker runs the browser tests and then
takes the short units one by one, so both finish near the same time.

Each worker starts the session's services for itself (its own Kafka broker, ClickHouse
endpoint and Spark session, on free ports, under its own temporary folder).
"""

from __future__ import annotations

import pytest

from tests.folder_timings import folder_of

#: Folders whose tests share a stack they start themselves: one unit, run first.
STACK_FOLDERS = ("tests/cluster", "tests/fault")
STACKS = "stacks"
#: Folders run whole as one unit of their own.
WHOLE_FOLDERS = {"tests/browser": "browser"}


def unit_of(nodeid: str) -> str:
    folder = folder_of(nodeid)
    if folder in STACK_FOLDERS:
        return STACKS
    return WHOLE_FOLDERS.get(folder, nodeid.split("::", 1)[0])


def shared_by_group(config: pytest.Config) -> bool:
    return config.pluginmanager.hasplugin("xdist") and config.getoption("dist", "no") == "loadgroup"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not shared_by_group(config):
        return
    for item in items:
        item.add_marker(pytest.mark.xdist_group(unit_of(item.nodeid)))
    # The stacks' unit first; otherwise collection order (a stable sort keeps each folder's own
    # order, such as tests/fault's `tally down` test after the rest of tests/fault).
    items.sort(key=lambda item: unit_of(item.nodeid) != STACKS)
