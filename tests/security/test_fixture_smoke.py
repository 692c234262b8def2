"""The attacker's setting itself: each role reaches the server as a browser or a script would."""

from __future__ import annotations

import httpx
import pytest

from tests.security.conftest import PASSWORD, Tenants, bearer, opened_share, signed_in

pytestmark = pytest.mark.integration


def test_each_tenant_signs_in_and_reads_its_own_site(tenants: Tenants) -> None:
    server = tenants.server
    # Each session is kept: the page's layout answers instead of "sign in first".
    for browser in (
        signed_in(server),  # the operator
        signed_in(server, tenants.viewer_a.email, PASSWORD),
        opened_share(server, tenants.share_a),
    ):
        assert browser.get("/_dash-layout").status_code == 200
        browser.close()
    stats = httpx.get(
        f"{server.url}/api/v1/stats/aggregate",
        params={"site": tenants.site_a, "from": "2026-01-01T00:00:00Z", "to": "2026-01-02T00:00:00Z"},
        headers=bearer(tenants.viewer_a.read_key),
        timeout=30,
    )
    assert stats.status_code == 200, stats.text
