"""The traffic model: deterministic for a seed, with the mix it was asked for."""

from __future__ import annotations

from collections import Counter
from urllib.parse import parse_qs, urlsplit

from loadgen.runner import VisitSchedule
from loadgen.traffic import PAGES, Kind, TrafficMix, TrafficModel


def visits(seed: int, count: int = 2000, **mix: float) -> list:
    schedule = VisitSchedule(
        TrafficModel(["a.example.com", "b.example.com"], seed=seed, visitors=50, mix=TrafficMix(**mix))
    )
    return [schedule.next_visit(now=index * 0.1) for index in range(count)]


def test_same_seed_same_traffic_other_seed_other_traffic() -> None:
    assert visits(seed=3) == visits(seed=3)
    assert visits(seed=3) != visits(seed=4)


def test_mix_of_bots_scrapers_and_late_events() -> None:
    kinds = Counter(
        v.kind for v in visits(seed=1, bot_fraction=0.1, scrapers=2, scraper_fraction=0.2, late_fraction=0.05)
    )
    assert 0.07 < kinds[Kind.BOT] / 2000 < 0.13
    assert 0.16 < kinds[Kind.SCRAPER] / 2000 < 0.24
    assert 0.03 < kinds[Kind.LATE] / 2000 < 0.07


def test_visitor_pool_bounds_distinct_people_and_pages_follow_zipf() -> None:
    browsing = [v for v in visits(seed=1, bot_fraction=0.0) if v.kind is Kind.BROWSER]
    assert len({v.visitor_key for v in browsing}) <= 50
    by_page = Counter(v.path for v in browsing)
    assert by_page[PAGES[0]] > by_page[PAGES[5]] > by_page[PAGES[-1]]


def test_sessions_carry_campaigns_languages_and_screen_sizes_for_every_dashboard_panel() -> None:
    browsing = [v for v in visits(seed=1, bot_fraction=0.0) if v.kind is Kind.BROWSER]
    landing_queries = [parse_qs(urlsplit(v.url).query) for v in browsing]
    for parameter in ("utm_source", "utm_medium", "utm_campaign", "utm_content", "utm_term"):
        assert len({q[parameter][0] for q in landing_queries if parameter in q}) >= 2, parameter
    assert len({v.accept_language.split(",")[0] for v in browsing}) >= 4
    # Widths in each screen-size class (Mobile < 576 px, Tablet < 992, Laptop < 1440, Desktop).
    assert {sum(v.screen_width >= edge for edge in (576, 992, 1440)) for v in browsing} == {0, 1, 2, 3}


def test_latency_percentiles_count_accepted_answers_only() -> None:
    """A refused request (429 here, 400 or 503 alike) answers at its own speed: only the 202s'
    times are the collector's latency."""
    import asyncio

    from loadgen.ground_truth import GroundTruth
    from loadgen.runner import RunSummary, Sender
    from loadgen.wire import Answer

    answers = iter([Answer(429, b"{}"), Answer(202, b""), Answer(503, b"{}")])

    class Collector:
        async def post(self, path: str, body: object, headers: dict[str, str]) -> Answer:
            return next(answers)

    summary = RunSummary()
    sender = Sender(Collector(), "http://collector", "key", summary, GroundTruth())  # type: ignore[arg-type]
    for visit in visits(seed=5, count=3, bot_fraction=0, scrapers=0, late_fraction=0):
        asyncio.run(sender.send([visit], intended=0.0, batch=False))
    assert summary.statuses == Counter({429: 1, 202: 1, 503: 1})
    assert len(summary.latencies_s) == 1
