"""Plausible's compatibility front door: Stats API v2 (`POST /api/v2/query`: query, api,
comparisons, conversions, imports, money, report, engine) and v1's parameters on Tally's v1
endpoints (v1). Each module translates into Tally's queries and out again; docs/plausible-api.md
lists what is answered and what is refused, with the reason."""
