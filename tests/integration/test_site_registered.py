"""One answer to "is this site registered?" (storage.sites.registered) for every store that
writes something for a site: the site as the registry spells it, or the store's own refusal
naming the site, where to check its spelling and how to add it. A removed site is not registered.

Real ClickHouse engine (the session's endpoint), a database of this module's own."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import date

import pytest
from clickhouse_connect.driver.client import Client

from storage import annotations, custom_properties, goals, segments, users
from storage.client import connect
from storage.sites import InvalidDomain, add_site, registered, remove_site
from tally.refusal import Refused
from tests.fixtures.clickhouse import Endpoint, own_database_settings

pytestmark = pytest.mark.integration

SITE = "shop.example.com"
REMOVED = "closed.example.com"


class Refusal(Refused):
    """A store's refusal class, as each store passes its own."""


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory, clickhouse_endpoint: Endpoint) -> Iterator[Client]:
    settings = own_database_settings(tmp_path_factory.mktemp("registered"), clickhouse_endpoint, "registered")
    store = connect(settings)
    add_site(store, SITE)
    add_site(store, REMOVED)
    remove_site(store, REMOVED)
    try:
        yield store
    finally:
        store.close()


def refusal_of(client: Client, site: str) -> Refusal:
    with pytest.raises(Refusal) as refused:
        registered(client, site, Refusal)
    return refused.value


def test_a_registered_site_comes_back_as_the_registry_spells_it(client: Client) -> None:
    assert registered(client, SITE, Refusal) == SITE
    assert registered(client, "  WWW.Shop.Example.COM ", Refusal) == SITE


@pytest.mark.parametrize(
    "site",
    [
        "nowhere.example.com",  # never added
        "shop.exmaple.com",  # a typo of a registered one
        "example.com",  # the registered site's parent domain is another site
        REMOVED,  # added, then removed with `tally sites remove`
    ],
)
def test_a_site_not_registered_is_refused_naming_it_and_how_to_add_it(client: Client, site: str) -> None:
    assert str(refusal_of(client, site)) == (
        f"site: {site} is not registered (see 'tally sites list'; to add it: 'tally sites add {site}')"
    )


def test_the_refusal_names_the_site_as_the_registry_would_spell_it(client: Client) -> None:
    assert "'tally sites add nowhere.example.com'" in str(refusal_of(client, "WWW.Nowhere.Example.com"))


def test_a_removed_site_added_again_is_registered_again(client: Client) -> None:
    again = "again.example.com"
    add_site(client, again)
    remove_site(client, again)
    refusal_of(client, again)
    add_site(client, again)
    assert registered(client, again, Refusal) == again


def test_a_name_that_is_no_domain_is_refused_as_such(client: Client) -> None:
    with pytest.raises(InvalidDomain):
        registered(client, "not a site!", Refusal)


# Each store refuses with its own class (the front doors map them: the CLI's one line, the
# APIs' status) and the one message.
STORES: list[tuple[str, type[Refused], Callable[[Client, str], object]]] = [
    ("goals", goals.InvalidGoal, lambda client, site: goals.proposal(client, site, [], [])),
    ("segments", segments.InvalidSegment, lambda client, site: segments.add_segment(client, site, "S", [])),
    (
        "users",
        users.AccountError,
        lambda client, site: users.set_role(client, "a@example.com", site, "viewer"),
    ),
    (
        "custom_properties",
        custom_properties.InvalidProperty,
        lambda client, site: custom_properties.add_property(client, site, "author"),
    ),
    (
        "annotations",
        annotations.InvalidAnnotation,
        lambda client, site: annotations.add(client, site, date(2026, 11, 27), "launch", "me"),
    ),
]


@pytest.mark.parametrize(("store", "refusal", "write"), STORES, ids=[store for store, _, _ in STORES])
def test_each_store_refuses_an_unregistered_site_with_its_own_refusal(
    client: Client, store: str, refusal: type[Refused], write: Callable[[Client, str], object]
) -> None:
    with pytest.raises(refusal) as refused:
        write(client, REMOVED)
    assert str(refused.value).startswith(f"site: {REMOVED} is not registered (see 'tally sites list'")


def test_annotations_answer_an_unregistered_site_as_not_found(client: Client) -> None:
    with pytest.raises(annotations.InvalidAnnotation) as refused:
        annotations.registered(client, "nowhere.example.com")
    assert (refused.value.kind, refused.value.field) == ("not_found", "site")
