"""Tally's one-sentence pages (a refused cross-site form, a revoked or unknown shared link): one
look, no referrer sent on from them."""

MESSAGE_PAGE_HEAD = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>Tally</title>
<style>body { margin: 0; min-height: 100vh; display: grid; place-items: center;
font-family: system-ui, sans-serif; background: #f4f5f8; color: #1f2430; }</style>
</head>"""

# A Jinja template: render it with `message`.
MESSAGE_PAGE = (
    MESSAGE_PAGE_HEAD
    + """<body><p role="alert">{{ message }}</p></body></html>
"""
)
