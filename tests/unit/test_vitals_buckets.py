"""The Web Vitals' fixed histogram buckets (storage/queries/vitals.py): the materialized view
counts in the same buckets as the archive scan, and a percentile is read off them as defined."""

from __future__ import annotations

import re
from itertools import pairwise

from storage.queries.vitals import BOUNDS, LARGEST, THRESHOLDS, percentile, summary
from tally.settings import PROJECT_ROOT

MIGRATION = PROJECT_ROOT / "storage" / "migrations" / "0070_vitals_quarter.sql"


def test_the_migrations_bounds_are_the_reports() -> None:
    # The view's SELECT and the backfill's: each writes the bounds out as a literal array.
    literals = re.findall(r"measurement\.2\), \[([\d,\s]+)\]", MIGRATION.read_text())
    assert len(literals) == 2
    for literal in literals:
        assert [int(bound) for bound in literal.split(",")] == BOUNDS


def test_buckets_are_at_most_5_percent_wide_and_every_threshold_is_a_bound() -> None:
    assert BOUNDS[:41] == list(range(41))  # exact to the unit up to 40
    assert all(upper <= lower * 1.05 for lower, upper in pairwise(BOUNDS[40:]))
    assert BOUNDS[-1] == LARGEST
    assert {bound for pair in THRESHOLDS.values() for bound in pair} <= set(BOUNDS)


def test_a_percentile_is_the_bound_of_the_bucket_holding_the_nearest_rank() -> None:
    counts = {100: 1, 2500: 2, 2544: 1}  # four page views: ranks 1, 2-3, 4
    assert [percentile(counts, p) for p in (25, 50, 75, 76, 95)] == [100, 2500, 2500, 2544, 2544]


def test_ratings_follow_googles_thresholds_and_cls_reads_in_its_unit() -> None:
    # CLS 0.1 is good, 0.101 to 0.25 needs improvement, above 0.25 poor (thousandths here).
    cls = summary("cls", {100: 2, 101: 1, 250: 1, 254: 4})
    assert (cls.measured, cls.good, cls.needs_improvement, cls.poor) == (8, 25.0, 25.0, 50.0)
    assert (cls.p50, cls.p75, cls.p95) == (0.25, 0.254, 0.254)  # ranks 4, 6 and 8 of 8
    lcp = summary("lcp", {2500: 1, 4000: 1, 4139: 1})
    assert (lcp.good, lcp.needs_improvement, lcp.poor, lcp.p50) == (33.3, 33.3, 33.3, 4000)
