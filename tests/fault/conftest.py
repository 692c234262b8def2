"""The fault tests share one local stack: each breaks it on purpose, waits until every
component is healthy again and leaves it so (each asserts that), on a site of its own. Starting
and stopping a stack per module cost about a minute each time for nothing the tests check."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fixtures.local_stack import LocalStack, running_stack


@pytest.fixture(scope="package")
def local_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    with running_stack(tmp_path_factory.mktemp("fault-stack-home")) as stack:
        yield stack
