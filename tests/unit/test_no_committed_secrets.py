"""No secret is committed: Yelp's detect-secrets over every file git tracks (and every new file
git would take in a commit), with every plugin and its default filters; and the files in which
Tally keeps the secrets it generates at runtime are git-ignored.

A finding fails the test unless it is in ALLOWED below, with the reason it is no secret. An
entry names the file, the kind of finding and the value itself: all are made-up values in tests
and benchmarks, plain to see here, and changing one needs a new look at it.
"""

from __future__ import annotations

import math
import os
import re
import stat
import subprocess
from collections.abc import Iterable
from pathlib import Path

from detect_secrets import SecretsCollection
from detect_secrets.core.potential_secret import PotentialSecret
from detect_secrets.plugins.base import BasePlugin, RegexBasedDetector
from detect_secrets.plugins.high_entropy_strings import HighEntropyStringsPlugin
from detect_secrets.plugins.keyword import (
    DENYLIST,
    QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP,
    REGEX_BY_FILETYPE,
    KeywordDetector,
)
from detect_secrets.settings import default_settings, get_plugins
from detect_secrets.transformers import get_transformed_file
from detect_secrets.util.filetype import determine_file_type

from tally.settings import PROJECT_ROOT, Settings

KEYWORD = "Secret Keyword"  # detect-secrets' KeywordDetector: a value assigned to password=, key=, …

# (path, kind of finding, value) → why it is no secret.
ALLOWED: dict[tuple[str, str, str], str] = {
    ("bench/dashboard.py", KEYWORD, "bench"): (
        "the dashboard benchmark's password for an in-process dashboard it builds itself"
    ),
    ("tests/integration/test_clickhouse_endpoint.py", KEYWORD, "s3cret"): (
        "a throwaway password for a ClickHouse endpoint the test starts in a temporary directory"
    ),
    ("tests/integration/test_clickhouse_endpoint.py", KEYWORD, "wrong"): (
        "the wrong password the test presents to that endpoint to see it refused"
    ),
    ("tests/integration/test_dashboard_bookmark.py", KEYWORD, "a long bookmark password"): (
        "the password the bookmark test gives the members of its in-process dashboard"
    ),
    ("tests/unit/test_mcp_answers.py", KEYWORD, "the-operators"): (
        "a made-up operator's key the test shows `tally mcp` over stdio never falls back to"
    ),
    ("tests/browser/test_dashboard_sharing.py", KEYWORD, "another secret"): (
        "the password of a shared link the browser test creates on its own temporary dashboard"
    ),
    ("tests/unit/test_dashboard_login.py", KEYWORD, "correct horse battery staple"): (
        "the login tests' password for an in-process dashboard (xkcd's example passphrase)"
    ),
    ("tests/unit/test_dashboard_login.py", KEYWORD, "test-key"): (
        "the API key of the login tests' in-process dashboard"
    ),
    ("tests/browser/test_dashboard_team.py", KEYWORD, "a long viewer password"): (
        "the password an invited viewer sets on the team browser test's temporary dashboard"
    ),
    ("tests/integration/test_users.py", KEYWORD, "correct horse battery"): (
        "the password a test member sets on an in-process dashboard with a temporary store"
    ),
    ("tests/integration/test_users.py", KEYWORD, "wrong password"): (
        "the wrong password the sign-in audit test presents to see it refused and logged"
    ),
    ("tests/integration/test_manage_api.py", KEYWORD, "a long member password"): (
        "the password the settings and accounts API tests' members set, in a temporary store"
    ),
    ("tests/security/conftest.py", KEYWORD, "a long member password"): (
        "the password the adversarial suite's members set on the test session's temporary dashboard"
    ),
    ("tests/security/test_client_ip.py", KEYWORD, "link secret"): (
        "the password of a shared link the throttle test guesses at on its own temporary dashboard"
    ),
    ("tests/security/test_client_ip.py", KEYWORD, "guess"): (
        "a wrong password the throttle test presents to see it refused"
    ),
    ("tests/integration/test_journeys_tab.py", KEYWORD, "journeys-tab"): (
        "the operator's password of the Journeys tab test's in-process dashboard"
    ),
    ("tests/integration/test_retention.py", KEYWORD, "retention-tab"): (
        "the operator's password of the Retention tab test's in-process dashboard"
    ),
    ("tests/integration/test_dashboard_first_load.py", KEYWORD, "first-load"): (
        "the password of the first-load tests' member on an in-process dashboard with a temporary store"
    ),
    ("tests/integration/test_dashboard_sign_in.py", KEYWORD, "correct horse battery staple"): (
        "the sign-in tests' operator password for a dashboard on a temporary store (xkcd's example)"
    ),
    ("tests/security/test_sessions.py", KEYWORD, "link password"): (
        "the password of a shared link the session tests create on the test session's dashboard"
    ),
    ("tests/security/test_invitations.py", KEYWORD, "guess"): (
        "a stranger's wrong password, presented to see the failed sign-in audited"
    ),
    ("tests/unit/test_team_roles.py", KEYWORD, "pw"): (
        "the operator password of the role tests' in-process dashboard"
    ),
}


def repository_files() -> list[str]:
    """Tracked files, and untracked ones git does not ignore (the next commit may add them)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return sorted({name for name in listed.split("\0") if name and (PROJECT_ROOT / name).is_file()})


def scan(root: Path, files: Iterable[str]) -> list[tuple[str, PotentialSecret]]:
    """detect-secrets with every plugin and its default filters (`default_settings`), over the
    files in which some plugin could find anything (`could_hold_a_secret`): the same findings
    as over every file, without detect-secrets' line-by-line, plugin-by-plugin Python loop over
    the ~90% of files where none of its patterns occurs (that loop took 32 s of CI's cores).

    One process per core (detect-secrets' own `scan_files`, which hands the settings to each
    process); the findings are the same as file by file.
    """
    found = SecretsCollection(root=str(root))
    with default_settings():
        plugins = get_plugins()
        suspects = [name for name in files if could_hold_a_secret(root / name, plugins)]
        found.scan_files(*suspects, num_processors=os.cpu_count())
    return sorted(found, key=lambda item: (item[0], item[1].line_number))


def could_hold_a_secret(path: Path, plugins: list[BasePlugin]) -> bool:
    """False only where detect-secrets would report nothing: no line of the file (right-stripped,
    as detect-secrets reads it) holds a match of any plugin's patterns, nor a quoted string above
    an entropy plugin's limit. A file a transformer rewrites (YAML, or anything that parses as
    INI), a plugin of another kind, or a file that does not read as text is scanned anyway."""
    try:
        with path.open() as file:  # as detect-secrets opens it (scan._get_lines_from_file)
            if get_transformed_file(file) or get_transformed_file(file, use_eager_transformers=True):
                return True
            lines = [line.rstrip() for line in file.readlines()]
    except UnicodeDecodeError:
        return True
    return any(_may_find(plugin, str(path), lines) for plugin in plugins)


#: Every pattern of the keyword plugin has one of these words in it (asserted below): only the
#: lines that hold one are searched with its ten patterns.
KEYWORDS = re.compile("|".join(DENYLIST), re.IGNORECASE)


def _may_find(plugin: BasePlugin, filename: str, lines: list[str]) -> bool:
    if isinstance(plugin, HighEntropyStringsPlugin):  # quoted strings above the entropy limit
        return any(
            _entropy_above(plugin, quoted) for line in lines for _, quoted, _ in plugin.regex.findall(line)
        )
    if isinstance(plugin, KeywordDetector):  # the patterns of the file's type (analyze_line)
        patterns = list(
            REGEX_BY_FILETYPE.get(determine_file_type(filename), QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP)
        )
        assert all("|".join(DENYLIST) in pattern.pattern for pattern in patterns)
        lines = [line for line in lines if KEYWORDS.search(line)]
    elif isinstance(plugin, RegexBasedDetector):
        return any(_in_some_line(pattern, lines) for pattern in plugin.denylist)
    else:  # a kind not known here: its file is scanned
        return True
    return any(pattern.search(line) for line in lines for pattern in patterns)


def _in_some_line(pattern: re.Pattern[str], lines: list[str]) -> bool:
    """Whether `pattern` matches in some line: searched in all the lines at once, joined by
    newlines, `^` and `$` at each line's ends (re.MULTILINE). A match in a line is one there
    too (the plugins' lookbehinds, (?<=^), (?<=\\W) and (?<![\\w.]), hold after a newline as at
    a line's start); a pattern anchored to the text's own ends (\\A, \\Z) is taken as found."""
    if re.search(r"\\[AZz]", pattern.pattern):
        return True
    return bool(re.compile(pattern.pattern, pattern.flags | re.MULTILINE).search("\n".join(lines)))


def _entropy_above(plugin: HighEntropyStringsPlugin, value: str) -> bool:
    # A string's Shannon entropy is at most log2 of its number of distinct characters: the
    # plugin's own (slower) count only for those that could pass its limit.
    return math.log2(len(set(value))) > plugin.entropy_limit and (
        plugin.calculate_shannon_entropy(value) > plugin.entropy_limit
    )


def describe(path: str, secret: PotentialSecret) -> str:
    """Where and what, never the value: a real secret must not land in the test's output too."""
    return f"{path}:{secret.line_number}: {secret.type}"


def test_the_scan_finds_a_planted_secret(tmp_path: Path) -> None:
    """The scanner as configured here does find secrets (else the next test proves nothing)."""
    aws_key_id = "AKIA" + "ZQ3DRTLP7WK5XN2B"  # split: this file is scanned too
    (tmp_path / "settings.py").write_text(
        f'AWS_ACCESS_KEY_ID = "{aws_key_id}"\nTALLY_API_KEY = "kq9Vb2-Xw8rL1mZt7Yp3Nc5Hs0Fd4Gj6"\n'
    )
    (tmp_path / "deploy.env").write_text("CLICKHOUSE_PASSWORD=" + "c0rr3ct-h0rse-b4ttery\n")
    token = (
        "Zm9vYmFyLXRva2Vu" + "LTk4NzY1NDMyMS1xd2VydHk"
    )  # high entropy, no keyword near it (split: see above)
    (tmp_path / "notes.md").write_text(
        f'# Notes\n\nThe token is "{token}".\n\n-----BEGIN RSA ' + "PRIVATE KEY-----\n"
    )
    (tmp_path / "plain.md").write_text("# Plain\n\nNothing to see here, only 'short' words.\n")
    planted = ["settings.py", "deploy.env", "notes.md", "plain.md"]
    found = {(path, secret.type) for path, secret in scan(tmp_path, planted)}
    assert ("settings.py", "AWS Access Key") in found
    assert ("settings.py", "Secret Keyword") in found
    assert ("deploy.env", "Secret Keyword") in found
    assert ("notes.md", "Base64 High Entropy String") in found
    assert ("notes.md", "Private Key") in found
    # The scan passes over the files none of the plugins' patterns occurs in (and only those).
    with default_settings():
        skipped = [name for name in planted if not could_hold_a_secret(tmp_path / name, get_plugins())]
    assert skipped == ["plain.md"]


def test_no_tracked_file_holds_a_secret() -> None:
    files = repository_files()
    assert "tally/settings.py" in files and len(files) > 100  # the listing is the repository's
    findings = scan(PROJECT_ROOT, files)
    unexplained = [
        describe(path, secret)
        for path, secret in findings
        if (path, secret.type, secret.secret_value) not in ALLOWED
    ]
    assert unexplained == [], "possible secrets in the repository:\n" + "\n".join(unexplained)
    seen = {(path, secret.type, secret.secret_value) for path, secret in findings}
    # An entry the scan no longer finds is dead weight, and would hide a secret put there later.
    assert sorted(set(ALLOWED) - seen) == [], "allowlisted findings no longer found: remove them"


def generated_secret_files(tmp_path: Path) -> list[str]:
    """The files Tally writes secrets into on first use, as it names them in $TALLY_HOME."""
    settings = Settings(
        home=tmp_path, ingest_key="", api_key="", dashboard_password="", dashboard_session_secret=""
    )
    resolvers = [name for name in dir(Settings) if name.startswith("resolved_")]
    assert len(resolvers) >= 4, resolvers
    for name in resolvers:
        getattr(settings, name)()
    return sorted(path.name for path in tmp_path.iterdir())


def test_secrets_generated_at_runtime_stay_out_of_git(tmp_path: Path) -> None:
    names = generated_secret_files(tmp_path)
    assert {"ingest_key", "api_key", "dashboard_password"} <= set(names), names
    for name in names:  # readable by their owner alone
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600, name

    # The default $TALLY_HOME is ./.tally, and `make run` runs from the repository's root.
    default_home = Settings.model_fields["home"].default
    assert not default_home.is_absolute()
    paths = [str(default_home / name) for name in names]
    ignored = subprocess.run(
        ["git", "check-ignore", "--no-index", *paths], cwd=PROJECT_ROOT, capture_output=True, text=True
    )
    assert sorted(ignored.stdout.split()) == sorted(paths), f"not git-ignored: {ignored.stdout!r}"
    tracked = subprocess.run(
        ["git", "ls-files", "--", str(default_home)], cwd=PROJECT_ROOT, capture_output=True, text=True
    )
    assert tracked.stdout == "", f"tracked under {default_home}: {tracked.stdout}"
