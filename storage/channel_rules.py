"""Per-site channel rules (migration 0058, table `site_channel_rules`): a site owner's own channel
grouping, checked in order before GA4's default grouping (storage/channels.py).

A rule says: sessions whose source (utm_source, else the referrer domain, lower-cased) is `source`
as a name or a domain (subdomains before and TLD suffixes after match, as for the built-in search
engines: `partner` matches partner.io and www.partner.co.uk), and whose medium is `medium` when
the rule names one, belong to `channel`: one of the default channels or the owner's own name.
The first rule that holds names the channel; no rule holding, the default grouping does.

`contents` and `restore` give every site's rules as plain data and put them back, so a versioned
definition can hold them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from clickhouse_connect.driver.client import Client

from storage import definitions
from storage.channels import CHANNELS, ChannelRule
from storage.site_settings_rows import SettingsTable
from storage.sites import list_sites, normalise, registered
from tally.refusal import Refused

MAX_CHANNEL_NAME = 40
MAX_MEDIUM = 100
# Every rule is matched against every session a channel report reads: bounded per site, as
# exclusions are (a month's breakdown: 217 ms without rules, 241 ms with 10).
MAX_RULES = 100
# A source as channels.py reads one: a name (utm_source=newsletter) or a domain, lower-cased.
SOURCE = re.compile(
    r"^(?=.{1,253}$)[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?(?:\.[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?)*$"
)
TABLE = SettingsTable("site_channel_rules", keys=("site", "source", "medium"), values=("channel", "position"))


class InvalidChannelRule(Refused):
    """A channel rule Tally cannot add, remove or restore; the message names the field."""


@dataclass(frozen=True)
class StoredRule:
    """A site's rule as stored: the rule and its place in the site's order."""

    site: str
    rule: ChannelRule
    position: int


def make_rule(source: str, channel: str, medium: str = "") -> ChannelRule:
    """A validated rule (no store needed); a default channel's name is spelled as Tally does."""
    return ChannelRule(checked_source(source), checked_channel(channel), checked_medium(medium))


def checked_source(source: str) -> str:
    cleaned = source.strip().lower()
    if not SOURCE.match(cleaned):
        raise InvalidChannelRule(
            f"source: {source!r} is not a domain or source name (letters, digits, '-', '_', dots between)"
        )
    return cleaned


def checked_medium(medium: str) -> str:
    cleaned = medium.strip().lower()
    if len(cleaned) > MAX_MEDIUM or not cleaned.isprintable():
        raise InvalidChannelRule(f"medium: at most {MAX_MEDIUM} printable characters (got {medium!r})")
    return cleaned


def checked_channel(channel: str) -> str:
    cleaned = channel.strip()
    if not cleaned or len(cleaned) > MAX_CHANNEL_NAME or not cleaned.isprintable():
        raise InvalidChannelRule(
            f"channel: a name of 1 to {MAX_CHANNEL_NAME} printable characters (got {channel!r})"
        )
    return next((name for name in CHANNELS if name.lower() == cleaned.lower()), cleaned)


def add_rule(client: Client, site: str, rule: ChannelRule) -> StoredRule:
    """Append `rule` to the site's rules (checked after the ones it has)."""
    site = registered(client, site, InvalidChannelRule)
    existing = stored_rules(client, site)
    if any(_key(stored.rule) == _key(rule) for stored in existing):
        raise InvalidChannelRule(f"{site} already has a rule for {_describe(rule)} (remove it first)")
    if len(existing) >= MAX_RULES:
        raise InvalidChannelRule(f"site: at most {MAX_RULES} channel rules per site")
    position = max((stored.position for stored in existing), default=0) + 1
    _write(client, site, [(rule, position, 0)])
    definitions.record_rules(client, f"channel rule added on {site}: {_describe(rule)} -> {rule.channel}")
    return StoredRule(site, rule, position)


def remove_rule(client: Client, site: str, source: str, medium: str = "") -> ChannelRule:
    """Remove the site's rule for (source, medium)."""
    site = normalise(site)
    key = (checked_source(source), checked_medium(medium))
    for stored in stored_rules(client, site):
        if _key(stored.rule) == key:
            _write(client, site, [(stored.rule, stored.position, 1)])
            definitions.record_rules(client, f"channel rule removed on {site}: {_describe(stored.rule)}")
            return stored.rule
    wanted = _describe(ChannelRule(key[0], "", key[1]))
    raise InvalidChannelRule(f"{site} has no rule for {wanted} (see 'tally channels list {site}')")


def list_rules(client: Client, site: str) -> list[ChannelRule]:
    """The site's rules, in the order they are checked."""
    return [stored.rule for stored in stored_rules(client, site)]


def stored_rules(client: Client, site: str) -> list[StoredRule]:
    return [stored for stored in _current(client, site) if stored.site == site]


# --- what a definitions version holds (storage/definitions.py: RULE_KINDS) --------------------


def contents(client: Client) -> dict[str, list[list[str]]]:
    """Every registered site's rules in order (a site without any: an empty list), each as
    [source, medium, channel] (medium '' for any)."""
    held: dict[str, list[list[str]]] = {site: [] for site in list_sites(client)}
    for stored in _current(client, None):
        if stored.site in held:
            held[stored.site].append([stored.rule.source, stored.rule.medium, stored.rule.channel])
    return held


def restore(client: Client, held: dict[str, list[list[str]]]) -> None:
    """Each site `held` names gets exactly its rules there, in that order (no version recorded);
    a site it does not name keeps its own, as for goals and exclusions. Every rule is validated
    before anything is written."""
    wanted: dict[str, list[ChannelRule]] = {}
    for site, rules in held.items():
        site = normalise(site)
        checked = [make_rule(source, channel, medium) for source, medium, channel in rules]
        keys = [_key(rule) for rule in checked]
        if len(set(keys)) != len(keys):
            raise InvalidChannelRule(f"{site}: two rules for the same source and medium")
        wanted[site] = checked
    current: dict[str, list[StoredRule]] = {}
    for stored in _current(client, None):
        current.setdefault(stored.site, []).append(stored)
    for site in sorted(wanted):
        _replace(client, site, wanted[site], current.get(site, []))


def replace_rules(client: Client, site: str, rules: tuple[ChannelRule, ...]) -> None:
    """Make the site's rules exactly `rules`, in that order (a what-if's --apply)."""
    site = registered(client, site, InvalidChannelRule)
    keys = [_key(rule) for rule in rules]
    if len(set(keys)) != len(keys):
        raise InvalidChannelRule(f"{site}: two rules for the same source and medium")
    if len(rules) > MAX_RULES:
        raise InvalidChannelRule(f"site: at most {MAX_RULES} channel rules per site")
    _replace(client, site, list(rules), stored_rules(client, site))
    definitions.record_rules(client, f"channel rules of {site} replaced: {len(rules)} rule(s)")


def propose(
    current: list[ChannelRule], changes: list[ChannelRule], dropped: list[str]
) -> tuple[ChannelRule, ...]:
    """The rules a what-if proposes: `current` without the rules for a source in `dropped` (any
    medium), each of `changes` replacing the rule for its source and medium in place, or appended."""
    drop = {checked_source(source) for source in dropped}
    proposed = [rule for rule in current if rule.source not in drop]
    for change in changes:
        at = next((i for i, rule in enumerate(proposed) if _key(rule) == _key(change)), None)
        if at is None:
            proposed.append(change)
        else:
            proposed[at] = change
    return tuple(proposed)


def _replace(client: Client, site: str, rules: list[ChannelRule], current: list[StoredRule]) -> None:
    keep = {_key(rule) for rule in rules}
    rows = [(rule, position, 0) for position, rule in enumerate(rules, start=1)]
    rows += [(stored.rule, stored.position, 1) for stored in current if _key(stored.rule) not in keep]
    if rows:
        _write(client, site, rows)


def _key(rule: ChannelRule) -> tuple[str, str]:
    return rule.source, rule.medium


def _describe(rule: ChannelRule) -> str:
    return f"source {rule.source!r}" + (f" and medium {rule.medium!r}" if rule.medium else "")


def _current(client: Client, site: str | None) -> list[StoredRule]:
    """The rules in force (of one site, or of all), by site then position."""
    rows = TABLE.newest(
        client,
        "site = {site:String}" if site is not None else "",
        {"site": site or ""},
        order=("site", "position", "source", "medium"),
    )
    return [
        StoredRule(site_, ChannelRule(source, channel, medium), int(position))
        for site_, source, medium, channel, position in rows
    ]


def _write(client: Client, site: str, rows: list[tuple[ChannelRule, int, int]]) -> None:
    """Insert (rule, position, removed) rows stamped after the site's newest row, so that the newest
    row of a key wins even when two changes fall in the same millisecond."""
    newest = client.query(
        f"SELECT max(changed_at) FROM {TABLE.name} WHERE site = {{site:String}}", parameters={"site": site}
    ).result_rows[0][0]
    stamp = datetime.now(UTC)
    if newest is not None and newest.replace(tzinfo=UTC) >= stamp:
        stamp = newest.replace(tzinfo=UTC) + timedelta(milliseconds=1)
    TABLE.write(
        client,
        [[site, rule.source, rule.medium, rule.channel, position] for rule, position, _ in rows],
        removed=[removed for _, _, removed in rows],
        changed_at=stamp,
    )
