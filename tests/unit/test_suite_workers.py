"""`make test`'s two workers share the suite by units (tests/workers.py): a stack is never
started on both workers at once, and a file's module fixtures are set up once."""

from tests.workers import STACKS, unit_of


def test_the_folders_that_start_stacks_are_one_unit() -> None:
    assert unit_of("tests/cluster/test_cluster_faults.py::test_a[x]") == STACKS
    assert unit_of("tests/fault/test_full_disk.py::test_b") == STACKS


def test_the_browser_tests_are_one_unit_and_every_other_file_its_own() -> None:
    assert unit_of("tests/browser/test_tracker.py::test_c") == unit_of("tests/browser/test_dashboard.py::t")
    assert unit_of("tests/integration/test_x.py::test_d[a::b]") == "tests/integration/test_x.py"
    assert unit_of("tests/unit/test_y.py::test_e") != unit_of("tests/unit/test_z.py::test_e")
