"""The fast lane (`make check`, `pytest -m fast`): the tests that need at most the ClickHouse
endpoint and take under about 2 s each.

A test is in it by what it asks for: every test whose fixtures reach no service but ClickHouse
(no Kafka broker, Spark, browser, dashboard or collector subprocess, local stack or mail
server) is marked `fast` at collection, unless it is slow anyway: it carries
`@pytest.mark.slow`, or it is in SLOW_TESTS below (measured, and kept here rather than as
decorators so that files others are editing stay untouched). The full run (`make test`) runs
every test, marked or not.
"""

from __future__ import annotations

import pytest

#: Fixtures that start a service other than the ClickHouse endpoint (directly or through the
#: fixtures they use): a test that asks for one of them is not in the fast lane.
SERVICE_FIXTURES = frozenset(
    {
        "kafka_bootstrap",  # the Kafka broker (and `settings`, which names it)
        "spark",
        "browser",  # Chromium, and the sites it loads
        "dashboard_server",  # `python -m dashboard.app`, and `tenants` on it
        "collector_url",
        "local_stack",
        "cluster_stack",
        "inbox",  # the SMTP server
    }
)

#: Tests that need only ClickHouse but took more than 3 s each in `pytest --durations=0` on the
#: 2-core machine (load average 5-10: other runs shared it; about 2 s alone). They run the CLI in
#: a subprocess several times, start Caddy or a server of their own, scan every file of the
#: repository, or draw many hypothesis examples. A name without `[...]` stands for all its cases.
SLOW_TESTS: dict[str, tuple[str, ...]] = {
    "tests/unit/test_no_committed_secrets.py": ("test_no_tracked_file_holds_a_secret",),
    "tests/unit/test_visitor_state_encoding.py": (
        "test_v1_and_v2_visitor_states_decode_and_v3_round_trips_engagement_events",
        "test_page_views_within_the_allowed_lateness_count_exactly_and_the_state_stays_a_few_days",
        "test_engagement_events_end_a_bounce_only_within_their_sessions_span",
    ),
    "tests/integration/test_stats_cli.py": (
        "test_stats_of_custom_events_properties_and_goals_are_the_apis",
        "test_stats_by_channel_and_country_are_the_apis_rows",
        "test_realtime_prints_the_live_visitors_and_the_last_30_minutes_by_page",
    ),
    "tests/integration/test_goals_cli.py": ("test_add_list_remove",),
    "tests/integration/test_alerts_cli.py": ("test_add_list_remove",),
    "tests/integration/test_cli_share.py": ("test_create_list_and_revoke",),
    "tests/integration/test_saved_funnels.py": ("test_add_list_remove_from_the_cli",),
    "tests/integration/test_site_timezones.py": ("test_the_registry_keeps_each_sites_zone",),
    "tests/integration/test_segments.py": (
        "test_rename_and_update",
        "test_list_and_remove",
    ),
    "tests/integration/test_imports.py": ("test_remove_takes_one_file_out_and_a_typo_gets_one_line",),
    "tests/integration/test_manage_api.py": (
        "test_a_manage_key_made_with_the_cli_changes_what_its_role_allows",
        "test_an_owner_lists_members_changes_a_role_and_removes_one",
    ),
    "tests/integration/test_queries_agg.py": (
        "test_agg_answers_every_report_as_raw_does[three whole days]",
        "test_agg_answers_every_report_as_raw_does[last 24 hours to the minute]",
    ),
    "tests/integration/test_imports_timezones.py": (
        "test_import_says_which_days_the_sites_own_events_cover",
    ),
    "tests/integration/test_stats_api_timezones.py": (
        "test_last_7_days_are_local_days_labelled_with_their_offset[raw]",
    ),
    "tests/security/test_client_ip.py": (
        "test_behind_caddy_a_strangers_wrong_passwords_do_not_lock_the_operator_out",
        "test_strangers_on_many_addresses_slow_guessing_at_an_account_but_not_its_usual_client",
        "test_ten_wrong_passwords_from_a_stranger_do_not_lock_the_operator_out",
        "test_wrong_passwords_on_an_invitation_from_a_stranger_do_not_stop_its_invitee",
    ),
}


def is_slow(item: pytest.Item) -> bool:
    module, _, name = item.nodeid.partition("::")
    listed = SLOW_TESTS.get(module, ())
    return bool(item.get_closest_marker("slow")) or name in listed or name.split("[", 1)[0] in listed


def in_fast_lane(item: pytest.Item) -> bool:
    return not is_slow(item) and not SERVICE_FIXTURES.intersection(getattr(item, "fixturenames", ()))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if in_fast_lane(item):
            item.add_marker(pytest.mark.fast)
