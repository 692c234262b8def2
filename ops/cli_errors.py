"""How the `tally` CLI fails: one line saying what went wrong and what to do, never a traceback.

Commands let their libraries' errors propagate; `TallyGroup`, the CLI's top-level group, turns
the failures a user can cause — a component that is not running, a typo on the command line,
a bad setting, a file that cannot be written — into one line on stderr and a non-zero exit.
Anything else is a bug: one line naming the log file that holds its traceback
(`TALLY_DEBUG=1` shows the traceback on the terminal instead). Components never import this
(the dependency rule): `tally loadgen` fails like every other command because the group
wraps the commands it invokes.
"""

from __future__ import annotations

import contextlib
import logging
import re
import sys
import traceback
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import click
import httpx
from aiokafka.errors import KafkaConnectionError
from clickhouse_connect.driver.exceptions import DatabaseError, OperationalError
from pydantic import ValidationError

from tally.refusal import Refused
from tally.settings import Settings

START_THE_STACK = "start the stack with 'tally up -d'"
# ClickHouse wraps its message in the HTTP client's; the part after DB::Exception is the news.
_CLICKHOUSE_MESSAGE = re.compile(r"DB::Exception: (?P<message>.+?)(?: \(version [\d.]+|\(for url|$)")
_HTTP_STATUS = re.compile(r"received HTTP status (\d+)")


class UserError(click.ClickException):
    """A failure the user can act on, shown as the one line `tally: …` on stderr."""

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"tally: {self.format_message()}", err=True)


class OneLineErrors:
    """Mixed into a click group or command: the one place where errors become what a user reads."""

    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        try:
            return super().make_context(*args, **kwargs)
        except click.UsageError as error:
            raise usage_error(error) from None

    def invoke(self, ctx: click.Context) -> Any:
        route_logging_to_file()
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.Abort, UserError):
            raise
        except click.UsageError as error:
            raise usage_error(error) from None
        except click.ClickException as error:
            raise UserError(error.format_message()) from None
        except Exception as error:
            raise user_error(error) from None


class TallyGroup(OneLineErrors, click.Group):
    """The `tally` CLI's group."""


def usage_error(error: click.UsageError) -> UserError:
    """A typo on the command line: click's message and where to look, on one line."""
    message = one_line(error.format_message()).rstrip(".")
    help_command = f"{error.ctx.command_path} --help" if error.ctx else "tally --help"
    failure = UserError(f"{message[:1].lower()}{message[1:]} — see '{help_command}'")
    failure.exit_code = error.exit_code
    return failure


def user_error(error: Exception) -> UserError:
    settings = settings_or_defaults()
    if (line := describe(error, settings)) is not None:
        return UserError(line)
    if settings.debug:
        raise error
    log_path = log_unexpected(error, settings.logs_dir / "cli.log")
    return UserError(
        f"unexpected error ({type(error).__name__}: {one_line(str(error))[:200]}); "
        f"the traceback is in {log_path} (TALLY_DEBUG=1 prints it here)"
    )


def describe(error: Exception, settings: Settings) -> str | None:
    """The line for a failure a user can cause, or None for one they cannot (a bug)."""
    if isinstance(error, OperationalError):
        if _refused(error):
            return f"the store is not running at {settings.clickhouse_url} — {START_THE_STACK}"
        return f"the store at {settings.clickhouse_url} failed: {_clickhouse_message(error)}"
    if isinstance(error, DatabaseError):
        return f"the store at {settings.clickhouse_url} answered: {_clickhouse_message(error)}"
    if isinstance(error, KafkaConnectionError):
        return f"the log (Kafka) is not running at {settings.kafka_bootstrap} — {START_THE_STACK}"
    if isinstance(error, httpx.TransportError):
        return _service_down(error, settings)
    if isinstance(error, ValidationError) and error.title == Settings.__name__:
        return _bad_setting(error)
    if isinstance(error, ConnectionRefusedError):
        return f"a component of the stack is not running ({error.strerror}) — {START_THE_STACK}"
    if isinstance(error, OSError) and error.filename:
        return f"cannot use {error.filename}: {error.strerror}"
    if isinstance(error, _known_failures()):
        return one_line(str(error))
    return None


def _known_failures() -> tuple[type[Exception], ...]:
    """Errors whose message is already written for a user: every refusal (tally/refusal.py), and
    the local stack's and a replay's failures, which are the operator's to fix but no request's."""
    from ops.local.supervisor import StackError

    failures: list[type[Exception]] = [Refused, StackError]
    if "stream_jobs.replay" in sys.modules:  # imported late: it pulls in Spark
        failures.append(sys.modules["stream_jobs.replay"].ReplayError)
    return tuple(failures)


def _causes(error: BaseException) -> Iterator[BaseException]:
    current: BaseException | None = error
    while current is not None:
        yield current
        current = current.__cause__ or current.__context__


def _refused(error: Exception) -> bool:
    """Whether nothing listens where the store should be (as opposed to a store that failed)."""
    text = str(error)
    return any(isinstance(cause, ConnectionRefusedError) for cause in _causes(error)) or (
        "Connection refused" in text or "Failed to establish a new connection" in text
    )


def _clickhouse_message(error: Exception) -> str:
    text = one_line(str(error))
    if found := _CLICKHOUSE_MESSAGE.search(text):
        return found["message"][:300]
    if found := _HTTP_STATUS.search(text):  # something answered, but not as ClickHouse does
        return f"HTTP {found[1]} — is TALLY_CLICKHOUSE_URL a ClickHouse server?"
    return text[:300]


def _service_down(error: httpx.TransportError, settings: Settings) -> str:
    try:
        url = error.request.url
    except RuntimeError:  # an error raised before any request was built
        return f"a component is not reachable ({one_line(str(error))}) — {START_THE_STACK}"
    names = {settings.collector_port: "the collector", settings.dashboard_port: "the dashboard"}
    name = names.get(url.port or 80, "nothing")
    address = f"{url.scheme}://{url.host}:{url.port}"
    if isinstance(error, httpx.ConnectError):
        return f"{name} is not running at {address} — {START_THE_STACK}"
    return f"{name} at {address} did not answer ({type(error).__name__}) — see 'tally status'"


def _bad_setting(error: ValidationError) -> str:
    first = error.errors()[0]
    variable = "TALLY_" + str(first["loc"][0]).upper() if first["loc"] else "a TALLY_* setting"
    return f"setting {variable}={first.get('input')!r}: {first['msg']}"


def one_line(text: str) -> str:
    return " ".join(text.split())


def settings_or_defaults() -> Settings:
    """The user's settings, or the defaults when the settings themselves are what is wrong."""
    try:
        return Settings()
    except ValidationError:
        return Settings.model_construct()


def log_unexpected(error: Exception, log_path: Path) -> Path:
    _make_private_folder(log_path.parent)
    with log_path.open("a") as log:
        log.write(f"--- {datetime.now(UTC).isoformat()} tally {' '.join(sys.argv[1:])}\n")
        log.write("".join(traceback.format_exception(error)))
    log_path.chmod(0o600)
    return log_path


def _make_private_folder(folder: Path) -> None:
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)


class _CliLogFile(logging.FileHandler):
    """$TALLY_HOME/logs/cli.log, created on the first record only (most commands log nothing)."""

    def _open(self) -> IO[str]:
        path = Path(self.baseFilename)
        _make_private_folder(path.parent)
        stream = super()._open()
        path.chmod(0o600)
        return stream

    def emit(self, record: logging.LogRecord) -> None:
        # An unwritable home must not turn a library's warning into a failure.
        with contextlib.suppress(OSError):
            super().emit(record)


def route_logging_to_file() -> None:
    """Libraries' warnings (aiokafka's reconnect attempts, asyncio's unclosed clients) go to
    the CLI's log file instead of the terminal, where they would bury the one line that matters."""
    if any(isinstance(handler, _CliLogFile) for handler in logging.getLogger().handlers):
        return
    handler = _CliLogFile(settings_or_defaults().logs_dir / "cli.log", delay=True)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.getLogger().addHandler(handler)
    logging.captureWarnings(True)
