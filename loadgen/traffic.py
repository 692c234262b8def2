"""A model of realistic web traffic, deterministic for a seed.

Visitors arrive, each runs a session of a geometric number of page views with think
times between them; pages follow a Zipf popularity; visitors bring a referrer / campaign
(utm_*) mix, a user agent, screen width and preferred language from real-world mixes and a
client IP from some country's address space.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any
from urllib.parse import urlencode
from uuid import uuid4

from tally.event import PageViewEvent

PAGES = [
    "/", "/pricing", "/blog", "/docs", "/about", "/contact", "/signup", "/login", "/features",
    "/blog/event-sourcing", "/blog/kafka-at-home", "/blog/spark-streaming", "/docs/install",
    "/docs/api", "/docs/tracker", "/careers", "/changelog", "/privacy", "/terms", "/status",
]  # fmt: skip

REFERRERS = [
    ("", 0.45),
    ("https://www.google.com/", 0.25),
    ("https://news.ycombinator.com/", 0.08),
    ("https://www.reddit.com/r/selfhosted/", 0.07),
    ("https://duckduckgo.com/", 0.05),
    ("https://twitter.com/", 0.05),
    ("https://github.com/", 0.05),
]

# A session's campaign: the utm_* parameters of its landing page's URL.
_DIGEST = {"utm_source": "newsletter", "utm_medium": "email", "utm_campaign": "november-digest"}
_ADS = {"utm_source": "google", "utm_medium": "cpc", "utm_campaign": "brand"}
CAMPAIGNS: list[tuple[dict[str, str], float]] = [
    ({}, 0.8),
    ({**_DIGEST, "utm_content": "header-link"}, 0.05),
    ({**_DIGEST, "utm_content": "footer-link"}, 0.03),
    ({"utm_source": "twitter", "utm_medium": "social", "utm_campaign": "launch-week"}, 0.05),
    ({**_ADS, "utm_term": "self-hosted analytics"}, 0.04),
    ({**_ADS, "utm_term": "plausible alternative"}, 0.02),
    ({"utm_source": "producthunt", "utm_medium": "referral", "utm_campaign": "launch-week"}, 0.01),
]
# Accept-Language headers, as browsers send them (the collector keeps the first language).
LANGUAGES = [
    ("en-US,en;q=0.9", 0.45),
    ("de-DE,de;q=0.9,en;q=0.8", 0.15),
    ("en-GB,en;q=0.9", 0.12),
    ("fr-FR,fr;q=0.9", 0.1),
    ("ja-JP,ja;q=0.9", 0.06),
    ("pt-BR,pt;q=0.9", 0.06),
    ("es-ES,es;q=0.9", 0.06),
]

USER_AGENTS = [
    (
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
        "Chrome/130.0.0.0 Safari/537.36",
        0.38,
    ),
    (
        "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
        "Version/18.1 Mobile/15E148 Safari/604.1",
        0.22,
    ),
    (
        "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) "
        "Chrome/130.0.0.0 Mobile Safari/537.36",
        0.16,
    ),
    (
        "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) "
        "Version/18.1 Safari/605.1.15",
        0.12,
    ),
    ("Mozilla/5.0 (X11; Ubuntu; Linux x86_64; rv:132.0) Gecko/20100101 Firefox/132.0", 0.07),
    (
        "Mozilla/5.0 (iPad; CPU OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
        "Version/18.1 Mobile/15E148 Safari/604.1",
        0.05,
    ),
]

# First octets of address blocks registered to a few countries (for spread, not precision).
COUNTRY_PREFIXES = [
    ("3", 0.3),
    ("81", 0.15),
    ("5", 0.15),
    ("101", 0.1),
    ("177", 0.1),
    ("41", 0.1),
    ("2", 0.1),
]

SCREEN_WIDTHS = [(1920, 0.3), (390, 0.3), (1440, 0.1), (1366, 0.1), (412, 0.1), (820, 0.1)]


def site_names(count: int, demo: bool = False) -> list[str]:
    prefix = "demo" if demo else "site"
    return [f"{prefix}{index}.example.com" for index in range(1, count + 1)]


@dataclass(frozen=True)
class WeightedTable:
    """A mix table's values and cumulative weights, worked out once rather than at each draw;
    a draw is the one rng.choices(values, weights) makes."""

    values: tuple[Any, ...]
    cumulative: tuple[float, ...]

    @classmethod
    def of(cls, table: list[tuple[Any, float]]) -> WeightedTable:
        values, weights = zip(*table, strict=True)
        return cls(values, tuple(itertools.accumulate(weights)))

    def draw(self, rng: random.Random) -> Any:
        return rng.choices(self.values, cum_weights=self.cumulative)[0]


USER_AGENT_MIX, COUNTRY_MIX, SCREEN_MIX, LANGUAGE_MIX, REFERRER_MIX, CAMPAIGN_MIX = (
    WeightedTable.of(table)
    for table in (USER_AGENTS, COUNTRY_PREFIXES, SCREEN_WIDTHS, LANGUAGES, REFERRERS, CAMPAIGNS)
)


def zipf_weights(count: int, exponent: float = 1.1) -> list[float]:
    return [1 / (rank**exponent) for rank in range(1, count + 1)]


BOT_USER_AGENTS = [
    "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
    "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)",
    "Mozilla/5.0 (compatible; AhrefsBot/7.0; +http://ahrefs.com/robot/)",
    "python-requests/2.32.3",
]


class Kind(StrEnum):
    """Who sends a visit, which decides where it goes and whether it should be counted."""

    BROWSER = "browser"  # a person's page view: POST /api/event, counted
    BOT = "bot"  # a crawler: answered 202, dropped by the collector, never counted
    SCRAPER = "scraper"  # one client far over the rate limit: counted until blocked (429)
    LATE = "late"  # a page view delivered late through POST /api/events with its own ts


@dataclass(frozen=True)
class Visit:
    """One page view as the sender would send it, plus the headers it would carry."""

    kind: Kind
    site: str
    path: str
    url: str
    referrer: str
    user_agent: str
    client_ip: str
    screen_width: int
    think_time_s: float  # pause before the next page view of the same session
    delay_s: float = 0.0  # for late events: how far in the past the event happened
    accept_language: str = ""  # the browser's Accept-Language header

    def body(self) -> dict[str, object]:
        return {
            "n": "pageview",
            "d": self.site,
            "u": self.url,
            "r": self.referrer or None,
            "w": self.screen_width,
        }

    def batch_item(self, ts: datetime) -> dict[str, object]:
        return {
            "n": "pageview",
            "site": self.site,
            "url": self.url,
            "r": self.referrer or None,
            "w": self.screen_width,
            "ts": ts.isoformat(),
            "ip": self.client_ip,
            "user_agent": self.user_agent,
        }

    @property
    def visitor_key(self) -> str:
        """What the collector hashes into visitor_id (with the site and the day's salt)."""
        return f"{self.client_ip}|{self.user_agent}"


@dataclass(frozen=True)
class TrafficMix:
    bot_fraction: float = 0.05
    scrapers: int = 0
    scraper_fraction: float = 0.0
    late_fraction: float = 0.0
    late_delay_s: float = 600.0


@dataclass(frozen=True)
class Visitor:
    user_agent: str
    client_ip: str
    screen_width: int
    accept_language: str


class TrafficModel:
    def __init__(
        self,
        sites: list[str],
        seed: int = 1,
        visitors: int = 0,
        mix: TrafficMix = TrafficMix(),
        mean_pages_per_session: float = 3.0,
    ) -> None:
        self.sites = sites
        self.rng = random.Random(seed)
        self.mix = mix
        self.continue_probability = 1 - 1 / mean_pages_per_session
        self.page_weights = zipf_weights(len(PAGES))
        # A bounded pool of people (0: every session a new one).
        self.visitor_pool = [self._new_visitor() for _ in range(visitors)]
        self.scraper_ips = [f"198.18.{index // 250}.{1 + index % 250}" for index in range(mix.scrapers)]

    def _new_visitor(self) -> Visitor:
        rng = self.rng
        host = ".".join(str(rng.randint(1, 254)) for _ in range(3))
        return Visitor(
            user_agent=USER_AGENT_MIX.draw(rng),
            client_ip=f"{COUNTRY_MIX.draw(rng)}.{host}",
            screen_width=SCREEN_MIX.draw(rng),
            accept_language=LANGUAGE_MIX.draw(rng),
        )

    def _page(self) -> str:
        return self.rng.choices(PAGES, self.page_weights)[0]

    def one_off(self) -> Visit | None:
        """A visit that is not part of a person's session (bot, scraper, late), or None."""
        rng, mix = self.rng, self.mix
        draw = rng.random()
        if draw < mix.bot_fraction:
            return self._single(
                Kind.BOT, rng.choice(BOT_USER_AGENTS), f"66.249.{rng.randint(64, 95)}.{rng.randint(1, 254)}"
            )
        draw -= mix.bot_fraction
        if self.scraper_ips and draw < mix.scraper_fraction:
            return self._single(
                Kind.SCRAPER, "Mozilla/5.0 (X11; Linux x86_64) Scraper/1.0", rng.choice(self.scraper_ips)
            )
        draw -= mix.scraper_fraction
        if draw < mix.late_fraction:
            visitor = self._new_visitor()
            return self._single(Kind.LATE, visitor.user_agent, visitor.client_ip, delay_s=mix.late_delay_s)
        return None

    def _single(self, kind: Kind, user_agent: str, client_ip: str, delay_s: float = 0.0) -> Visit:
        site, path = self.rng.choice(self.sites), self._page()
        return Visit(kind, site, path, f"https://{site}{path}", "", user_agent, client_ip, 1920, 0.0, delay_s)

    def session(self) -> Iterator[Visit]:
        """The page views of one person's session, in order."""
        rng = self.rng
        site = rng.choice(self.sites)
        visitor = rng.choice(self.visitor_pool) if self.visitor_pool else self._new_visitor()
        referrer = REFERRER_MIX.draw(rng)
        campaign = CAMPAIGN_MIX.draw(rng)
        first = True
        while True:
            path = self._page()
            query = f"?{urlencode(campaign)}" if first and campaign else ""
            yield Visit(
                kind=Kind.BROWSER,
                site=site,
                path=path,
                url=f"https://{site}{path}{query}",
                referrer=referrer if first else f"https://{site}/",
                user_agent=visitor.user_agent,
                client_ip=visitor.client_ip,
                screen_width=visitor.screen_width,
                think_time_s=rng.expovariate(1 / 20),
                accept_language=visitor.accept_language,
            )
            first = False
            if rng.random() > self.continue_probability:
                return


# (device, browser, os) as the collector's enrichment names them (Plausible's names,
# storage/client_names.py): for events built already enriched (benchmarks, tests), which skip
# the collector.
PARSED_CLIENTS = [
    ("desktop", "Chrome", "Windows"),
    ("desktop", "Firefox", "GNU/Linux"),
    ("desktop", "Safari", "Mac"),
    ("mobile", "Safari", "iOS"),
    ("mobile", "Chrome", "Android"),
    ("tablet", "Safari", "iOS"),
]


def bulk_events(site: str, count: int) -> list[PageViewEvent]:
    """`count` page views of one site, now, over 50 pages and 5,000 visitors: volume, not realism.

    For backlogs (benchmarks, tests) where only the number of events matters; the visit model
    above is what traffic that should look real goes through.
    """
    now = datetime.now(UTC)
    return [
        PageViewEvent(
            event_id=uuid4(),
            site=site,
            ts=now,
            received_at=now,
            url=f"https://{site}/p{i % 50}",
            path=f"/p{i % 50}",
            visitor_id=f"{i % 5000:016x}",
            ip_hash=f"{i % 5000:016x}",
        )
        for i in range(count)
    ]
