"""What is asked: the query, its settings and parameters, as ClickHouse's HTTP interface reads them."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from ops.clickhouse_endpoint.errors import ClickHouseError, ErrorCode

# URL parameters the HTTP layer consumes itself; every other parameter is a ClickHouse setting.
_TRANSPORT_PARAMETERS = frozenset(
    {"query", "database", "default_format", "user", "password", "quota_key", "query_id", "role"}
    | {"session_id", "session_timeout", "session_check", "close_session", "compress", "decompress"}
    | {"buffer_size", "wait_end_of_query", "client_protocol_version", "stacktrace"}
)
# Settings about streaming a response while it is produced, which this endpoint never does.
_RESPONSE_STREAMING_SETTINGS = frozenset(
    {"send_progress_in_http_headers", "http_headers_progress_interval_ms", "http_wait_end_of_query"}
    | {"enable_http_compression", "http_zlib_compression_level", "http_response_buffer_size"}
    | {"cancel_http_readonly_queries_on_client_close"}
)
_PLACEHOLDER_PREFIX = "param_"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# chDB's Python wrapper turns these "formats" into DataFrames and Arrow tables in-process.
_WRAPPER_FORMATS = frozenset({"dataframe", "datastore", "arrowtable"})


@dataclass(frozen=True)
class HttpQuery:
    """What one HTTP request asks of the engine, with the transport taken off."""

    #: The `query` parameter: the statement, or its beginning when the body continues it.
    text: str
    database: str | None
    #: The output format of a statement that has no FORMAT clause.
    output_format: str
    #: ClickHouse settings for this statement only.
    settings: dict[str, str]
    #: Values for the statement's {name:Type} placeholders.
    placeholders: dict[str, str]
    #: A GET: ClickHouse runs those read-only whatever their settings say (see _enforce_read_only).
    read_only: bool = False

    @classmethod
    def from_request(
        cls, method: str, url_parameters: Mapping[str, str], headers: Mapping[str, str]
    ) -> HttpQuery:
        for unsupported in ("compress", "decompress"):
            if url_parameters.get(unsupported, "0") not in ("0", "false"):
                raise ClickHouseError.of(
                    ErrorCode.NOT_IMPLEMENTED,
                    f"{unsupported}=1 (ClickHouse's native block compression) is not supported here; "
                    "use Content-Encoding / Accept-Encoding",
                )
        output_format = (
            url_parameters.get("default_format") or headers.get("x-clickhouse-format") or "TabSeparated"
        )
        if not _NAME.fullmatch(output_format) or output_format.lower() in _WRAPPER_FORMATS:
            raise ClickHouseError.of(ErrorCode.UNKNOWN_FORMAT, f"Unknown format {output_format}")
        settings: dict[str, str] = {}
        placeholders: dict[str, str] = {}
        for name, value in url_parameters.items():
            if name.startswith(_PLACEHOLDER_PREFIX):
                placeholders[name.removeprefix(_PLACEHOLDER_PREFIX)] = value
            elif name not in _TRANSPORT_PARAMETERS and name not in _RESPONSE_STREAMING_SETTINGS:
                if not _NAME.fullmatch(name):
                    raise ClickHouseError.of(ErrorCode.UNKNOWN_SETTING, f"Unknown setting '{name}'")
                settings[name] = value
        return cls(
            text=url_parameters.get("query", ""),
            database=url_parameters.get("database") or headers.get("x-clickhouse-database") or None,
            output_format=output_format,
            settings=settings,
            placeholders=placeholders,
            read_only=method == "GET",
        )
