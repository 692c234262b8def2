"""The collector's CPU per request without the network, Kafka or a load generator sharing
the machine: the ASGI app driven in-process, next to the bare Starlette app (bench/bare_asgi.py)
driven the same way. `python -m bench.collector_cpu [--rounds=N] [--profile]`.

What it leaves out is the same for both apps (uvicorn's HTTP parsing, the socket), and the
log is an in-memory sink that partitions and encodes as the real one does but acks at once:
so the ratio is the app's own work against a bare app's, the part of issue 34 the collector
code decides. The traffic mirrors bench/wrk/traffic.lua: 90 % common user agents, a long
tail of new ones, client IPs varied (a fifth IPv6) through a trusted proxy, referrers, UTMs.
CPU time is the process's (`time.process_time`), so other load on the machine moves it little.
"""

from __future__ import annotations

import asyncio
import cProfile
import json
import os
import pstats
import random
import sys
import time
import uuid
from collections import deque
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import orjson

from bench.bare_asgi import app as bare_app
from collector.app import CollectorParts, build_app, load_lookups
from collector.blocklist import Blocklist
from collector.event_log import LogRecord, partition_for
from collector.geo import CountryLookup
from collector.known_sites import KnownSites
from collector.salts import salt_holding, todays_periods
from tally.settings import Settings

SITE = "bench.example.com"
PARTITIONS = 6
COMMON_USER_AGENTS = [
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/131.0.0.0 Safari/537.36",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) "
    "Version/18.1 Safari/605.1.15",
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
    "Version/18.1.1 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (Linux; Android 14; SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/26.0 "
    "Chrome/122.0.0.0 Mobile Safari/537.36",
]
PATHS = ["/", "/", "/", "/pricing", "/blog", "/docs", "/about", "/signup", "/docs/api", "/changelog"]
REFERRERS = ["", "", "", "", "https://www.google.com/", "https://t.co/x1", "https://news.ycombinator.com/"]
UTMS = ["", "", "", "", "", "", "", "?utm_source=newsletter&utm_medium=email&utm_campaign=launch", "?ref=ph"]

# A request's headers and body.
Request = tuple[list[tuple[bytes, bytes]], bytes]
Requests = list[Request]


class InMemoryLog:
    """Partitions and keeps the records; acks at once (the broker's share is not the app's)."""

    def __init__(self) -> None:
        self.appended = 0

    async def start(self) -> None: ...
    async def stop(self) -> None: ...

    async def append(self, records: Sequence[LogRecord]) -> None:
        for key, _value in records:
            partition_for(key, PARTITIONS)
        self.appended += len(records)


def user_agent(rng: random.Random) -> str:
    if rng.random() < 0.9:
        return rng.choice(COMMON_USER_AGENTS)
    return (
        f"Mozilla/5.0 (Linux; Android {rng.randint(10, 15)}; SM-A{rng.randint(100, 999)}B "
        f"Build/UP1A.{rng.randint(0, 999999):06d}) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 "
        f"Chrome/{rng.randint(118, 131)}.0.{rng.randint(5000, 6800)}.{rng.randint(1, 200)} "
        "Mobile Safari/537.36"
    )


def client_ip(rng: random.Random) -> str:
    if rng.random() < 0.8:
        return f"{rng.randint(1, 223)}.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}"
    return f"2001:db8:{rng.randint(0, 65535):x}:{rng.randint(0, 65535):x}::{rng.randint(1, 65535):x}"


def pageview(rng: random.Random) -> dict[str, object]:
    return {
        "n": "pageview",
        "d": SITE,
        "u": f"https://{SITE}{rng.choice(PATHS)}{rng.choice(UTMS)}",
        "r": rng.choice(REFERRERS),
        "w": rng.choice([390, 1440, 1920, 1366]),
        "i": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
    }


class Visitors:
    """Who sends each event: a new client (address and user agent), or with probability
    `returning` one of the last RECENT (a page view's engagement event, the visit's next page)."""

    RECENT = 2_000

    def __init__(self, returning: float, rng: random.Random) -> None:
        self.returning = returning
        self.rng = rng
        self.recent: deque[tuple[str, str]] = deque(maxlen=self.RECENT)

    def next(self) -> tuple[str, str]:
        if self.recent and self.rng.random() < self.returning:
            return self.rng.choice(self.recent)
        visitor = (client_ip(self.rng), user_agent(self.rng))
        self.recent.append(visitor)
        return visitor


def server_event(visitors: Visitors) -> dict[str, object]:
    ip, agent = visitors.next()
    return {**pageview(visitors.rng), "ip": ip, "user_agent": agent}


def single_request(visitors: Visitors) -> Request:
    ip, agent = visitors.next()
    headers = [
        (b"content-type", b"text/plain"),
        (b"user-agent", agent.encode()),
        (b"accept-language", b"en-GB,en;q=0.9"),
        (b"x-forwarded-for", ip.encode()),
    ]
    return headers, orjson.dumps(pageview(visitors.rng))


def batch_request(visitors: Visitors, per_batch: int, ingest_key: str) -> Request:
    headers = [(b"content-type", b"application/json"), (b"authorization", f"Bearer {ingest_key}".encode())]
    return headers, orjson.dumps([server_event(visitors) for _ in range(per_batch)])


async def drive(app: Any, path: str, requests: Requests) -> dict[int, int]:
    """Each request through the app as uvicorn would hand it over; the statuses answered."""
    statuses: dict[int, int] = {}
    for headers, body in requests:
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": [*headers, (b"content-length", str(len(body)).encode())],
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 8080),
        }
        sent = False

        async def receive(body: bytes = body) -> dict[str, object]:
            nonlocal sent
            if sent:
                return {"type": "http.disconnect"}
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: dict[str, object]) -> None:
            if message["type"] == "http.response.start":
                status = int(message["status"])  # type: ignore[arg-type]
                statuses[status] = statuses.get(status, 0) + 1

        await app(scope, receive, send)
    return statuses


def collector_app(settings: Settings) -> Any:
    salts = salt_holding({period: os.urandom(32) for period in todays_periods(datetime.now(UTC).date())})
    sites = KnownSites(client=None)  # type: ignore[arg-type]
    sites._domains = frozenset({SITE})
    parts = CollectorParts(
        event_log=InMemoryLog(),
        salts=salts,
        sites=sites,
        blocklist=Blocklist(settings),
        countries=CountryLookup(),
    )
    load_lookups(parts)
    return build_app(settings, parts)


ROUNDS = 3


def cpu_us_per_request(
    app: Any, path: str, requests: Requests, profile: cProfile.Profile | None = None
) -> tuple[float, dict[int, int]]:
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(drive(app, path, requests[:200]))  # warm-up
        started = time.process_time()
        if profile:
            profile.enable()
        statuses = loop.run_until_complete(drive(app, path, requests[200:]))
        if profile:
            profile.disable()
        spent = time.process_time() - started
    finally:
        loop.close()
    if set(statuses) != {202}:
        raise RuntimeError(f"{path}: answered {statuses}, not only 202")
    return spent * 1e6 / (len(requests) - 200), statuses


def main(argv: list[str]) -> None:
    """Each traffic mix's figures, the least CPU of the rounds (other load only adds)."""
    profiling = "--profile" in argv
    rounds = next((int(arg.removeprefix("--rounds=")) for arg in argv if arg.startswith("--rounds=")), ROUNDS)
    settings = Settings(trusted_proxies="127.0.0.1/32", ingest_key="bench-ingest-key")
    load_before = os.getloadavg()[0]
    report: dict[str, object] = {}
    for mix, returning in (("every_event_a_new_client", 0.0), ("returning_visitors_80pct", 0.8)):
        figures: dict[str, list[float]] = {"bare": [], "single": [], "batch": []}
        for round_ in range(rounds):
            # A new app and new clients each round (the module-level caches keep the common
            # user agents and pages, as a running collector does).
            app = collector_app(settings)
            visitors = Visitors(returning, random.Random(34 + round_))
            singles = [single_request(visitors) for _ in range(20_200)]
            batches = [batch_request(visitors, 100, "bench-ingest-key") for _ in range(400)]
            profile = cProfile.Profile() if profiling and round_ == rounds - 1 else None
            figures["bare"].append(cpu_us_per_request(bare_app, "/api/event", singles)[0])
            figures["single"].append(cpu_us_per_request(app, "/api/event", singles, profile)[0])
            figures["batch"].append(cpu_us_per_request(app, "/api/events", batches, profile)[0] / 100)
            if profile:
                print(f"== {mix} ==")
                pstats.Stats(profile).sort_stats("tottime").print_stats(25)
        bare, single, batch = (min(values) for values in figures.values())
        report[mix] = {
            "bare_starlette_cpu_us_per_request": round(bare, 1),
            "collector_single_cpu_us_per_request": round(single, 1),
            "single_share_of_bare": round(bare / single, 3),
            "collector_batch_100_cpu_us_per_event": round(batch, 2),
            "batch_events_per_cpu_s": round(1e6 / batch),
            "rounds_us": {name: [round(value, 1) for value in values] for name, values in figures.items()},
        }
    report["load_average_1m"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main(sys.argv[1:])
