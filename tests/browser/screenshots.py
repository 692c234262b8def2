"""Where the browser tests save what they saw.

Every run saves its screenshots under test-artifacts/screenshots/ (ignored by git), so a failed
run can be looked at. The README's pictures in docs/screenshots/ are redrawn only when asked,
`make screenshots` (TALLY_SCREENSHOTS=docs): a test run never rewrites committed files.
"""

from __future__ import annotations

import os

from tally.settings import PROJECT_ROOT

SCREENSHOTS = (
    PROJECT_ROOT
    / ("docs" if os.environ.get("TALLY_SCREENSHOTS") == "docs" else "test-artifacts")
    / "screenshots"
)
