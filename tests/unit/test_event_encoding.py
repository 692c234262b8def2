"""The collector's hot path takes short cuts; each must give exactly what the slow, standard
way gives: the log's values byte for byte what the contract's own serialisation writes, the
partitioner Kafka's, an IPv6 client's network as `ipaddress` writes it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from ipaddress import IPv6Address, ip_network

from aiokafka.partitioner import murmur2 as aiokafka_murmur2
from hypothesis import given, settings
from hypothesis import strategies as st

from collector.enrichment import Draft, RequestContext, build_pipeline, enrich
from collector.event_log import murmur2, partition_for
from collector.geo import CountryLookup
from collector.payload import ServerEvent
from tally.client_ip import network_key
from tally.event import PageViewEvent, encode_fields

PIPELINE = build_pipeline(
    is_known_site=lambda site: True, is_blocked=lambda ip_hash: False, countries=CountryLookup()
)
text = st.text(max_size=40)
moments = st.datetimes(
    min_value=datetime(2000, 1, 1),
    max_value=datetime(2100, 1, 1),
    timezones=st.sampled_from([UTC, timezone(timedelta(hours=2))]),
)


@settings(deadline=None)  # the first example compiles the user-agent rules
@given(
    path=text,
    query=st.sampled_from(["", "?utm_source=news&utm_campaign=x", "?ref=hn", "?a=%C3%A9"]),
    referrer=st.sampled_from(["", "https://www.google.com/", "https://example.com/self", "not a url"]),
    props=st.dictionaries(text, text, max_size=3),
    screen_width=st.integers(0, 100_000),
    ts=moments,
    received_at=moments,
    event_id=st.one_of(st.none(), st.uuids()),
    user_agent=st.sampled_from(
        [
            "Mozilla/5.0 (X11; Linux x86_64; rv:132.0) Gecko/20100101 Firefox/132.0",
            "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15",
            "",
        ]
    ),
    client_ip=st.sampled_from(["81.2.69.142", "2001:db8::1", "10.0.0.1"]),
    language=text,
    scroll_depth=st.integers(0, 100),
    engagement_ms=st.integers(0, 86_400_000),
    lcp_ms=st.one_of(st.none(), st.integers(0, 120_000)),
    cls_milli=st.one_of(st.none(), st.integers(0, 100_000)),
)
def test_the_collectors_encoding_is_the_contracts(
    path,
    query,
    referrer,
    props,
    screen_width,
    ts,
    received_at,
    event_id,
    user_agent,
    client_ip,
    language,
    scroll_depth,
    engagement_ms,
    lcp_ms,
    cls_milli,
) -> None:
    draft = Draft(
        site="example.com",
        name="pageview",
        url=f"https://example.com/{path}{query}",
        referrer=referrer,
        props=props,
        screen_width=screen_width,
        ts=ts,
        event_id=event_id,
        scroll_depth=scroll_depth,
        engagement_ms=engagement_ms,
        vitals={"lcp_ms": lcp_ms, "cls_milli": cls_milli, "inp_ms": None, "fcp_ms": 0, "ttfb_ms": lcp_ms},
    )
    context = RequestContext(
        client_ip=client_ip,
        user_agent=user_agent,
        received_at=received_at,
        salt=b"s" * 32,
        accept_language=language,
        server_side=True,
    )
    fields = enrich(draft, context, PIPELINE)
    assert list(fields) == list(PageViewEvent.model_fields)
    assert encode_fields(fields) == PageViewEvent.model_validate(fields).to_json()


def test_a_batch_events_time_in_any_form_encodes_as_the_contract_does() -> None:
    for sent in (
        "2026-11-22T10:00:00+02:00",
        "2026-11-22T08:00:00Z",
        "2026-11-22T08:00:00.5",
        1_763_798_400_123,
    ):
        ts = ServerEvent.model_validate({"site": "e.com", "url": "https://e.com/", "ts": sent}).ts
        draft = Draft(
            site="e.com", name="pageview", url="https://e.com/", referrer="", props={}, screen_width=0, ts=ts
        )
        context = RequestContext(
            client_ip="81.2.69.142", user_agent="", received_at=datetime.now(UTC), salt=b"s", server_side=True
        )
        fields = enrich(draft, context, PIPELINE)
        assert encode_fields(fields) == PageViewEvent.model_validate(fields).to_json()


@given(st.binary(max_size=200))
def test_the_partitioner_is_kafkas(key: bytes) -> None:
    assert murmur2(key) == aiokafka_murmur2(key)
    for partitions in (1, 3, 12):
        assert partition_for(key, partitions) == (aiokafka_murmur2(key) & 0x7FFFFFFF) % partitions


@given(st.lists(st.sampled_from([0, 0, 1, 0xFFFF]) | st.integers(0, 0xFFFF), min_size=8, max_size=8))
def test_an_ipv6_clients_network_is_written_as_ipaddress_writes_it(groups: list[int]) -> None:
    address = IPv6Address(b"".join(group.to_bytes(2, "big") for group in groups))
    if address.ipv4_mapped is None:
        assert network_key(str(address)) == str(ip_network(f"{address}/64", strict=False))
