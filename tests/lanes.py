"""The fast lane (`make check`, `pytest -m fast`): the tests that need at most the ClickHouse
endpoint and take under about 2 s each.

A test is in it by what it asks for: every test whose fixtures reach no service but ClickHouse
(no Kafka broker, Spark, browser, dashboard or collector subprocess, local stack or mail
server) is marked `fast` at collection, unless it is slow anyway: it carries
`@pytest.mark.slow`, or it is in SLOW_TESTS below (measured, and kept here rather than as
decorators so that files others are editing stay untouched). The full run (`make test`) runs
every test, marked or not, except the soak (marker `soak`), which runs only when a `-m`
expression names it (`make soak`).
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

#: Tests that need only ClickHouse but are slow: more than 1.5 s each in `pytest -m fast
#: --durations=0` on the 2-core machine (other runs shared it: load average 1.5 to 14, so about
#: 1-2 s alone). They run the CLI in a subprocess several times, start Caddy or a server of their
#: own, scan every file of the repository, or draw many hypothesis examples. A name without
#: `[...]` stands for all its cases.
SLOW_TESTS: dict[str, tuple[str, ...]] = {
    "tests/integration/test_alert_backtest.py": ("test_a_threshold_rule_fires_for_the_windows_counted_here",),
    "tests/integration/test_alerts_cli.py": (
        "test_add_list_remove",
        "test_unregistered_site_and_unknown_rule_get_one_line",
    ),
    "tests/integration/test_channel_rules.py": ("test_channel_filter_follows_the_rules",),
    "tests/integration/test_channel_whatif.py": (
        "test_add_list_remove",
        "test_whatif_proposed_side_is_the_breakdown_after_apply",
        "test_duplicate_is_refused",
        "test_whatif_without_apply_changes_nothing",
    ),
    "tests/integration/test_cli_share.py": (
        "test_create_list_and_revoke",
        "test_store_down_is_one_line",
    ),
    "tests/integration/test_clickhouse_endpoint.py": ("test_data_survives_an_endpoint_restart",),
    "tests/integration/test_clickhouse_endpoint_security.py": (
        "test_compression_bomb_is_refused_while_decompressing[gzip]",
    ),
    "tests/integration/test_day_aggregates.py": (
        "test_the_migrations_backfill_what_the_archive_already_holds",
    ),
    "tests/integration/test_definition_rules.py": (
        "test_nothing_is_recorded_before_version_one_and_version_one_holds_the_contents",
        "test_every_goal_and_exclusion_change_is_a_current_version_naming_it",
        "test_rollback_restores_the_goals_and_their_numbers_without_exchanging_tables",
        "test_channel_rule_changes_are_versions_and_a_rollback_restores_the_rules_and_the_breakdown",
        "test_a_site_registered_after_the_version_keeps_its_goals_on_rollback",
        "test_a_version_made_before_contents_were_kept_reads_and_rolls_back_its_replayed_definitions",
        "test_a_goal_redefined_under_its_name_and_an_exclusion_added_over_the_api_are_versions",
    ),
    "tests/integration/test_engagement.py": (
        "test_time_on_page_and_scroll_depth_are_per_engaged_visitor",
        "test_the_migration_backfills_the_engagement_archived_before_it",
    ),
    "tests/integration/test_goals.py": ("test_the_migration_backfills_what_the_archive_already_holds",),
    "tests/integration/test_goals_cli.py": (
        "test_add_list_remove",
        "test_duplicate_is_refused",
    ),
    "tests/integration/test_imports.py": (
        "test_remove_takes_one_file_out_and_a_typo_gets_one_line",
        "test_list_shows_the_imported_files_and_where_native_data_starts",
        "test_import_reports_what_it_wrote",
        "test_same_file_twice_changes_nothing",
        "test_ga4_export",
    ),
    "tests/integration/test_imports_api.py": (
        "test_an_imported_file_is_removed_by_name_or_id_and_reports_drop_it",
    ),
    "tests/integration/test_imports_timezones.py": (
        "test_import_says_which_days_the_sites_own_events_cover",
        "test_imported_days_are_the_sites_local_days[ny-plausible-imports.example.com-raw]",
    ),
    "tests/integration/test_manage_api.py": (
        "test_a_manage_key_made_with_the_cli_changes_what_its_role_allows",
        "test_an_owner_lists_members_changes_a_role_and_removes_one",
        "test_exclusions_refuse_bad_fields_roles_read_keys_and_unknown_sites",
        "test_an_owners_invitation_to_a_new_address_waits_for_the_operator_then_works",
    ),
    "tests/integration/test_provenance_figures.py": (
        "test_each_figure_says_whether_agg_and_raw_agree_and_what_is_not_checked",
    ),
    "tests/integration/test_queries_agg.py": ("test_agg_answers_every_report_as_raw_does",),
    "tests/integration/test_saved_funnels.py": ("test_add_list_remove_from_the_cli",),
    "tests/integration/test_segments.py": (
        "test_rename_and_update",
        "test_list_and_remove",
        "test_v2_segment_filter_answers_what_its_filters_answer",
    ),
    "tests/integration/test_site_timezones.py": (
        "test_the_registry_keeps_each_sites_zone",
        "test_berlin_days_start_at_its_midnight_and_the_spring_day_has_23_hours[raw]",
    ),
    "tests/integration/test_sites_timezone_cli.py": ("test_a_site_gets_its_zone_when_added_and_changes_it",),
    "tests/integration/test_stats_api_schemathesis.py": ("test_every_answer_is_documented_and_never_a_5xx",),
    "tests/integration/test_stats_planner.py": (
        "test_answers_from_sessions_equal_the_archives_and_the_python_count",
        "test_visitors_by_page_and_visit_properties_come_from_sessions_paths_as_the_archive_counts",
    ),
    "tests/integration/test_stats_api_timezones.py": (
        "test_last_7_days_are_local_days_labelled_with_their_offset[raw]",
        "test_last_7_days_are_local_days_labelled_with_their_offset[agg]",
    ),
    "tests/integration/test_stats_cli.py": (
        "test_stats_of_custom_events_properties_and_goals_are_the_apis",
        "test_stats_by_channel_and_country_are_the_apis_rows",
        "test_realtime_prints_the_live_visitors_and_the_last_30_minutes_by_page",
        "test_stats_prints_the_apis_numbers_with_their_change[raw]",
    ),
    "tests/integration/test_users.py": ("test_cli_mistakes_are_one_line",),
    "tests/integration/test_whatif_cli.py": (
        "test_definitions_lists_version_one_and_names_an_environment_it_ignores",
        "test_a_whatif_from_the_archive_prints_old_and_new_numbers",
        "test_mistakes_answer_in_one_line",
    ),
    "tests/integration/test_whatif_goals.py": (
        "test_proposed_goals_agg_equals_raw_equals_a_count_of_the_events",
        "test_the_cli_prints_both_sides_and_apply_records_one_version",
        "test_mistakes_answer_in_one_line",
        "test_the_api_answers_both_sides_for_the_operator_and_a_site_admin_only",
        "test_api_mistakes_answer_the_field[params3-400-add_page]",
    ),
    "tests/security/test_client_ip.py": (
        "test_behind_caddy_a_strangers_wrong_passwords_do_not_lock_the_operator_out",
        "test_strangers_on_many_addresses_slow_guessing_at_an_account_but_not_its_usual_client",
        "test_ten_wrong_passwords_from_a_stranger_do_not_lock_the_operator_out",
        "test_wrong_passwords_on_an_invitation_from_a_stranger_do_not_stop_its_invitee",
        "test_a_client_that_is_not_the_proxy_cannot_choose_its_address",
        "test_wrong_share_passwords_from_a_stranger_do_not_lock_the_link_for_its_visitors",
        "test_caddy_bounds_dashboard_bodies_at_the_servers_limit",
    ),
    "tests/security/test_csv_cells.py": ("test_a_column_alias_cannot_smuggle_a_formula_into_the_header",),
    "tests/unit/test_collector_input.py": ("test_the_senders_event_id_becomes_the_events",),
    "tests/unit/test_dependency_rule.py": ("test_every_product_module_follows_the_dependency_rule",),
    "tests/unit/test_no_committed_secrets.py": ("test_no_tracked_file_holds_a_secret",),
    "tests/unit/test_visitor_state_encoding.py": (
        "test_v1_and_v2_visitor_states_decode_and_v3_round_trips_engagement_events",
        "test_page_views_within_the_allowed_lateness_count_exactly_and_the_state_stays_a_few_days",
        "test_engagement_events_end_a_bounce_only_within_their_sessions_span",
    ),
}


def is_slow(item: pytest.Item) -> bool:
    module, _, name = item.nodeid.partition("::")
    listed = SLOW_TESTS.get(module, ())
    return bool(item.get_closest_marker("slow")) or name in listed or name.split("[", 1)[0] in listed


def in_fast_lane(item: pytest.Item) -> bool:
    return not is_slow(item) and not SERVICE_FIXTURES.intersection(getattr(item, "fixturenames", ()))


def keep_the_soak_out(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked `soak` (tests/fault/test_soak.py: minutes to an hour under load) run only
    when a `-m` expression names them (`make soak` runs `-m soak`), never in `make test`."""
    if "soak" in (config.getoption("markexpr") or ""):
        return
    soak = [item for item in items if item.get_closest_marker("soak")]
    if soak:
        config.hook.pytest_deselected(items=soak)
        items[:] = [item for item in items if not item.get_closest_marker("soak")]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    keep_the_soak_out(config, items)
    for item in items:
        if in_fast_lane(item):
            item.add_marker(pytest.mark.fast)
