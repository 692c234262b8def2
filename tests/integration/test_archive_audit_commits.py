"""The archive audit against what the archiver committed (archiver/log.py), on the real broker
and store: the newest offsets of a partition lost from the archive — above every offset it still
holds, below the offsets an earlier round marked clean — are found below the archiver's committed
offset and archived again from the log, once;
and a topic with another partition count than the default is audited partition by partition."""

from __future__ import annotations

import asyncio
from pathlib import Path
from uuid import uuid4

import pytest

from archiver.audit import AuditUnavailable, PartitionAudit, read_marks, verify
from archiver.log import log_ranges
from storage.client import connect
from tally.settings import Settings
from tests.fixtures.archive import archived
from tests.fixtures.clickhouse import Endpoint, own_database_settings
from tests.fixtures.events import make_events
from tests.fixtures.topics import own_store_and_topic
from tests.integration.test_archiver import archive_until, produce

pytestmark = pytest.mark.integration


def own_topic_settings(
    tmp_path: Path, clickhouse_endpoint: Endpoint, kafka_bootstrap: str, partitions: int
) -> Settings:
    """A store and a topic of the test's own: no other test's archiver commits to it."""
    return own_store_and_topic(tmp_path, clickhouse_endpoint, kafka_bootstrap, "audit_commits", partitions)


def archive_events(settings: Settings, site: str, count: int) -> None:
    events = make_events(site, count)
    asyncio.run(produce(settings, [(event.key, event.to_json()) for event in events]))
    asyncio.run(archive_until(settings, site, expected=count))


def lose_newest(settings: Settings, partition: int, first: int) -> None:
    """Lose a partition's archived offsets from `first` on, as a lost newest part would."""
    connect(settings).command(
        "DELETE FROM events WHERE kafka_partition = {p:UInt16} AND kafka_offset >= {first:UInt64}",
        parameters={"p": partition, "first": first},
        settings={"mutations_sync": 2},
    )


def by_partition(audits: list[PartitionAudit]) -> dict[int, PartitionAudit]:
    return {audit.partition: audit for audit in audits}


def test_the_newest_offsets_lost_from_the_archive_are_found_below_the_commit_and_archived_again(
    clickhouse_endpoint: Endpoint, kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = own_topic_settings(tmp_path, clickhouse_endpoint, kafka_bootstrap, 3)
    site = f"newest-lost-{uuid4().hex[:8]}.example.com"
    archive_events(settings, site, 600)
    before = by_partition(verify(settings, fix=False).partitions)
    partition = max(before, key=lambda p: before[p].log_end)
    audit = before[partition]
    assert audit.holes == [] and audit.committed == audit.log_end
    # That round found the archive whole to the log's end and marked it so.
    assert read_marks(connect(settings)) == {p: a.log_end for p, a in before.items()}

    lost = (audit.log_end - 100, audit.log_end)
    lose_newest(settings, partition, lost[0])
    assert archived(settings, site) == (500, 500)

    # Below the mark now, above every offset the archive still holds: an ordinary round finds
    # them, the offset below the mark being gone, and the commit says how far they went.
    report = verify(settings)
    found = by_partition(report.partitions)[partition]
    assert [(hole.start, hole.end) for hole in found.holes] == [lost]
    assert found.archived_last == lost[0] - 1 and found.repaired == 100
    [line] = [line for line in report.lines() if line.startswith(f"partition {partition}: ")]
    assert f"archiver committed up to {lost[1] - 1}" in line
    assert f"holes {lost[0]}..{lost[1] - 1} (100 offsets), repaired 100" in line
    # Archived again from the log, each once, and the archive is whole to the commit.
    assert archived(settings, site) == (600, 600)
    after = by_partition(verify(settings, fix=False, full=True).partitions)
    assert all(a.gapless and a.holes == [] and a.archived_last == a.log_end - 1 for a in after.values())


@pytest.mark.parametrize("partitions", [2, 5])
def test_a_topic_with_another_partition_count_is_audited_partition_by_partition(
    clickhouse_endpoint: Endpoint, kafka_bootstrap: str, tmp_path: Path, partitions: int
) -> None:
    settings = own_topic_settings(tmp_path, clickhouse_endpoint, kafka_bootstrap, partitions)
    assert partitions != settings.pageviews_partitions
    site = f"partitions-{partitions}-{uuid4().hex[:8]}.example.com"
    archive_events(settings, site, 200)

    assert sorted(asyncio.run(log_ranges(settings))) == list(range(partitions))
    report = verify(settings, fix=False, full=True)
    assert [audit.partition for audit in report.partitions] == list(range(partitions))
    assert sum(audit.log_end for audit in report.partitions) == 200
    assert all(audit.gapless and audit.holes == [] for audit in report.partitions)


def test_verify_says_the_log_has_no_such_topic(
    clickhouse_endpoint: Endpoint, kafka_bootstrap: str, tmp_path: Path
) -> None:
    topic = f"never-created-{uuid4().hex[:8]}"
    settings = own_database_settings(
        tmp_path, clickhouse_endpoint, "audit_commits", kafka_bootstrap=kafka_bootstrap, pageviews_topic=topic
    )
    with pytest.raises(AuditUnavailable) as refused:
        verify(settings, fix=False)
    assert str(refused.value) == f"Kafka at {kafka_bootstrap} has no topic {topic}: nothing to audit against"
