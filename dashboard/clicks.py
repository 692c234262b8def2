"""Which button a person clicked to fire a callback.

A settings list re-renders its buttons (Remove, Revoke…) when it loads, and a button that
appears fires its callback with 0 or None clicks: that is no click. Dash's renderer holds a
callback back while one of its inputs is the output of a callback still running, and delivers
what changed meanwhile together: a click on Add right after the Settings view opened arrived with
the list's new Remove buttons, and reading only the first input that changed lost the click.
So a panel's Add (Save, Create) button has a callback of its own, which no list holds back, and
the list's buttons share one that finds the clicked row here.
"""

from __future__ import annotations

from typing import Any

from dash import ctx


def clicked() -> Any:
    """The id of the clicked button among the inputs that fired this callback (a dict for a
    pattern-matching id), or None when none was clicked (buttons appearing)."""
    for fired in ctx.triggered:
        if fired.get("value"):
            return ctx.triggered_prop_ids.get(fired["prop_id"])
    return None
