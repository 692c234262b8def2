"""`tally mcp`: a read-only Model Context Protocol server over the stats engine.

It holds no store connection and no key of its own: every tool asks the dashboard server's HTTP
APIs (`/api/v1`, Plausible's `/api/v2/query`) with the caller's key, so the routes that already
check a key's sites and role (dashboard/access.py) limit every answer, and nothing can write.
`settings.py` says where the APIs are and whose key a call carries, `api.py` is their client,
`tools.py` the tools, `serve.py` the two transports (stdio, streamable HTTP).
"""
