"""The ceiling for the collector benchmark: a bare Starlette app on the same uvicorn
settings that reads the body and answers 202, doing nothing else."""

from __future__ import annotations

import sys

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route


async def accept(request: Request) -> Response:
    await request.body()
    return Response(status_code=202)


app = Starlette(
    routes=[Route("/api/event", accept, methods=["POST"]), Route("/api/events", accept, methods=["POST"])]
)

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False)
