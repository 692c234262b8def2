"""Preload hints for the Dash component chunks the first screen needs.

dcc loads its dropdown, date picker and graph code lazily, as chunks (`async-dropdown.js`, …)
requested only once the renderer has fetched the layout and renders a dropdown or a graph: the
header's site picker waited for the layout (built by the server: seconds on a loaded machine),
then for its own code, then for the first wave of callbacks sharing the browser's connections.
A `<link rel="preload">` for each starts the download with the page's own scripts, while the
layout is still being fetched; the chunk loader then finds it in the cache. Eager loading
(Dash's `eager_loading=True`) would do it too, but fetches every chunk (markdown, MathJax,
upload, tables: 3.6 MB more on each first visit)."""

from __future__ import annotations

import re

from dash import Dash

# The chunks of dcc the Overview renders at once: the header's pickers (the period's custom
# range is a date picker) and the charts.
FIRST_SCREEN_CHUNKS = ("async-dropdown", "async-datepicker", "async-graph")
# dcc's main bundle as Dash writes it into the page; its chunk loader asks for the chunks in the
# same folder, by name alone (`async-dropdown.js`, not fingerprinted as the bundle is).
DCC_BUNDLE = re.compile(r'src="(?P<folder>[^"]*/dash/dcc/)dash_core_components\.v[^"/]*\.js"')


def preload_links(scripts: str) -> str:
    """`<link rel="preload">` tags for FIRST_SCREEN_CHUNKS, at the URLs dcc's chunk loader will
    ask for (the main bundle's folder); none if the page has no dcc bundle."""
    bundle = DCC_BUNDLE.search(scripts)
    if bundle is None:
        return ""
    urls = (f"{bundle['folder']}{chunk}.js" for chunk in FIRST_SCREEN_CHUNKS)
    return "".join(f'<link rel="preload" as="script" href="{url}">' for url in urls)


def install_chunk_preload(app: Dash) -> None:
    """Put the preload links in the page's <head>, with its meta tags."""
    interpolate = app.interpolate_index

    def with_preloads(**parts: str) -> str:
        links = preload_links(parts.get("scripts", ""))
        return interpolate(**{**parts, "metas": parts.get("metas", "") + links})

    app.interpolate_index = with_preloads  # type: ignore[method-assign]
