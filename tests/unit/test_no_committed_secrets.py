"""No secret is committed: Yelp's detect-secrets over every file git tracks (and every new file
git would take in a commit), with every plugin and its default filters; and the files in which
Tally keeps the secrets it generates at runtime are git-ignored.

A finding fails the test unless it is in ALLOWED below, with the reason it is no secret. An
entry names the file, the kind of finding and the value itself: all are made-up values in tests
and benchmarks, plain to see here, and changing one needs a new look at it.
"""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Iterable
from pathlib import Path

from detect_secrets import SecretsCollection
from detect_secrets.core.potential_secret import PotentialSecret
from detect_secrets.settings import default_settings

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
    """detect-secrets with every plugin and its default filters (`default_settings`).

    One process per core (detect-secrets' own `scan_files`, which hands the settings to each
    process): the scan is CPU-bound, ~27 plugins over each of the repository's ~70,000 lines, and
    took 19 s on one of CI's two cores. The findings are the same as file by file.
    """
    found = SecretsCollection(root=str(root))
    with default_settings():
        found.scan_files(*files, num_processors=os.cpu_count())
    return sorted(found, key=lambda item: (item[0], item[1].line_number))


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
    found = {(path, secret.type) for path, secret in scan(tmp_path, ["settings.py", "deploy.env"])}
    assert ("settings.py", "AWS Access Key") in found
    assert ("settings.py", "Secret Keyword") in found
    assert ("deploy.env", "Secret Keyword") in found


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
