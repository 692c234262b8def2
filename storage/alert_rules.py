"""Alert rules: what a site owner wants to hear about within seconds (migration 0032).

Three kinds, each evaluated by the alerts query (stream_jobs/alerts.py) on every trigger:
* `pageviews_above`: page views in the current window of `window_minutes` (windows aligned
  on the epoch: :00, :05, … for 5 minutes) above `threshold`, or above `factor` x the mean of
  the `baseline_windows` windows before it (no alert while that mean is 0: no history yet);
* `goal_absent`: the site's goal `goal` (storage/goals.py) not seen for `window_minutes`
  (counted from the rule's creation if it never was);
* `event_rate_above`: custom events named `event_name`, or page views whose path matches
  `page_pattern` (storage/page_patterns.py), above `threshold` in a minute.
Each rule has a webhook (http or https) that the delivery process (alerts/delivery.py) POSTs
each alert to.

Webhook URLs and SSRF: a rule's URL makes Tally's server send requests, so only an operator
(the CLI, the signed-in dashboard; never a shared link) can set one; only http(s) URLs without
credentials, with a plain ASCII host (a name, an IPv4 address or a bracketed IPv6 one; an
international name in its xn-- form) and a port from 1 to 65535 are accepted here; and the
address policy of tally/webhook_targets.py — an allow-list: globally routable addresses, loopback
and private networks only with TALLY_ALERT_WEBHOOK_PRIVATE, never a metadata service — is checked
on every address the host resolves to when a rule is added (`add_rule`: a name that does not
resolve yet is accepted) and again by the delivery process before each alert, which connects to
the address it checked and never follows a redirect.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal
from urllib.parse import urlsplit

from clickhouse_connect.driver.client import Client
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from storage import site_caps
from storage.goals import InvalidGoal, find_goal
from storage.page_patterns import BadPattern, validate_pattern
from storage.site_settings_rows import SettingsTable
from storage.sites import normalise, registered
from tally.clock import as_utc
from tally.refusal import Refused
from tally.webhook_targets import RefusedDestination, UnresolvedHost, checked_addresses

RuleKind = Literal["pageviews_above", "goal_absent", "event_rate_above"]
RULE_KINDS: tuple[str, ...] = ("pageviews_above", "goal_absent", "event_rate_above")
MAX_WINDOW_MINUTES = 24 * 60
MAX_BASELINE_WINDOWS = 48
DEFAULT_BASELINE_WINDOWS = 12
MAX_URL_LENGTH = 2000
# A webhook's host as written: a DNS name, an IPv4 address or an IPv6 one (the brackets removed),
# in ASCII. Anything else (a zone id, a backslash, a Unicode look-alike of a dot or a digit that
# the resolver and the HTTP client might read differently) is refused before it is resolved.
WEBHOOK_HOST = re.compile(r"[a-z0-9_.-]+|[0-9a-f:.]+")
# The alerts table's statuses: fired by the stream, then the delivery's outcome.
FIRED, DELIVERED, FAILED, REFUSED = "fired", "delivered", "failed", "refused"


class InvalidRule(Refused):
    """A rule Tally cannot add or remove; the message names what is wrong."""


class AlertRule(BaseModel):
    """One rule, validated: the kind decides which fields it needs."""

    model_config = ConfigDict(frozen=True)

    rule_id: str = Field(default_factory=lambda: uuid.uuid4().hex[:12])
    site: str
    kind: RuleKind
    window_minutes: int = Field(default=1, ge=1, le=MAX_WINDOW_MINUTES)
    threshold: int = Field(default=0, ge=0)
    factor: float = Field(default=0.0, ge=0.0, le=1000.0)
    baseline_windows: int = Field(default=DEFAULT_BASELINE_WINDOWS, ge=1, le=MAX_BASELINE_WINDOWS)
    goal: str = ""
    event_name: str = ""
    page_pattern: str = ""
    webhook_url: str
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC))

    @field_validator("site")
    @classmethod
    def _site(cls, site: str) -> str:
        return normalise(site)

    @field_validator("created_at")
    @classmethod
    def _created(cls, moment: datetime) -> datetime:
        # As the store keeps it (DateTime64(3)): the rule's absence windows start here.
        moment = as_utc(moment)
        return moment.replace(microsecond=moment.microsecond // 1000 * 1000)

    @field_validator("webhook_url")
    @classmethod
    def _webhook(cls, url: str) -> str:
        return validate_webhook_url(url)

    @field_validator("page_pattern")
    @classmethod
    def _pattern(cls, pattern: str) -> str:
        try:
            return validate_pattern(pattern) if pattern.strip() else ""
        except BadPattern as error:
            raise ValueError(f"page pattern {pattern!r}: {error}") from None

    @model_validator(mode="after")
    def _fields_of_kind(self) -> AlertRule:
        if self.kind == "pageviews_above" and (self.threshold > 0) == (self.factor > 0):
            raise ValueError("threshold: pageviews_above takes a threshold N or a factor k, one of them")
        if self.kind == "event_rate_above":
            if bool(self.event_name.strip()) == bool(self.page_pattern):
                raise ValueError("event_name: event_rate_above takes an event name or a page pattern")
            if self.window_minutes != 1:
                raise ValueError("window_minutes: event_rate_above counts per minute (1)")
            if self.threshold < 1:
                raise ValueError("threshold: event_rate_above takes a threshold N ≥ 1 per minute")
        if self.kind == "goal_absent" and not self.goal.strip():
            raise ValueError("goal: goal_absent takes the name of one of the site's goals")
        return self

    def describe(self) -> str:
        """The rule in a few words, as `tally alerts list` and the dashboard show it."""
        if self.kind == "goal_absent":
            return f"goal {self.goal!r} not seen for {self.window_minutes} min"
        if self.kind == "event_rate_above":
            what = f"event {self.event_name!r}" if self.event_name else f"page views of {self.page_pattern}"
            return f"{what} above {self.threshold} per minute"
        bound = (
            f"{self.threshold}"
            if self.threshold
            else f"{self.factor:g} x the mean of {self.baseline_windows}"
        )
        return f"page views in {self.window_minutes} min above {bound}"


def validate_webhook_url(url: str) -> str:
    """The URL, stripped, if it is an http(s) URL with a host and no credentials."""
    url = url.strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ValueError("a webhook URL starts with http:// or https://")
    if not parts.hostname:
        raise ValueError("a webhook URL names a host")
    if parts.username or parts.password:
        raise ValueError("a webhook URL carries no credentials (put a secret in its path or query)")
    if len(url) > MAX_URL_LENGTH or not url.isprintable() or " " in url:
        raise ValueError(f"a webhook URL has at most {MAX_URL_LENGTH} printable characters, no spaces")
    if not parts.hostname.isascii():
        raise ValueError("a webhook URL's host is ASCII (write an international name in its xn-- form)")
    if not WEBHOOK_HOST.fullmatch(parts.hostname):
        raise ValueError(f"a webhook URL's host is a name or an IP address, not {parts.hostname!r}")
    try:
        port = parts.port  # ValueError: not a number, or above 65535
    except ValueError:
        port = 0
    if port == 0:
        raise ValueError("a webhook URL's port is a number from 1 to 65535")
    return url


def make_rule(**fields: object) -> AlertRule:
    """A validated rule (no store needed), or InvalidRule naming the field at fault."""
    try:
        return AlertRule(**fields)
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(part) for part in first["loc"])
        message = str(first["msg"]).removeprefix("Value error, ")
        raise InvalidRule(f"{field}: {message}" if field else message) from None
    except ValueError as error:  # the site's domain (storage.sites.InvalidDomain)
        raise InvalidRule(str(error)) from None


_COLUMNS = (
    "rule_id",
    "site",
    "kind",
    "window_minutes",
    "threshold",
    "factor",
    "baseline_windows",
    "goal",
    "event_name",
    "page_pattern",
    "webhook_url",
    "created_at",
)
RULES = SettingsTable("alert_rules", keys=_COLUMNS[:1], values=_COLUMNS[1:])


def add_rule(client: Client, rule: AlertRule, *, private_webhooks: bool = False) -> AlertRule:
    """Store the rule once its site, goal and webhook destination are checked.

    `private_webhooks` is TALLY_ALERT_WEBHOOK_PRIVATE (Settings.alert_webhook_private): whether
    the webhook may be on loopback or a private network."""
    registered(client, rule.site, InvalidRule)
    site_caps.ALERT_RULES.check(len(list_rules(client, rule.site)), InvalidRule)
    if rule.kind == "goal_absent":
        try:
            find_goal(client, rule.site, rule.goal)
        except InvalidGoal:
            raise InvalidRule(
                f"{rule.site} has no goal {rule.goal!r} (see 'tally goals list {rule.site}')"
            ) from None
    check_webhook_destination(rule.webhook_url, private_webhooks)
    _write(client, rule, removed=0)
    return rule


def check_webhook_destination(url: str, private_webhooks: bool) -> None:
    """InvalidRule naming webhook_url if the URL's host resolves to an address alerts may not
    be sent to (tally/webhook_targets.py). A name that does not resolve now is accepted: DNS may
    not be set up yet, and the delivery checks every address again before each alert."""
    try:
        checked_addresses(url, private_webhooks)
    except UnresolvedHost:
        pass
    except RefusedDestination as refused:
        raise InvalidRule(f"webhook_url: {refused}") from None


def remove_rule(client: Client, site: str, rule_id: str) -> AlertRule:
    site = normalise(site)
    for rule in list_rules(client, site):
        if rule.rule_id == rule_id.strip():
            _write(client, rule, removed=1)
            return rule
    raise InvalidRule(f"{site} has no alert rule {rule_id.strip()!r} (see 'tally alerts list {site}')")


def list_rules(client: Client, site: str | None = None) -> list[AlertRule]:
    """The rules in force (of one site, or all), oldest first."""
    rows = RULES.newest(
        client,
        "site = {site:String}" if site is not None else "",
        {"site": site} if site is not None else None,
        order=("created_at", "rule_id"),
    )
    return [AlertRule.model_construct(**dict(zip(_COLUMNS, _utc_row(row), strict=True))) for row in rows]


def _utc_row(row: tuple) -> list:
    return [
        value.replace(tzinfo=UTC) if isinstance(value, datetime) and value.tzinfo is None else value
        for value in row
    ]


def _write(client: Client, rule: AlertRule, removed: int) -> None:
    RULES.write(client, [[getattr(rule, column) for column in _COLUMNS]], removed)


# --- the alerts fired -------------------------------------------------------------------------


@dataclass(frozen=True)
class FiredAlert:
    alert_id: str
    rule_id: str
    site: str
    kind: str
    window_start: datetime
    observed: float
    threshold: float
    fired_at: datetime
    summary: str
    status: str
    attempts: int
    last_error: str


ALERT_COLUMNS = (
    "alert_id",
    "rule_id",
    "site",
    "kind",
    "window_start",
    "observed",
    "threshold",
    "fired_at",
    "summary",
    "status",
    "attempts",
    "last_error",
)
MAX_ALERTS_LISTED = 1000


def recent_alerts(client: Client, site: str, limit: int = 100) -> list[FiredAlert]:
    """The site's latest alerts, newest first, each with its delivery's status."""
    rows = client.query(
        f"SELECT {', '.join(ALERT_COLUMNS)} FROM alerts FINAL WHERE site = {{site:String}} "
        "ORDER BY fired_at DESC, alert_id LIMIT {limit:UInt32}",
        parameters={"site": normalise(site), "limit": min(limit, MAX_ALERTS_LISTED)},
    ).result_rows
    return [FiredAlert(*_utc_row(row)) for row in rows]


def fired_between(
    client: Client, site: str, start: datetime, end: datetime, limit: int
) -> list[tuple[str, datetime, str]]:
    """(alert id, when it fired, its summary) of `site`'s alerts fired in [start, end), the newest
    `limit`, newest first (the chart's automatic annotations, storage/annotations.py)."""
    rows = client.query(
        "SELECT alert_id, fired_at, summary FROM alerts FINAL WHERE site = {site:String} "
        "AND fired_at >= {start:DateTime64(3, 'UTC')} AND fired_at < {end:DateTime64(3, 'UTC')} "
        "ORDER BY fired_at DESC, alert_id DESC LIMIT {limit:UInt32}",
        parameters={"site": normalise(site), "start": start, "end": end, "limit": limit},
    ).result_rows
    return [(row[0], as_utc(row[1]), row[2]) for row in rows]


def record_outcome(
    client: Client, alert: dict[str, object], status: str, attempts: int, last_error: str = ""
) -> None:
    """Record a delivery's outcome (stage 1) for the alert as published on the topic."""
    row = [
        alert["alert_id"],
        alert["rule_id"],
        alert["site"],
        alert["kind"],
        datetime.fromisoformat(str(alert["window_start"])),
        float(alert["observed"]),  # type: ignore[arg-type]
        float(alert["threshold"]),  # type: ignore[arg-type]
        datetime.fromisoformat(str(alert["fired_at"])),
        alert["summary"],
        status,
        attempts,
        last_error[:500],
        1,
    ]
    client.insert("alerts", [row], column_names=[*ALERT_COLUMNS, "stage"])
