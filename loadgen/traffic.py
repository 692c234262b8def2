"""A model of realistic web traffic, deterministic for a seed.

Visitors arrive, each runs a session of a geometric number of page views with think
times between them; pages follow a Zipf popularity; visitors bring a referrer / UTM mix,
a user agent from a real-world mix and a client IP from some country's address space.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

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

UTM_SOURCES = [("", 0.8), ("newsletter", 0.1), ("twitter", 0.05), ("producthunt", 0.05)]

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

SCREEN_WIDTHS = [(1920, 0.35), (390, 0.3), (1440, 0.15), (412, 0.1), (820, 0.1)]


def site_names(count: int, demo: bool = False) -> list[str]:
    prefix = "demo" if demo else "site"
    return [f"{prefix}{index}.example.com" for index in range(1, count + 1)]


def _weighted(rng: random.Random, choices: list[tuple[object, float]]) -> object:
    values, weights = zip(*choices, strict=True)
    return rng.choices(values, weights)[0]


def zipf_weights(count: int, exponent: float = 1.1) -> list[float]:
    return [1 / (rank**exponent) for rank in range(1, count + 1)]


@dataclass(frozen=True)
class Visit:
    """One page view as the browser would send it, plus the headers it would carry."""

    site: str
    url: str
    referrer: str
    user_agent: str
    client_ip: str
    screen_width: int
    think_time_s: float  # pause before the next page view of the same session

    def body(self) -> dict[str, object]:
        return {
            "n": "pageview",
            "d": self.site,
            "u": self.url,
            "r": self.referrer or None,
            "w": self.screen_width,
        }


class TrafficModel:
    def __init__(self, sites: list[str], seed: int = 1, mean_pages_per_session: float = 3.0) -> None:
        self.sites = sites
        self.rng = random.Random(seed)
        self.continue_probability = 1 - 1 / mean_pages_per_session
        self.page_weights = zipf_weights(len(PAGES))

    def session(self) -> Iterator[Visit]:
        """The page views of one visitor's session, in order."""
        rng = self.rng
        site = rng.choice(self.sites)
        user_agent = _weighted(rng, USER_AGENTS)
        host = ".".join(str(rng.randint(1, 254)) for _ in range(3))
        client_ip = f"{_weighted(rng, COUNTRY_PREFIXES)}.{host}"
        screen_width = _weighted(rng, SCREEN_WIDTHS)
        referrer = _weighted(rng, REFERRERS)
        utm_source = _weighted(rng, UTM_SOURCES)
        first = True
        while True:
            path = rng.choices(PAGES, self.page_weights)[0]
            query = f"?utm_source={utm_source}" if first and utm_source else ""
            yield Visit(
                site=site,
                url=f"https://{site}{path}{query}",
                referrer=referrer if first else f"https://{site}/",
                user_agent=user_agent,
                client_ip=client_ip,
                screen_width=screen_width,
                think_time_s=rng.expovariate(1 / 20),
            )
            first = False
            if rng.random() > self.continue_probability:
                return
