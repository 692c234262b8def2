"""Issue 29, finding 8: an import's cost was bounded by what the file unpacks to, not by Tally.

A zip of a few hundred KiB unpacking to 200 MiB of one line without a header cost gigabytes
before it was refused (the member was decoded and split into numbered lines first), and the
dashboard's upload had no size limit of the server's own. Imports now stream: the header is
read and checked first, a line is refused past 64 KiB before it is decoded, and the bytes
unpacked are counted as they are read; the dashboard refuses an upload over its limit before
decoding it. What the attacker sees: a quick refusal naming the file, a process whose peak
memory stays small (ru_maxrss of the `tally import` that reads the zip), nothing imported.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import httpx
import pytest

from storage import imports
from storage.client import connect
from tally.settings import PROJECT_ROOT, Settings
from tests.security.conftest import Tenants, bearer, signed_in

pytestmark = pytest.mark.integration

MEMBER = "imported_visitors_20260101_20261231.csv"
UNPACKED = imports.MAX_FILE_BYTES  # as much as the declared-size check lets through
PEAK_BUDGET_KIB = 300 * 1024


@pytest.fixture(scope="module")
def one_line_zip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Plausible's file name, and in it 200 MiB of one header-less line."""
    path = tmp_path_factory.mktemp("bomb") / "export.zip"
    chunk = b"a" * 2**20
    with (
        zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as archive,
        archive.open(MEMBER, "w") as member,
    ):
        for _ in range(UNPACKED // len(chunk)):
            member.write(chunk)
    assert path.stat().st_size < 300 * 1024  # a small upload
    return path


def test_a_small_zip_of_one_huge_line_is_refused_through_the_api_naming_the_file(
    tenants: Tenants, one_line_zip: Path
) -> None:
    answer = httpx.post(
        f"{tenants.server.url}/api/v1/imports",
        params={"site": tenants.site_a, "origin": "plausible", "name": "export.zip"},
        content=one_line_zip.read_bytes(),
        headers=bearer(tenants.owner_a.manage_key),
        timeout=120,
    )
    assert answer.status_code == 400, answer.text[:300]
    assert answer.json()["error"] == f"body: {MEMBER}: row 1: longer than 64 KiB (not an export's CSV)"


def test_importing_it_with_the_cli_peaks_well_under_the_memory_budget(
    tenants: Tenants, dashboard_settings: Settings, one_line_zip: Path
) -> None:
    """The peak resident memory of the `tally import` process itself (its own child of a small
    wrapper, so nothing else the test ran counts)."""
    wrapper = (
        "import resource, subprocess, sys\n"
        "command = [sys.executable, '-m', 'ops.cli', *sys.argv[1:]]\n"
        "done = subprocess.run(command, capture_output=True, text=True)\n"
        "print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
        "sys.stderr.write(done.stderr)\n"
    )
    args = ["import", tenants.site_a, str(one_line_zip), "--from", "plausible"]
    done = subprocess.run(
        [sys.executable, "-c", wrapper, *args],
        cwd=PROJECT_ROOT,
        env=os.environ | dashboard_settings.environment(),
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    code, peak_kib = map(int, done.stdout.split())
    assert code != 0
    assert done.stderr.strip() == f"tally: {MEMBER}: row 1: longer than 64 KiB (not an export's CSV)"
    assert peak_kib < PEAK_BUDGET_KIB, f"peak RSS {peak_kib // 1024} MiB"
    assert imports.list_imports(connect(dashboard_settings), tenants.site_a) == []


def upload_callback(server_url: str, cookie: str) -> str:
    """The output spec of the dashboard's upload callback, as the page learns it."""
    answer = httpx.get(f"{server_url}/_dash-dependencies", headers={"Cookie": cookie}, timeout=30)
    assert answer.status_code == 200, answer.text[:300]
    [output] = [c["output"] for c in answer.json() if "import-status.children" in c["output"]]
    return output


def test_the_dashboard_refuses_an_upload_over_its_limit_before_decoding_it(
    tenants: Tenants, dashboard_settings: Settings
) -> None:
    """A valid export padded with blank lines past MAX_UPLOAD_BYTES, posted as the upload's
    callback by hand (the browser's max_size never runs): refused, nothing imported."""
    from dashboard.site_settings_panel import MAX_UPLOAD_BYTES

    name = "imported_visitors_20260101_20260101.csv"
    csv = b"date,visitors,pageviews,bounces,visits,visit_duration\n2026-01-01,1,1,0,1,0\n"
    padded = csv + b"\n" * (MAX_UPLOAD_BYTES + 1024 - len(csv))
    contents = "data:text/csv;base64," + base64.b64encode(padded).decode()
    operator = signed_in(tenants.server)
    try:
        # The session cookie is Secure, which httpx keeps but does not send over plain http.
        cookie = f"tally_session={operator.cookies['tally_session']}"
        output = upload_callback(tenants.server.url, cookie)
        body = {
            "output": output,
            "outputs": [
                {"id": spec.split(".")[0], "property": spec.split(".")[1]}
                for spec in output.strip(".").split("...")
            ],
            "inputs": [{"id": "import-upload", "property": "contents", "value": contents}],
            "state": [
                {"id": "import-upload", "property": "filename", "value": name},
                {"id": "import-origin", "property": "value", "value": "plausible"},
                {"id": "site", "property": "value", "value": tenants.site_b},
                {"id": "period", "property": "data", "value": None},
                {"id": "filters", "property": "data", "value": None},
            ],
            "changedPropIds": ["import-upload.contents"],
        }
        answer = operator.post(
            "/_dash-update-component",
            json=body,
            headers={"Origin": tenants.server.url, "Cookie": cookie},
            timeout=120,
        )
    finally:
        operator.close()
    # A server-wide body limit (issue 29, finding 9) may refuse it even earlier, with a 413.
    assert answer.status_code in (200, 413), answer.text[:300]
    if answer.status_code == 200:
        assert f"{name}: larger than 20 MiB; use tally import" in answer.text
    assert imports.list_imports(connect(dashboard_settings), tenants.site_b) == []
