"""collector/tracker.js is the build of its readable source (collector/tracker/tracker.src.js) by the
terser that package-lock.json pins, with the options in terser.json: what the collector serves is
what a reviewer reads. `make install` (and so `make test`) installs that terser; the test needs no network."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tally.settings import PROJECT_ROOT

TRACKER_JS = PROJECT_ROOT / "collector" / "tracker.js"
SOURCE_DIR = PROJECT_ROOT / "collector" / "tracker"
SOURCE = SOURCE_DIR / "tracker.src.js"
OPTIONS = SOURCE_DIR / "terser.json"
# Where the Makefile's `tracker` target installs the pinned terser (npm ci on a copy of the lock).
INSTALLED = PROJECT_ROOT / ".deps" / "tracker"
TERSER = INSTALLED / "node_modules" / "terser" / "bin" / "terser"


def pinned_terser() -> list[str]:
    """The command that runs the terser package-lock.json pins, or a failure saying how to get it."""
    node = shutil.which("node")
    if node is None or not TERSER.is_file():
        pytest.fail("the tracker's minifier is not installed (node, terser): run make install", pytrace=False)
    if (INSTALLED / "package-lock.json").read_bytes() != (SOURCE_DIR / "package-lock.json").read_bytes():
        pytest.fail(
            "the terser installed is not the one package-lock.json pins: run make install", pytrace=False
        )
    return [node, str(TERSER)]


def test_committed_tracker_is_the_build_of_its_source(tmp_path: Path) -> None:
    built = tmp_path / "tracker.js"

    terser = subprocess.run(
        [*pinned_terser(), "--config-file", str(OPTIONS), str(SOURCE), "-o", str(built)],
        capture_output=True,
        text=True,
    )

    assert terser.returncode == 0, f"terser could not build {SOURCE.name}: {terser.stderr.strip()}"
    assert built.read_bytes() == TRACKER_JS.read_bytes(), (
        f"collector/tracker.js is not the build of {SOURCE.relative_to(PROJECT_ROOT)}: run make tracker"
    )


def test_the_minifier_is_pinned_to_one_version() -> None:
    # A range ("^5.x") would let a fresh lock build other bytes than the committed file.
    wanted = json.loads((SOURCE_DIR / "package.json").read_text())["devDependencies"]["terser"]
    locked = json.loads((SOURCE_DIR / "package-lock.json").read_text())["packages"]["node_modules/terser"]

    assert re.fullmatch(r"\d+\.\d+\.\d+", wanted), f"package.json asks for terser {wanted!r}, not one version"
    assert locked["version"] == wanted
