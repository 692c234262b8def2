"""The Settings view's upload, written by Dash's own renderer, is recognised as the upload by the
dashboard's body limit (tests/security/test_request_bodies.py has the rest of the limits). Here
with the browser tests, early in the run: late in a full run the operator's page was twice
missing its header's pickers and the upload (the closing note of stop 42; not understood yet)."""

from __future__ import annotations

import io
import os
import zipfile
from datetime import UTC, datetime, timedelta

import pytest
from playwright.async_api import Browser, expect

from tally.settings import Settings
from tests.browser.test_dashboard import DESKTOP, archive, sign_in_to_views
from tests.fixtures.events import page_view
from tests.security.conftest import Tenants, tenants  # noqa: F401  # tenants: the fixture

MiB = 2**20


@pytest.mark.browser
@pytest.mark.usefixtures("patient_expectations")
async def test_a_3_mib_export_uploaded_in_the_browser_still_reaches_the_import(
    browser: Browser,
    tenants: Tenants,  # noqa: F811
    dashboard_settings: Settings,
) -> None:
    """Dash's own renderer writes the upload callback's body: the limit recognises it as the upload."""
    archive(
        dashboard_settings, [page_view(tenants.site_a, "v", datetime.now(UTC) - timedelta(minutes=5), "/")]
    )
    export = io.BytesIO()
    with zipfile.ZipFile(export, "w", zipfile.ZIP_STORED) as zipped:
        zipped.writestr("imported_visitors_20260101_20260101.csv", "date,visitors\n2026-01-01,1\n")
        zipped.writestr("padding.bin", os.urandom(3 * MiB))  # incompressible: a 3 MiB file
    page = await browser.new_page(viewport=DESKTOP)
    # Only the upload callback matters here, whichever site is picked: late in the full run the
    # header's pickers were twice missing on this page (issue note, stop 42), so it is not waited for.
    await sign_in_to_views(page, tenants.server)
    status = page.locator("#import-status")
    upload = page.locator("#import-upload input[type=file]")
    await upload.set_input_files(
        {"name": "padded.zip", "mimeType": "application/zip", "buffer": export.getvalue()}
    )
    # Whatever the import makes of the file, the callback ran and answered (a 413 shows nothing).
    await expect(status).not_to_be_empty()
    assert "body" not in (await status.inner_text())
