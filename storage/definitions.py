"""Versioned definitions: the numbered sets of definitions the derived tables are
computed with, which one is current, and how a process gets its numbers from it.

What a version holds (migration 0054):
- the definitions the stream jobs shape the derived tables with, and that a what-if replays
  the log through: `session_gap_s` (sessions, visits, bounces, durations, entry and exit
  pages) and `engaged_bounce_ms` (a one-page session with this much engaged time is no
  bounce); `watermark_s` (which events the windows count as late) is recorded with them;
- the contents of the rules kept in tables, per site, as they were when the version was made
  (`rules`, kind -> site -> items; the kinds are RULE_KINDS): the sites' goals and channel rules
  (both applied at read time) and exclusions (applied by the collector, before the log: recorded
  and restorable, never replayable: no replay brings back what they dropped). A rule change by
  any path (goals.py, channel_rules.py and exclusions.py call `record_rules`) is a new version,
  made current at once: no replay needed.
  A rollback rewrites the rule tables to the version's contents (`restore_rules`): exactly its
  contents for every site it names; a site registered after it keeps its own rules;
- what a version records but cannot restore: the built-in channel grouping's fingerprint
  (storage/channels.py, code; a site's own rules come before it) and the collector's bot rules
  (the pinned crawler-user-agents release: they act before the log, so an upgrade that changes
  them shows between two versions, and no replay can undo what they dropped). Versions made before contents
  were kept hold fingerprints only (`fingerprints`); their rules are "not recorded". Path
  normalisation is the collector's code (collector/enrichment.py), versioned with the release and
  applied before the log: no version can change it, so none records it.

One source of truth: the stored current version. The environment (`TALLY_SESSION_GAP_S`,
`TALLY_ENGAGED_BOUNCE_MS`, `TALLY_WATERMARK_S`) seeds version 1, once, on the first start
after the upgrade (`current`); from then on a version changes only through `tally whatif
--swap` or `tally whatif rollback`, and an environment that says otherwise is reported by
`tally definitions` (never silently applied: the derived tables were built with the stored one).
Processes apply it with `applied` (stream jobs: read at start, so a swap restarts them; the
dashboard and the API: `CurrentDefinitions`, re-read every few seconds).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime, timedelta
from importlib import metadata
from typing import Any, Literal, Protocol
from uuid import UUID, uuid4

from clickhouse_connect.driver.client import Client

from storage import channel_rules, channels, exclusions, goals
from tally.refusal import Refused
from tally.settings import Settings

VERSIONS = "definition_versions"
SWITCHES = "definition_switches"
#: Side tables of a version are `<derived table>_v<N>`: an integer, so safe to splice into SQL.
SIDE_SUFFIX = "_v{version}"
REFRESH_S = 2.0  # how stale the dashboard's copy of the current version may be
BOT_LIST = "crawler-user-agents"  # the collector's bot rules (collector/user_agent.py), pinned


class DefinitionsError(Refused):
    """A version that does not exist, or a switch that cannot be made."""


#: One kind of rules' contents: site -> that site's rules (JSON values), every registered site.
Contents = dict[str, list[Any]]


class RuleKind(Protocol):
    """A kind of rules a version holds (a module): how to read its contents and restore them."""

    def contents(self, client: Client) -> Contents: ...

    def restore(self, client: Client, stored: Contents) -> None: ...


#: The rules a version holds, by kind: a new kind is one line, its module (contents, restore).
#: Modules, not their functions: goals and exclusions import this module to record their changes.
RULE_KINDS: dict[str, RuleKind] = {
    "goals": goals,
    "exclusions": exclusions,
    "channel_rules": channel_rules,
}


@dataclass(frozen=True)
class Definitions:
    session_gap_s: int
    engaged_bounce_ms: int
    watermark_s: int
    #: kind -> site -> rules; a kind absent was not recorded (a version made before contents).
    rules: dict[str, Contents] = field(default_factory=dict)
    #: what is recorded but not restorable: the built-in channel rules' fingerprint, and for a
    #: version made before contents were kept, every kind's fingerprint.
    fingerprints: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Definitions:
        values = json.loads(text)
        rules = dict(values.get("rules", {}))
        legacy = {kind: value for kind, value in rules.items() if isinstance(value, str)}
        return cls(
            int(values["session_gap_s"]),
            int(values["engaged_bounce_ms"]),
            int(values["watermark_s"]),
            {kind: value for kind, value in rules.items() if kind not in legacy},
            {**legacy, **values.get("fingerprints", {})},
        )

    def replayed(self) -> dict[str, int]:
        """The definitions a replay applies (the rest are recorded, not replayed)."""
        return {
            "session_gap_s": self.session_gap_s,
            "engaged_bounce_ms": self.engaged_bounce_ms,
            "watermark_s": self.watermark_s,
        }

    def rule_fingerprints(self) -> dict[str, str]:
        """Every kind's fingerprint: computed from the contents where they were recorded."""
        return {**self.fingerprints, **{kind: fingerprint(value) for kind, value in self.rules.items()}}

    def unrecorded(self) -> list[str]:
        """The rule kinds whose contents this version does not hold (made before they were kept)."""
        return [kind for kind in RULE_KINDS if kind not in self.rules]


@dataclass(frozen=True)
class Version:
    number: int
    definitions: Definitions
    note: str
    created_at: datetime


def side_suffix(version: int) -> str:
    """The table suffix of a version's side tables (`_v3`)."""
    return SIDE_SUFFIX.format(version=int(version))


def from_settings(client: Client, settings: Settings) -> Definitions:
    """The definitions the environment states, with today's rules."""
    return Definitions(
        settings.session_gap_s, settings.engaged_bounce_ms, settings.watermark_s, **rules_now(client)
    )


def rules_now(client: Client) -> dict[str, Any]:
    """The `rules` and `fingerprints` of a version made now: every kind's contents as the tables
    hold them, and the built-in channel rules' fingerprint (code: recorded, not restorable)."""
    channel_rules = [
        channels.SEARCH_ENGINES, channels.SOCIAL_NETWORKS, channels.PAID_MEDIUM, channels.DISPLAY_MEDIA,
        channels.SOCIAL_MEDIA, channels.EMAIL_VALUES, channels.REFERRAL_MEDIA, channels.CHANNELS,
    ]  # fmt: skip
    return {
        "rules": {kind: rule_kind.contents(client) for kind, rule_kind in RULE_KINDS.items()},
        "fingerprints": {"channels": fingerprint(channel_rules), "bot_rules": bot_rules()},
    }


def bot_rules() -> str:
    """The collector's bot rules as released: the pinned crawler list's name and version (read
    from the installed package's metadata: storage does not import the collector)."""
    try:
        return f"{BOT_LIST} {metadata.version(BOT_LIST)}"
    except metadata.PackageNotFoundError:
        return f"{BOT_LIST} (not installed)"


def fingerprint(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:12]


# --- reading and recording versions -------------------------------------------------------


def current(client: Client, settings: Settings) -> Version:
    """The current version; on the first call after the upgrade, version 1 from the environment."""
    number = current_number(client)
    if number is None:
        record_first(client, settings)
        number = current_number(client) or 1
    return get(client, number)


def current_number(client: Client) -> int | None:
    rows = client.query(f"SELECT version FROM {SWITCHES} ORDER BY at DESC, version DESC LIMIT 1").result_rows
    return int(rows[0][0]) if rows else None


def record_first(client: Client, settings: Settings) -> None:
    """Version 1: the definitions the environment states, current from now (the upgrade)."""
    if get_or_none(client, 1) is None:
        _insert_version(client, 1, from_settings(client, settings), "from the environment (upgrade)")
    _insert_switch(client, 1, 0, "upgrade")


def get(client: Client, number: int) -> Version:
    version = get_or_none(client, number)
    if version is None:
        raise DefinitionsError(f"no definitions version {number}")
    return version


def get_or_none(client: Client, number: int) -> Version | None:
    rows = client.query(
        f"SELECT version, definitions, note, created_at FROM {VERSIONS} FINAL WHERE version = {{v:UInt32}}",
        parameters={"v": number},
    ).result_rows
    return _version(rows[0]) if rows else None


def get_many(client: Client, numbers: set[int]) -> dict[int, Version]:
    """The versions numbered `numbers` that exist, in one read."""
    if not numbers:
        return {}
    rows = client.query(
        f"SELECT version, definitions, note, created_at FROM {VERSIONS} FINAL "
        "WHERE version IN {v:Array(UInt32)}",
        parameters={"v": sorted(numbers)},
    ).result_rows
    return {int(row[0]): _version(row) for row in rows}


def list_versions(client: Client) -> list[Version]:
    rows = client.query(
        f"SELECT version, definitions, note, created_at FROM {VERSIONS} FINAL ORDER BY version"
    ).result_rows
    return [_version(row) for row in rows]


def _version(row: tuple) -> Version:
    return Version(int(row[0]), Definitions.from_json(row[1]), row[2], row[3])


def propose(client: Client, settings: Settings, changes: dict[str, int], note: str) -> Version:
    """Record a new version: the current one with `changes` (not current until swapped in)."""
    base = current(client, settings).definitions
    unknown = set(changes) - set(base.replayed())
    if unknown:
        raise DefinitionsError(f"unknown definitions: {', '.join(sorted(unknown))}")
    values = {**base.replayed(), **changes}
    proposed = Definitions(**values, **rules_now(client))
    number = _next_number(client)
    _insert_version(client, number, proposed, note)
    return get(client, number)


def _next_number(client: Client) -> int:
    return int(client.query(f"SELECT max(version) FROM {VERSIONS}").result_rows[0][0]) + 1


def record_rules(
    client: Client, note: str, reason: str = "edit", previous: int | None = None
) -> Version | None:
    """After a rule change (goals.py, exclusions.py call this on every add and remove): a new
    version, the current one with the rules as the tables now hold them, made current with
    `reason`. Nothing before version 1 exists (version 1 captures the rules when it is made),
    nor when the rules equal the current version's. `previous`: the version a rollback of this
    switch goes back to (default: the current one). Returns the new version."""
    number = current_number(client)
    if number is None:
        return None
    base = get(client, number).definitions
    now = replace(base, **rules_now(client))
    if now.rules == base.rules and now.fingerprints == base.fingerprints:
        return None
    new_number = _next_number(client)
    _insert_version(client, new_number, now, note)
    _insert_switch(client, new_number, number if previous is None else previous, reason)
    return get(client, new_number)


def restore_rules(client: Client, definitions: Definitions) -> list[str]:
    """Rewrite the rule tables to the version's contents (each kind it recorded; for each site
    it names exactly its rules, a site it does not name keeps its own). Returns the kinds it
    could not restore because the version did not record them."""
    for kind, contents in definitions.rules.items():
        if kind in RULE_KINDS:
            RULE_KINDS[kind].restore(client, contents)
    return definitions.unrecorded()


def switch_to(client: Client, number: int, reason: str) -> int:
    """Make version `number` current; returns the version it replaces."""
    get(client, number)
    previous = current_number(client) or 1
    _insert_switch(client, number, previous, reason)
    return previous


def previous_number(client: Client) -> int:
    """The version the newest switch replaced (what a rollback goes back to)."""
    rows = client.query(f"SELECT previous FROM {SWITCHES} ORDER BY at DESC, version DESC LIMIT 1").result_rows
    if not rows or int(rows[0][0]) == 0:
        raise DefinitionsError("no earlier version to roll back to")
    return int(rows[0][0])


def _insert_version(client: Client, number: int, definitions: Definitions, note: str) -> None:
    client.insert(
        VERSIONS, [[number, definitions.to_json(), note]], column_names=["version", "definitions", "note"]
    )


def _insert_switch(client: Client, number: int, previous: int, reason: str) -> None:
    # Strictly after the newest switch: an edit right after a rollback must not tie with it on
    # the millisecond (the newest switch is the current version).
    newest = client.query(f"SELECT max(at) FROM {SWITCHES}").result_rows[0][0]
    at = datetime.now(UTC)
    if newest is not None and newest.replace(tzinfo=UTC) >= at:
        at = newest.replace(tzinfo=UTC) + timedelta(milliseconds=1)
    client.insert(
        SWITCHES, [[at, number, previous, reason]], column_names=["at", "version", "previous", "reason"]
    )


# --- what changed between two versions -----------------------------------------------------

_REPLAYED_LABELS = {
    "session_gap_s": "session gap",
    "engaged_bounce_ms": "engaged bounce",
    "watermark_s": "watermark",
}


def changes(older: Definitions, newer: Definitions) -> list[str]:
    """What `newer` changes from `older`, one phrase each: "session gap 30m -> 20m", "goals on
    example.com: +Signup -Visit /old/*" (~ a goal kept under its name but changed)."""
    found = [
        f"{_REPLAYED_LABELS[name]} {_duration(name, value)} -> {_duration(name, newer.replayed()[name])}"
        for name, value in older.replayed().items()
        if newer.replayed()[name] != value
    ]
    for kind in sorted(set(older.rules) | set(newer.rules)):
        if kind in older.rules and kind in newer.rules:
            found += _rule_changes(kind, older.rules[kind], newer.rules[kind])
        elif kind in newer.rules:  # the older one holds a fingerprint of other rows: not comparable
            found.append(f"{kind}: recorded from here on (before: a fingerprint only)")
    for kind in sorted(set(older.fingerprints) & set(newer.fingerprints) - {"channels", "bot_rules"}):
        if older.fingerprints[kind] != newer.fingerprints[kind]:
            found.append(f"{kind} changed (not recorded)")
    if older.fingerprints.get("channels") != newer.fingerprints.get("channels"):
        found.append("built-in channel rules changed")
    bots = (older.fingerprints.get("bot_rules"), newer.fingerprints.get("bot_rules"))
    if bots[0] is not None and bots[0] != bots[1]:  # an upgrade of the collector's crawler list
        found.append(f"bot rules {bots[0]} -> {bots[1]}")
    return found


def _rule_changes(kind: str, older: Contents, newer: Contents) -> list[str]:
    found = []
    for site in sorted(set(older) | set(newer)):
        before = {_label(item): item for item in older.get(site, [])}
        after = {_label(item): item for item in newer.get(site, [])}
        words = [f"+{label}" for label in after if label not in before]
        words += [f"-{label}" for label in before if label not in after]
        words += [f"~{label}" for label in after if label in before and before[label] != after[label]]
        if words:
            found.append(f"{kind} on {site}: {' '.join(words)}")
    return found


def _label(item: Any) -> str:
    """How a rule is named in a change: a goal by name, an exclusion as "ip 10.0.0.0/8", a
    channel rule as "partner.io=Partners"."""
    if isinstance(item, dict) and "name" in item:
        return str(item["name"])
    if isinstance(item, dict) and {"kind", "value"} <= set(item):
        return f"{item['kind']} {item['value']}"
    if isinstance(item, list) and len(item) == 3:  # a channel rule: [source, medium, channel]
        source, medium, channel = item
        return f"{source}{f' ({medium})' if medium else ''}={channel}"
    return json.dumps(item, sort_keys=True)


def _duration(name: str, value: int) -> str:
    seconds = value / 1000 if name.endswith("_ms") else value
    if seconds and seconds % 60 == 0:
        return f"{seconds / 60:g}m"
    return f"{seconds:g}s"


# --- applying the current version -----------------------------------------------------------


def applied(settings: Settings, definitions: Definitions) -> Settings:
    """`settings` with the definitions of a version in place of the environment's."""
    return settings.model_copy(update=definitions.replayed())


def environment_differences(settings: Settings, definitions: Definitions) -> list[str]:
    """The replayed definitions the environment states otherwise than `definitions` (ignored)."""
    return [
        f"TALLY_{name.upper()}={getattr(settings, name)} (current: {value})"
        for name, value in definitions.replayed().items()
        if getattr(settings, name) != value
    ]


def current_or_none(client: Client) -> Version | None:
    """The current version, or None before version 1 is recorded (readers never record it)."""
    number = current_number(client)
    return None if number is None else get_or_none(client, number)


class CurrentDefinitions:
    """The current version for a long-running reader (the dashboard and its API), re-read at
    most every REFRESH_S seconds: a swap shows within that, without a restart. Before version 1
    is recorded (the stream jobs' first start after the upgrade, `tally up`, `tally whatif`)
    the environment's definitions apply: version 1 will hold the same."""

    def __init__(self, settings: Settings, clients: Callable[[], Client]) -> None:
        self._settings, self._clients = settings, clients
        self._lock = threading.Lock()
        self._version: Version | None = None
        self._read_at: float | None = None

    def version(self) -> Version | None:
        with self._lock:
            if self._read_at is None or time.monotonic() - self._read_at > REFRESH_S:
                self._version = current_or_none(self._clients())
                self._read_at = time.monotonic()
            return self._version

    def settings(self) -> Settings:
        """The process's settings with the current version's definitions."""
        version = self.version()
        return self._settings if version is None else applied(self._settings, version.definitions)


DURATION = re.compile(r"^(\d+)(ms|s|m|h)?$")
_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}


def duration_ms(text: str) -> int:
    """'20m', '90s', '1h', '500ms' (or plain seconds) in milliseconds; ValueError otherwise."""
    match = DURATION.match(text.strip())
    if not match:
        raise ValueError(f"{text!r} is not a duration like 20m, 90s, 1h or 500ms")
    return int(match[1]) * _UNITS_MS[match[2] or "s"]


# --- requests from the dashboard (migration 0055) ---------------------------------------------

REQUESTS = "definition_requests"
Action = Literal["swap", "discard"]


@dataclass(frozen=True)
class Request:
    id: UUID
    version: int
    action: str
    requested_by: str
    requested_at: datetime
    state: str
    outcome: str


def ask(client: Client, version: int, action: Action, requested_by: str) -> Request:
    """Record a pending swap or discard of `version` for the stream jobs to carry out."""
    get(client, version)
    now = datetime.now(UTC)
    request = Request(uuid4(), version, action, requested_by, now, "pending", "")
    _write_request(client, request)
    return request


def pending_requests(client: Client) -> list[Request]:
    """Pending requests, oldest first."""
    rows = client.query(
        f"SELECT id, version, action, requested_by, requested_at, state, outcome FROM {REQUESTS} FINAL "
        "WHERE state = 'pending' ORDER BY requested_at"
    ).result_rows
    return [Request(*row) for row in rows]


def recent_requests(client: Client, limit: int = 5) -> list[Request]:
    rows = client.query(
        f"SELECT id, version, action, requested_by, requested_at, state, outcome FROM {REQUESTS} FINAL "
        "ORDER BY requested_at DESC LIMIT {limit:UInt32}",
        parameters={"limit": limit},
    ).result_rows
    return [Request(*row) for row in rows]


def finish(client: Client, request: Request, state: Literal["done", "refused"], outcome: str) -> None:
    _write_request(client, replace(request, state=state, outcome=outcome))


def _write_request(client: Client, r: Request) -> None:
    client.insert(
        REQUESTS,
        [[r.id, r.version, r.action, r.requested_by, r.requested_at, r.state, r.outcome]],
        column_names=["id", "version", "action", "requested_by", "requested_at", "state", "outcome"],
    )
