"""How many of each settings kind one site (or, for API keys, one account) may hold: every cap
in one place.

Settings are read on paths every tenant shares (the dashboard's pages, the stats queries, the
alerts query, the report and delivery loops), so a tenant with unbounded goals or alert rules
slows everyone. Each writer counts what is already there and refuses the one too many with its
own error class, so every door (the CLI's one line, the API's 400, the dashboard's notice) says
it as it says that kind's other mistakes, naming the field: "site: at most 100 goals per site".
Exclusions and channel rules keep their own caps beside their other limits
(storage/exclusions.py, storage/channel_rules.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from clickhouse_connect.driver.client import Client


@dataclass(frozen=True)
class Cap:
    """At most `limit` `things` per `holder` (the field a refusal names)."""

    things: str
    limit: int
    holder: str = "site"

    def check(self, existing: int, error: type[Exception], adding: int = 1) -> None:
        """`error` naming the field if `existing` plus `adding` would pass the cap."""
        if existing + adding > self.limit:
            raise error(f"{self.holder}: at most {self.limit} {self.things} per {self.holder}")


GOALS = Cap("goals", 100)
CUSTOM_PROPERTIES = Cap("custom properties", 300)  # the Properties report's allow-list
FUNNELS = Cap("saved funnels", 50)
SEGMENTS = Cap("segments", 100)
SHARED_LINKS = Cap("shared links", 50)  # live ones: a revoked link frees its place
ALERT_RULES = Cap("alert rules", 50)
REPORT_SUBSCRIPTIONS = Cap("report subscriptions", 100)
PENDING_INVITES = Cap("pending invitations", 100)  # neither accepted nor expired
API_KEYS = Cap("API keys", 50, holder="email")  # live keys of one account, over all its sites


def pending_invites(client: Client, site: str) -> int:
    """The site's invitations still waiting (pending the operator's approval or open, not
    expired): those a cap must bound. One per invitation id (an approval gives it a new token)."""
    return int(
        client.query(
            """
            SELECT count() FROM (
                SELECT argMax(status, changed_at) AS status, argMax(expires_at, changed_at) AS expires_at
                FROM user_invites WHERE site = {site:String} AND id != '' GROUP BY id
            ) WHERE status IN ('pending', 'open') AND expires_at > now64(3)
            """,
            parameters={"site": site},
        ).result_rows[0][0]
    )
