"""The tests that run the whole local stack share one: the walking skeleton's
(test_local_stack.py, which also checks `tally up -d` and `tally down` themselves) and the fault
tests', which each break it on purpose, wait until every component is healthy again and leave it
so (each asserts that), on a site of its own. Starting and stopping a stack per module cost about
a minute each time for nothing the tests check."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.local_stack import LocalStack, running_stack
from tests.fixtures.small_disk import SmallDisk, small_disk

HERE = Path(__file__).parent
#: Stops the shared stack (`tally down`), so it runs after every other test here.
STOPS_THE_STACK = "test_local_stack.py::test_down_leaves_no_process_or_port_behind"
#: Files whose tests start stacks of their own (not the shared one), run once it is down.
OWN_STACKS = frozenset({"test_upgrade_from_release.py"})


#: The store's disk (`$TALLY_HOME/clickhouse`): room for every fault test's events and derived
#: rows many times over, small enough that test_full_disk.py fills it in a moment.
STORE_DISK_MIB = 768


@pytest.fixture(scope="package")
def stack_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fault-stack-home")


@pytest.fixture(scope="package")
def store_disk(stack_home: Path) -> Iterator[SmallDisk | None]:
    """The shared stack's store on a disk of its own (None where none can be mounted)."""
    with small_disk(stack_home / "clickhouse", STORE_DISK_MIB) as disk:
        yield disk


#: Kafka's log directory (`$TALLY_HOME/kafka`), likewise.
LOG_DISK_MIB = 1024


@pytest.fixture(scope="package")
def log_disk(stack_home: Path) -> Iterator[SmallDisk | None]:
    """The shared stack's Kafka log directory on a disk of its own (None where none can be mounted)."""
    with small_disk(stack_home / "kafka", LOG_DISK_MIB) as disk:
        yield disk


@pytest.fixture(scope="package")
def local_stack(
    stack_home: Path, store_disk: SmallDisk | None, log_disk: SmallDisk | None
) -> Iterator[LocalStack]:
    with running_stack(stack_home) as stack:
        yield stack


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The stack's `tally down` test moves behind this package's last test (not to the end of
    the session: the package's stack would then be started a second time for it), and the
    tests that run stacks of their own behind it: two stacks at once on 2 cores slow both."""
    alone = [item for item in items if item.path.name in OWN_STACKS]
    for down in [item for item in items if item.nodeid.endswith(STOPS_THE_STACK)]:
        last = max(index for index, item in enumerate(items) if item.path.is_relative_to(HERE))
        items.remove(down)  # the ones after it move up by one: `last` is now right behind the last
        items.insert(last, down)
        for item in alone:
            items.remove(item)
            items.insert(items.index(down) + 1, item)
