"""Files and folders under $TALLY_HOME that only the operator's account may read.

Everything there (keys, passwords, logs, the store's data) is created private from the start,
folders 0700 and files 0600: a chmod after creation leaves a window in which another local
account can open the file and keep reading it.
"""

from __future__ import annotations

import os
from pathlib import Path

#: The umask for every process that writes under $TALLY_HOME: what it creates is the owner's alone.
PRIVATE_UMASK = 0o077
PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


def make_private_dir(path: Path) -> None:
    """Create `path` and any missing parents 0700 (Path.mkdir applies `mode` to the last one only)."""
    missing = [folder for folder in (path, *path.parents) if not folder.exists()]
    for folder in reversed(missing):
        folder.mkdir(mode=PRIVATE_DIR_MODE, exist_ok=True)


def create_private_file(path: Path, text: str) -> None:
    """Write a new file created 0600; an existing file is an error (FileExistsError), never overwritten."""
    make_private_dir(path.parent)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE)
    with os.fdopen(descriptor, "w") as file:
        file.write(text)
