"""The dashboard's view tabs (layout's `tabs` radio items): the callbacks that show a tab's
content, or compute only while it is shown (Explore, Funnel, Realtime), compare against these."""

from __future__ import annotations

OVERVIEW_TAB = "overview"
EXPLORE_TAB = "explore"
FUNNEL_TAB = "funnel"
REALTIME_TAB = "realtime"
SETTINGS_TAB = "settings"  # the site's settings (dashboard/settings_view.py)
# The Settings view's section and the panels' container in it (dashboard/settings_view.py).
SETTINGS_SECTION = "settings-section"
SETTINGS_PANELS = "settings-panels"
