"""The HTTP APIs on the dashboard's server: the stats API v1 (`stats.py`, its parameters and
answers, shared with `tally stats`), the management API (`manage.py`: sites, goals, accounts,
keys), the imports, segments and what-if APIs, their OpenAPI document, the callers' keys and
roles (`authorisation.py`), and Plausible's compatibility (`plausible/`). Each translates a
request into Tally's queries and stores and the answer back into JSON; none holds a number of
its own."""
