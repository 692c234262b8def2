"""Alert rules as typed (storage/alert_rules.py), the webhook destination policy and the
delivery's backoff (alerts/delivery.py), and alert ids (stream_jobs/alerts.py): no store needed."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from alerts.delivery import Progress, RefusedDestination, backoff_s, check_destination, pinned, webhook_body
from storage.alert_rules import InvalidRule, make_rule
from stream_jobs.alerts import alert_id, window_starts
from tally.settings import Settings

HOOK = "https://hooks.example.com/t"


def test_a_valid_rule_of_each_kind() -> None:
    busy = make_rule(
        site="www.Example.com", kind="pageviews_above", factor=3, window_minutes=5, webhook_url=HOOK
    )
    assert busy.site == "example.com"
    assert busy.describe() == "page views in 5 min above 3 x the mean of 12"
    absent = make_rule(
        site="example.com", kind="goal_absent", goal="Signup", window_minutes=30, webhook_url=HOOK
    )
    assert absent.describe() == "goal 'Signup' not seen for 30 min"
    errors = make_rule(
        site="example.com", kind="event_rate_above", event_name="Error", threshold=5, webhook_url=HOOK
    )
    assert errors.describe() == "event 'Error' above 5 per minute"


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"kind": "pageviews_above", "threshold": 5, "factor": 2}, "a threshold N or a factor k"),
        ({"kind": "pageviews_above", "threshold": -1}, "threshold"),
        ({"kind": "pageviews_above", "threshold": 5, "window_minutes": 0}, "window_minutes"),
        ({"kind": "pageviews_abov", "threshold": 5}, "kind"),
        ({"kind": "goal_absent"}, "name of one of the site's goals"),
        ({"kind": "event_rate_above", "threshold": 5}, "an event name or a page pattern"),
        ({"kind": "event_rate_above", "event_name": "E", "threshold": 5, "window_minutes": 5}, "per minute"),
        ({"kind": "event_rate_above", "page_pattern": "oops", "threshold": 5}, "starts with /"),
        ({"kind": "pageviews_above", "threshold": 5, "webhook_url": "file:///etc/passwd"}, "http://"),
        ({"kind": "pageviews_above", "threshold": 5, "webhook_url": "https://a:b@x.example/"}, "credentials"),
        ({"kind": "pageviews_above", "threshold": 5, "webhook_url": "https:///path"}, "names a host"),
        ({"kind": "pageviews_above", "threshold": 5, "site": "not a domain"}, "not a domain"),
    ],
)
def test_a_bad_rule_names_what_is_wrong(fields: dict[str, object], named: str) -> None:
    values = {"site": "example.com", "webhook_url": HOOK, **fields}
    with pytest.raises(InvalidRule, match=named):
        make_rule(**values)


@pytest.mark.parametrize("host", ["169.254.169.254", "0.0.0.0", "224.0.0.1", "[fe80::1]"])
def test_link_local_multicast_and_unspecified_destinations_are_always_refused(host: str) -> None:
    with pytest.raises(RefusedDestination):
        check_destination(f"http://{host}/hook", allow_private=True)


@pytest.mark.parametrize("host", ["127.0.0.1", "10.1.2.3", "192.168.0.5", "localhost"])
def test_private_destinations_need_the_setting(host: str) -> None:
    with pytest.raises(RefusedDestination, match="TALLY_ALERT_WEBHOOK_PRIVATE"):
        check_destination(f"http://{host}:9/hook", allow_private=False)
    check_destination(f"http://{host}:9/hook", allow_private=True)


def test_backoff_doubles_and_is_capped() -> None:
    settings = Settings(alert_retry_base_s=0.5, alert_retry_max_s=3)
    assert [backoff_s(settings, attempt) for attempt in range(1, 6)] == [0.5, 1.0, 2.0, 3, 3]


def test_the_webhook_never_receives_its_own_url() -> None:
    assert webhook_body({"alert_id": "x", "webhook_url": "https://h/secret"}) == {"alert_id": "x"}


def test_alert_ids_are_the_same_for_a_rule_and_window_and_differ_otherwise() -> None:
    window = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
    other = datetime(2026, 11, 24, 12, 5, tzinfo=UTC)
    assert alert_id("r1", window) == alert_id("r1", window)
    assert len({alert_id("r1", window), alert_id("r1", other), alert_id("r2", window)}) == 3


def test_a_window_that_just_ended_is_evaluated_with_the_current_one() -> None:
    just_after = datetime(2026, 11, 24, 12, 5, 10, tzinfo=UTC).timestamp()
    later = datetime(2026, 11, 24, 12, 7, 0, tzinfo=UTC).timestamp()
    start = int(datetime(2026, 11, 24, 12, 5, tzinfo=UTC).timestamp())
    assert window_starts(300, datetime.fromtimestamp(just_after, UTC)) == [start - 300, start]
    assert window_starts(300, datetime.fromtimestamp(later, UTC)) == [start]


@pytest.mark.parametrize(
    ("url", "address", "expected_url", "host", "sni"),
    [
        (
            "https://hooks.example.com/x?t=1",
            "93.184.216.34",
            "https://93.184.216.34/x?t=1",
            "hooks.example.com",
            True,
        ),
        (
            "http://hooks.example.com:8080/x",
            "10.0.0.7",
            "http://10.0.0.7:8080/x",
            "hooks.example.com:8080",
            False,
        ),
        (
            "https://hooks.example.com:8443/",
            "2001:db8::1",
            "https://[2001:db8::1]:8443/",
            "hooks.example.com:8443",
            True,
        ),
    ],
)
def test_a_webhook_post_goes_to_the_checked_address_under_the_hosts_name(
    url: str, address: str, expected_url: str, host: str, sni: bool
) -> None:
    request = pinned(url, address)
    assert request.url == expected_url
    assert request.host_header == host
    # TLS names the host (SNI and the certificate check), never the address.
    assert request.extensions == ({"sni_hostname": "hooks.example.com"} if sni else {})


def test_a_partition_is_committed_up_to_its_first_unfinished_alert() -> None:
    """Sites' alerts finish out of the topic's order; the committed offset never passes one
    still being delivered (at-least-once), and never moves back."""
    progress = Progress()
    for offset in (10, 11, 12):
        progress.read(offset)
    assert progress.finish(12) == 10  # 10 and 11 still going: nothing past 10 is done
    assert progress.finish(11) is None  # 10 still going: no new position
    assert progress.finish(10) == 13  # all three done
    progress.read(13)
    assert progress.finish(13) == 14
