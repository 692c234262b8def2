"""What every `tally` command shares: the running stack (its settings and its store client, each
made on first use) and the console it prints to."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from rich.console import Console

from tally.settings import Settings

if TYPE_CHECKING:
    from clickhouse_connect.driver.client import Client

console = Console()


def progress(line: str) -> None:
    """A long command's step, as one plain line (no highlighting of numbers and paths)."""
    console.print(line, highlight=False)


class Stack:
    """The stack in $TALLY_HOME as a command reaches it, passed to commands as click's `obj`.

    Nothing is read or connected until a command asks: a command that never touches the store
    (`tally status`, a typo refused before the store is asked) works, or fails with its own one
    line, while the stack is down."""

    @cached_property
    def settings(self) -> Settings:
        """The user's settings as the stack runs them (a cluster: its brokers, its master, its store)."""
        from ops.local.stack import current_settings

        return current_settings(Settings())

    @cached_property
    def client(self) -> Client:
        """The store client, connected once: every store call of a command goes through it."""
        from storage.client import connect  # clickhouse-connect: only for commands that use the store

        return connect(self.settings)
