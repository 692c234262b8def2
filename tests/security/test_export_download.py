"""The Overview's download link (`/export/events`, a signed-in session, dashboard/http_api/export.py)
against every kind of visitor, through the real server: the events of a site go only to someone
who may read that site. A member of another site and a shared link's visitor get none."""

from __future__ import annotations

import httpx
import pytest

from tests.security.conftest import PASSWORD, Tenants, opened_share, signed_in
from tests.security.conftest import browser as new_browser

pytestmark = pytest.mark.integration

RANGE = {"metric": "pageviews", "format": "csv", "from": "2026-11-10", "to": "2026-11-12"}


def download(browser: httpx.Client, site: str) -> httpx.Response:
    return browser.get("/export/events", params={"site": site, **RANGE})


def test_a_viewer_downloads_their_site_and_not_another(tenants: Tenants) -> None:
    viewer = signed_in(tenants.server, tenants.viewer_a.email, PASSWORD)
    assert download(viewer, tenants.site_a).status_code == 200
    refused = download(viewer, tenants.site_b)
    assert refused.status_code == 403 and refused.json()["error"].startswith("site:")


def test_another_sites_admin_gets_nothing_of_site_a(tenants: Tenants) -> None:
    admin_b = signed_in(tenants.server, tenants.admin_b.email, PASSWORD)
    assert download(admin_b, tenants.site_b).status_code == 200
    assert download(admin_b, tenants.site_a).status_code == 403


def test_a_shared_links_visitor_and_a_stranger_get_no_events(tenants: Tenants) -> None:
    shared = opened_share(tenants.server, tenants.share_a)
    answer = download(shared, tenants.site_a)
    assert answer.status_code in (302, 401, 403), answer.status_code
    assert "site," not in answer.text  # no CSV header row
    stranger = download(new_browser(tenants.server), tenants.site_a)
    assert stranger.status_code == 302 and stranger.headers["Location"].startswith("/login")
