"""How `make test` shares the suite between two workers (pytest-xdist: `-n 2 --dist loadfile
--no-loadscope-reorder`, see the Makefile).

A unit of work runs whole on one worker, so its module and package fixtures are set up once:
- the folders that start a whole stack of their own (tests/cluster: three brokers and a Spark
  cluster; tests/fault: the local stack) and tests/browser (one Chromium, one dashboard on the
  real services) are one unit, run in that order: two stacks at once on 2 cores would eat each
  other's recovery time, and the browser tests, whose expectations wait on a dashboard's answers,
  timed out in CI while a cluster ran beside them (load average over 20); after the stacks they
  share the machine with the other worker's integration tests only;
- every other test file is a unit of its own, as `--dist loadfile` has it.

The units are decided here, by the scheduler (`pytest_xdist_make_scheduler`), from node ids:
xdist's own `xdist_group` marks travel as a suffix of the node id, which pytest 9.2's
structured ids no longer take (pytest-xdist#1386: the marks are silently ignored).

Units are handed out in collection order (`--no-loadscope-reorder`: not by size), and the
serial unit, the longest (about 23 minutes), is collected first: the other worker takes the
short units one by one meanwhile, so both finish near the same time.

Each worker starts the session's services for itself (its own Kafka broker, ClickHouse
endpoint and Spark session, on free ports, under its own temporary folder).

Every test needs a node id of its own: xdist hands tests out by node id, so tests sharing one
ran only once (schemathesis 4 names its 58 items `test_…[GET /api/…]` but, on pytest 9.2, gives
them all the function's id: 57 tests silently never ran). `unique_node_ids` puts the item's
own name into such ids, and refuses a collection where two tests still share one.
"""

from __future__ import annotations

from collections import Counter

import pytest
from _pytest.nodeid import NodeId

from tests.folder_timings import folder_of

#: Folders run one after the other, in this order, as one unit on one worker, first.
SERIAL_FOLDERS = ("tests/cluster", "tests/fault", "tests/browser")
SERIAL = "serial"


def unit_of(nodeid: str) -> str:
    return SERIAL if folder_of(nodeid) in SERIAL_FOLDERS else nodeid.split("::", 1)[0]


def serial_rank(nodeid: str) -> int:
    """The serial unit's folders in their order, then every other unit (in collection order)."""
    folder = folder_of(nodeid)
    return SERIAL_FOLDERS.index(folder) if folder in SERIAL_FOLDERS else len(SERIAL_FOLDERS)


def in_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    if config.getvalue("dist") != "loadfile":
        return None  # xdist's own scheduling for every other --dist
    from xdist.scheduler import LoadFileScheduling

    class Units(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    return Units(config, log)


def unique_node_ids(items: list[pytest.Item]) -> None:
    """Give each test that shares its node id with another the id its name says (the
    parametrised name, `test_x[GET /api/v1/stats]`); refuse any id still shared."""
    shared = {nodeid for nodeid, count in Counter(item.nodeid for item in items).items() if count > 1}
    for item in items:
        if item.nodeid in shared and item.name != item.nodeid.rsplit("::", 1)[-1]:
            # pytest 9.2 derives the id from the function and its callspec; a plugin's own item
            # (schemathesis) has no callspec, only its name. `_id` is where the id is kept.
            item._id = NodeId.parse(f"{item.nodeid.rsplit('::', 1)[0]}::{item.name}")  # type: ignore[attr-defined]
    still = [nodeid for nodeid, count in Counter(item.nodeid for item in items).items() if count > 1]
    if still:
        raise pytest.UsageError(f"tests share a node id, so a worker would run only one of them: {still[:5]}")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    unique_node_ids(items)
    if not in_worker(config):
        return
    # The serial unit first, its folders in order; otherwise collection order (a stable sort keeps
    # each folder's own order, such as tests/fault's `tally down` test after the rest of
    # tests/fault). Every worker sorts alike, so their collections stay equal, as xdist requires.
    items.sort(key=lambda item: serial_rank(item.nodeid))
