"""A request Tally refuses: something the caller can fix, or is not allowed to do.

Every domain's refusal (InvalidGoal, BadParameter, SiteNotFound, …) is a `Refused`, so each front
door maps them once — the CLI's one line (ops/cli_errors.py), the APIs' JSON answers
(dashboard/refusals.py), the dashboard's message — instead of naming every class. Failures of
the machinery (the store or the log not answering) are not refusals: the caller cannot fix them.
"""

from __future__ import annotations

from typing import Literal, get_args

#: What kind of refusal, the one thing a door needs to pick its answer (an HTTP status).
Kind = Literal["invalid", "forbidden", "not_found", "conflict", "not_configured"]
KINDS: tuple[Kind, ...] = get_args(Kind)


class Refused(ValueError):
    """`message` is one line a user can act on and is what `str()` shows; `field` names the
    parameter or field it is about (None when it is about the request as a whole). A class sets
    its usual `kind`; one raise may give another (a name taken: "conflict")."""

    kind: Kind = "invalid"

    def __init__(self, message: str, *, field: str | None = None, kind: Kind | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        if kind is not None:
            self.kind = kind
