"""User agent → browser, OS, device class; and bot detection.

Both use maintained registry packages: ua-parser with its monthly rules
(ua-parser-builtins) and the crawler-user-agents list. Results are cached: a site's
traffic repeats a small set of user agents, and an uncached parse costs ~0.5 ms.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import crawleruseragents
from ua_parser import parse

TABLET_HINTS = ("ipad", "tablet", "kindle", "silk/", "playbook", "nexus 7", "nexus 9", "nexus 10")
MOBILE_HINTS = ("mobi", "iphone", "ipod", "android", "windows phone", "opera mini", "blackberry")


@dataclass(frozen=True)
class Client:
    browser: str
    os: str
    device: str


@lru_cache(maxsize=16_384)
def classify(user_agent: str) -> Client:
    parsed = parse(user_agent)
    browser = parsed.user_agent.family if parsed.user_agent else ""
    os = parsed.os.family if parsed.os else ""
    return Client(browser=_known(browser), os=_known(os), device=device_class(user_agent))


def device_class(user_agent: str) -> str:
    """desktop / mobile / tablet, as Plausible reports it (Android without 'Mobile' is a tablet)."""
    lowered = user_agent.lower()
    if any(hint in lowered for hint in TABLET_HINTS) or ("android" in lowered and "mobile" not in lowered):
        return "tablet"
    if any(hint in lowered for hint in MOBILE_HINTS):
        return "mobile"
    return "desktop"


def _known(family: str) -> str:
    return "" if family in ("Other", "") else family


@lru_cache(maxsize=16_384)
def is_bot(user_agent: str) -> bool:
    """A crawler, scraper or HTTP library on the maintained list."""
    return crawleruseragents.is_crawler(user_agent)
