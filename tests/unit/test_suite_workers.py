"""`make test`'s two workers share the suite by units (tests/workers.py): a stack is never
started on both workers at once, the browser tests never run beside one, and a file's module
fixtures are set up once."""

import pytest
from _pytest.nodeid import NodeId

from tests.workers import SERIAL, serial_rank, unique_node_ids, unit_of


def test_the_stacks_and_the_browser_tests_are_one_unit_in_that_order() -> None:
    cluster, fault, browser, other = (
        "tests/cluster/test_cluster_faults.py::test_a[x]",
        "tests/fault/test_full_disk.py::test_b",
        "tests/browser/test_tracker.py::test_c",
        "tests/integration/test_x.py::test_d",
    )
    assert unit_of(cluster) == unit_of(fault) == unit_of(browser) == SERIAL
    assert sorted([other, browser, fault, cluster], key=serial_rank) == [cluster, fault, browser, other]


def test_every_other_file_is_a_unit_of_its_own() -> None:
    assert unit_of("tests/integration/test_x.py::test_d[a::b]") == "tests/integration/test_x.py"
    assert unit_of("tests/unit/test_y.py::test_e") != unit_of("tests/unit/test_z.py::test_e")


class Item:
    """A collected test as unique_node_ids sees it: its name and the id pytest kept."""

    def __init__(self, nodeid: str, name: str) -> None:
        self._id = NodeId.parse(nodeid)
        self.name = name

    @property
    def nodeid(self) -> str:
        return str(self._id)


def test_tests_sharing_a_node_id_get_their_names_as_ids() -> None:
    # schemathesis 4 on pytest 9.2: one id for every operation's test (57 never ran on two workers).
    module = "tests/integration/test_api.py"
    items = [Item(f"{module}::test_fuzz", f"test_fuzz[{operation}]") for operation in ("GET /a", "POST /a")]
    items.append(Item(f"{module}::test_other", "test_other"))
    unique_node_ids(items)  # type: ignore[arg-type]
    assert [item.nodeid for item in items] == [
        f"{module}::test_fuzz[GET /a]",
        f"{module}::test_fuzz[POST /a]",
        f"{module}::test_other",
    ]


def test_a_node_id_that_stays_shared_is_refused() -> None:
    items = [Item("tests/unit/test_a.py::test_x", "test_x") for _ in range(2)]
    with pytest.raises(pytest.UsageError, match="test_x"):
        unique_node_ids(items)  # type: ignore[arg-type]
