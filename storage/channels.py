"""Acquisition channels: which kind of traffic a session is, after GA4's default channel grouping.

A session's channel is derived at read time from its first page view's referrer domain and UTM
fields (never stored), so every source that holds those columns answers alike. The rules, in
order, the first that holds naming the channel (source = utm_source, else the referrer domain,
lower-cased; medium = utm_medium, lower-cased):

1. Direct: no source and no medium.
2. Paid Search: a search engine's source and a paid medium (PAID_MEDIUM: cpc, ppc, paid…,
   anything with "cp" in it, retargeting).
3. Paid Social: a social network's source and a paid medium.
4. Display: medium display, banner, expandable, interstitial or cpm.
5. Paid Other: any other paid medium.
6. Organic Social: a social network's source, or a social medium (social, social-network,
   social-media, sm, "social network", "social media").
7. Organic Search: a search engine's source, or medium organic.
8. Email: source or medium email, e-mail, e_mail, "e mail".
9. Affiliates: medium affiliate.
10. Referral: medium referral, app or link, or a referrer with no medium.
11. Unassigned: anything else (a UTM source Tally does not know, with no medium).

A source belongs to a search engine or social network when it is one of the names below, or a
domain whose name is one of them, with any subdomains before and up to two short labels of a
top-level domain after (www.google.co.uk, l.facebook.com, news.ycombinator.com, bsky.app).
The lists are data: extend them here.

A site's own channel rules (storage/channel_rules.py, `tally channels`) are checked first, in
order: a rule names a source, matched as a name or domain as above (a rule for partner.io holds
for www.partner.io and partner.io.uk too), optionally a medium (equal, lower-cased), and the
channel, a default one or the owner's own name. The first rule that holds wins; none holding, the
default grouping above decides. The rules reach the SQL as query parameters (rules_parameters:
`channel_rules`, each rule's pattern, medium and channel; `channel_rules_patterns`, the patterns
alone), never as text of the SQL, so the expression is the same for every site and a what-if
passes proposed rules the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from storage.literals import quote_string

CHANNEL = "channel"  # the dimension's name in the API and the dashboard
SEARCH_ENGINES = (
    "google", "bing", "yahoo", "duckduckgo", "baidu", "yandex", "ecosia", "qwant", "startpage",
    "search.brave", "kagi", "naver", "seznam", "sogou", "daum", "ask", "aol", "msn", "dogpile",
    "mojeek", "metager", "swisscows",
)  # fmt: skip
SOCIAL_NETWORKS = (
    "facebook", "fb", "instagram", "twitter", "t.co", "x", "linkedin", "lnkd.in", "reddit",
    "pinterest", "youtube", "tiktok", "tumblr", "quora", "vk", "weibo", "threads", "bsky",
    "mastodon.social", "news.ycombinator", "discord", "t.me", "telegram", "whatsapp", "snapchat",
    "flickr", "twitch", "xing", "meetup", "producthunt",
)  # fmt: skip
PAID_MEDIUM = r"^(.*cp.*|ppc|retargeting|paid.*)$"
DISPLAY_MEDIA = ("display", "banner", "expandable", "interstitial", "cpm")
SOCIAL_MEDIA = ("social", "social-network", "social-media", "sm", "social network", "social media")
EMAIL_VALUES = ("email", "e-mail", "e_mail", "e mail")
REFERRAL_MEDIA = ("referral", "app", "link")
CHANNELS = (
    "Direct", "Paid Search", "Paid Social", "Display", "Paid Other", "Organic Social",
    "Organic Search", "Email", "Affiliates", "Referral", "Unassigned",
)  # fmt: skip


# The query parameter holding the rules checked first (rules_parameter), as channel_sql names it.
RULES_PARAMETER = "channel_rules"
PATTERNS_SUFFIX = "_patterns"


@dataclass(frozen=True)
class ChannelRule:
    """Sessions from `source` (a name or domain) [with medium `medium`] belong to `channel`."""

    source: str
    channel: str
    medium: str = ""


def domain_pattern(names: tuple[str, ...]) -> str:
    """An RE2 pattern matching a source that is one of `names`, as a name or a domain."""
    alternatives = "|".join(re.escape(name) for name in names)
    return rf"^(?:[a-z0-9-]+\.)*(?:{alternatives})(?:\.[a-z]{{2,3}}){{0,2}}$"


def _in(expression: str, values: tuple[str, ...]) -> str:
    return f"{expression} IN ({', '.join(quote_string(value) for value in values)})"


def rules_parameters(rules: tuple[ChannelRule, ...], parameter: str = RULES_PARAMETER) -> dict[str, object]:
    """The query parameters channel_sql(…, parameter) reads for `rules`: `parameter`, each rule's
    (source pattern, medium, channel), and `parameter`_patterns, the patterns alone."""
    patterns = [domain_pattern((rule.source,)) for rule in rules]
    return {
        parameter: [
            (pattern, rule.medium, rule.channel) for pattern, rule in zip(patterns, rules, strict=True)
        ],
        f"{parameter}{PATTERNS_SUFFIX}": patterns,
    }


def source_sql(referrer: str, utm_source: str) -> str:
    """A session's source, as the rules read it: utm_source, else the referrer domain, lower-cased."""
    return f"lower(if({utm_source} != '', {utm_source}, {referrer}))"


def channel_sql(referrer: str, utm_source: str, utm_medium: str, parameter: str = RULES_PARAMETER) -> str:
    """The ClickHouse expression naming the channel of the columns given (names from the
    query layer's fixed tables; every constant here is quoted, and the rules checked first are
    the query parameters of `parameter` (rules_parameters): no user value is part of the text)."""
    source = source_sql(referrer, utm_source)
    medium = f"lower({utm_medium})"
    rules = f"{{{parameter}:Array(Tuple(String, String, String))}}"
    # The first rule whose source pattern matches and whose medium, if it names one, is equal.
    # The patterns, a constant array, go to multiMatchAllIndices (one vectorscan pass for all of
    # them): a lambda over the rules would copy them into every session's row (a month's
    # breakdown with 10 rules: 263 ms against 488 ms; docs/architecture.md).
    patterns = f"{{{parameter}{PATTERNS_SUFFIX}:Array(String)}}"
    medium_of = f"arrayElement({rules}, i).2"
    first = (
        f"arrayFirst(i -> {medium_of} = '' OR {medium_of} = {medium}, "
        f"arraySort(multiMatchAllIndices({source}, {patterns})))"
    )
    search = f"match({source}, {quote_string(domain_pattern(SEARCH_ENGINES))})"
    social = f"match({source}, {quote_string(domain_pattern(SOCIAL_NETWORKS))})"
    paid = f"match({medium}, {quote_string(PAID_MEDIUM)})"
    email = f"({_in(source, EMAIL_VALUES)} OR {_in(medium, EMAIL_VALUES)})"
    defaults = [
        (f"{source} = '' AND {medium} = ''", "Direct"),
        (f"{search} AND {paid}", "Paid Search"),
        (f"{social} AND {paid}", "Paid Social"),
        (_in(medium, DISPLAY_MEDIA), "Display"),
        (paid, "Paid Other"),
        (f"{social} OR {_in(medium, SOCIAL_MEDIA)}", "Organic Social"),
        (f"{search} OR {medium} = 'organic'", "Organic Search"),
        (email, "Email"),
        (f"{medium} = 'affiliate'", "Affiliates"),
        (f"{_in(medium, REFERRAL_MEDIA)} OR ({referrer} != '' AND {medium} = '')", "Referral"),
    ]
    branches = ", ".join(f"{condition}, {quote_string(name)}" for condition, name in defaults)
    return f"if({first} > 0, arrayElement({rules}, {first}).3, multiIf({branches}, 'Unassigned'))"
