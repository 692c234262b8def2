"""A site's settings as added rows (storage/site_settings_rows.py), on the real ClickHouse engine
and the stores' own tables: the newest row of a key is the setting, a removal stays until a newer
row brings the key back, and the stamp decides, not the order rows were written in."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from clickhouse_connect.driver.client import Client

from storage import annotations, channel_rules, custom_properties, goals, shared_links
from storage.client import connect
from storage.site_settings_rows import SettingsTable
from tests.fixtures.clickhouse import Endpoint, own_database_settings

pytestmark = pytest.mark.integration

SITE = "rows.example.com"
OTHER = "other-rows.example.com"
REFUSED = "refused-rows.example.com"
T0 = datetime(2026, 11, 10, 9, 0, tzinfo=UTC)


def at(seconds: int) -> datetime:
    return T0 + timedelta(seconds=seconds)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, clickhouse_endpoint: Endpoint) -> Iterator[Client]:
    home: Path = tmp_path_factory.mktemp("settings-rows")
    client = connect(own_database_settings(home, clickhouse_endpoint, "settings_rows"))
    yield client
    client.close()


def properties(store: Client, site: str = SITE) -> list[str]:
    table = custom_properties.TABLE
    return [
        name for _, name in table.newest(store, "site = {site:String}", {"site": site}, order=("property",))
    ]


def test_a_removed_setting_stays_gone_until_added_again(store: Client) -> None:
    table = custom_properties.TABLE
    table.write(store, [[SITE, "author"], [SITE, "plan"]], changed_at=at(0))
    table.write(store, [[SITE, "author"]], removed=1, changed_at=at(1))
    assert properties(store) == ["plan"]

    table.write(store, [[SITE, "plan"]], removed=1, changed_at=at(2))
    assert properties(store) == []
    table.write(store, [[SITE, "author"]], changed_at=at(3))
    assert properties(store) == ["author"]


def test_the_newest_of_two_versions_wins_whichever_was_written_first(store: Client) -> None:
    table = goals.GOALS
    table.write(store, [[SITE, "Signup", "event", "Signup", "", "EUR"]], changed_at=at(10))
    table.write(store, [[SITE, "Signup", "event", "Signup", "", "USD"]], changed_at=at(5))  # older, later
    table.write(store, [[SITE, "Buy", "event", "Buy", "", ""]], removed=1, changed_at=at(4))  # older removal
    table.write(store, [[SITE, "Buy", "event", "Buy", "", "GBP"]], changed_at=at(6))

    rows = table.newest(store, "site = {site:String}", {"site": SITE}, order=("goal",))

    assert rows == [(SITE, "Buy", "event", "Buy", "", "GBP"), (SITE, "Signup", "event", "Signup", "", "EUR")]


def test_a_table_read_with_final_keeps_the_newest_row_whole(store: Client) -> None:
    table = annotations.NOTES
    day = date(2026, 11, 10)
    table.write(store, [[SITE, "n1", 1, day, T0, "new text", "a@example.com", "note"]], changed_at=at(20))
    table.write(store, [[SITE, "n1", 1, day, T0, "old text", "b@example.com", "note"]], changed_at=at(19))
    table.write(store, [[SITE, "n2", 0, day, at(60), "gone", "a@example.com", "deploy"]], changed_at=at(19))
    table.write(store, [[SITE, "n2", 0, day, at(60), "gone", "a@example.com", "deploy"]], 1, at(21))

    rows = table.newest(store, "site = {site:String}", {"site": SITE}, order=("at", "id"))

    assert [(row[1], row[5], row[6]) for row in rows] == [("n1", "new text", "a@example.com")]


def test_one_write_adds_and_removes_and_the_order_can_be_a_value(store: Client) -> None:
    table = channel_rules.TABLE
    table.write(store, [[SITE, "b.io", "", "B", 1], [SITE, "a.io", "", "A", 2]], changed_at=at(30))
    table.write(
        store,
        [[SITE, "a.io", "", "A", 1], [SITE, "c.io", "", "C", 2], [SITE, "b.io", "", "B", 1]],
        removed=[0, 0, 1],
        changed_at=at(31),
    )
    table.write(store, [[OTHER, "z.io", "", "Z", 1]], changed_at=at(31))

    rows = table.newest(store, "site = {site:String}", {"site": SITE}, order=("position", "source"))

    assert [(source, position) for _, source, _, _, position in rows] == [("a.io", 1), ("c.io", 2)]


def test_a_condition_on_the_newest_values_reads_the_newest_row(store: Client) -> None:
    table = shared_links.LINKS
    link = ["link1", SITE, "label", "hash", "", "", T0, 0]
    table.write(store, [link], changed_at=at(40))
    table.write(store, [[*link[:1], OTHER, *link[2:7], 1]], changed_at=at(41))  # moved and revoked

    def of(site: str) -> list[tuple]:
        having = f"{table.newest_of('site')} = {{site:String}}"
        return table.newest(store, parameters={"site": site}, having=having)

    assert of(SITE) == []
    assert [(row[0], row[1], row[-1]) for row in of(OTHER)] == [("link1", OTHER, 1)]


def test_rows_that_do_not_fit_the_table_are_refused_before_writing(store: Client) -> None:
    with pytest.raises(ValueError, match="never removed"):
        shared_links.LINKS.write(store, [["x", SITE, "", "", "", "", T0, 0]], removed=1)
    with pytest.raises(ValueError, match="a row of 1 values"):
        custom_properties.TABLE.write(store, [[REFUSED, "a"], [REFUSED]])
    with pytest.raises(ValueError, match="2 rows, 1 removed flags"):
        custom_properties.TABLE.write(store, [[REFUSED, "a"], [REFUSED, "b"]], removed=[0])
    with pytest.raises(ValueError, match="no column 'nope'"):
        SettingsTable("goals", keys=("site", "goal")).newest_sql(order=("nope",))
    assert properties(store, REFUSED) == []
