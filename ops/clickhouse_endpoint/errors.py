"""ClickHouse's error codes and how they travel over HTTP (status, X-ClickHouse-Exception-Code)."""

from __future__ import annotations

import re
from enum import IntEnum


class ErrorCode(IntEnum):
    """ClickHouse error codes this endpoint raises itself or maps to an HTTP status."""

    CANNOT_PARSE_TEXT = 6
    THERE_IS_NO_COLUMN = 8
    DUPLICATE_COLUMN = 15
    CANNOT_PARSE_ESCAPE_SEQUENCE = 25
    CANNOT_PARSE_QUOTED_STRING = 26
    CANNOT_PARSE_INPUT_ASSERTION_FAILED = 27
    BAD_ARGUMENTS = 36
    UNKNOWN_ELEMENT_IN_AST = 37
    CANNOT_PARSE_DATE = 38
    CANNOT_PARSE_DATETIME = 41
    ILLEGAL_COLUMN = 44
    UNKNOWN_FUNCTION = 46
    UNKNOWN_IDENTIFIER = 47
    NOT_IMPLEMENTED = 48
    UNKNOWN_TYPE = 50
    TYPE_MISMATCH = 53
    UNKNOWN_STORAGE = 56
    UNKNOWN_TABLE = 60
    SYNTAX_ERROR = 62
    UNKNOWN_AGGREGATE_FUNCTION = 63
    CANNOT_PARSE_NUMBER = 72
    UNKNOWN_FORMAT = 73
    CANNOT_OPEN_FILE = 76
    UNKNOWN_TYPE_OF_QUERY = 78
    UNKNOWN_DATABASE = 81
    UNKNOWN_COMPRESSION_METHOD = 89
    UNKNOWN_SETTING = 115
    INCORRECT_DATA = 117
    UNKNOWN_TYPE_OF_AST_NODE = 123
    UNKNOWN_DIRECTION_OF_SORTING = 152
    TIMEOUT_EXCEEDED = 159
    TOO_DEEP_AST = 167
    TOO_BIG_AST = 168
    UNKNOWN_USER = 192
    WRONG_PASSWORD = 193
    REQUIRED_PASSWORD = 194
    SOCKET_TIMEOUT = 209
    UNEXPECTED_AST_STRUCTURE = 223
    QUERY_IS_TOO_LARGE = 229
    CANNOT_DECOMPRESS = 271
    VALUE_IS_OUT_OF_RANGE_OF_DATA_TYPE = 321
    UNKNOWN_DATABASE_ENGINE = 336
    CANNOT_PARSE_UUID = 376
    HTTP_LENGTH_REQUIRED = 381
    CANNOT_COMPILE_REGEXP = 427
    CANNOT_SCHEDULE_TASK = 439
    CANNOT_PARSE_DOMAIN_VALUE_FROM_STRING = 441
    ACCESS_DENIED = 497
    UNKNOWN_ROLE = 511
    SET_NON_GRANTED_ROLE = 512
    AUTHENTICATION_FAILED = 516
    CANNOT_PARSE_IPV4 = 675
    CANNOT_PARSE_IPV6 = 676
    UNSUPPORTED_MEDIA_TYPE = 779
    STD_EXCEPTION = 1001


# ClickHouse's own table (src/Server/HTTP/exceptionCodeToHTTPStatus.cpp); any other code is a 500.
_ERRORS_BY_STATUS = {
    401: "REQUIRED_PASSWORD",
    403: "UNKNOWN_USER WRONG_PASSWORD AUTHENTICATION_FAILED SET_NON_GRANTED_ROLE ACCESS_DENIED",
    400: (
        "BAD_ARGUMENTS CANNOT_COMPILE_REGEXP CANNOT_PARSE_TEXT CANNOT_PARSE_ESCAPE_SEQUENCE "
        "CANNOT_PARSE_QUOTED_STRING CANNOT_PARSE_DATE CANNOT_PARSE_DATETIME CANNOT_PARSE_NUMBER "
        "CANNOT_PARSE_DOMAIN_VALUE_FROM_STRING CANNOT_PARSE_IPV4 CANNOT_PARSE_IPV6 "
        "CANNOT_PARSE_INPUT_ASSERTION_FAILED CANNOT_PARSE_UUID DUPLICATE_COLUMN ILLEGAL_COLUMN "
        "UNKNOWN_ELEMENT_IN_AST UNKNOWN_TYPE_OF_AST_NODE THERE_IS_NO_COLUMN TOO_DEEP_AST TOO_BIG_AST "
        "UNEXPECTED_AST_STRUCTURE SYNTAX_ERROR INCORRECT_DATA TYPE_MISMATCH "
        "VALUE_IS_OUT_OF_RANGE_OF_DATA_TYPE"
    ),
    404: (
        "UNKNOWN_TABLE UNKNOWN_FUNCTION UNKNOWN_IDENTIFIER UNKNOWN_TYPE UNKNOWN_STORAGE UNKNOWN_DATABASE "
        "UNKNOWN_SETTING UNKNOWN_DIRECTION_OF_SORTING UNKNOWN_AGGREGATE_FUNCTION UNKNOWN_FORMAT "
        "UNKNOWN_DATABASE_ENGINE UNKNOWN_TYPE_OF_QUERY UNKNOWN_ROLE"
    ),
    413: "QUERY_IS_TOO_LARGE",
    501: "NOT_IMPLEMENTED",
    503: "SOCKET_TIMEOUT CANNOT_OPEN_FILE CANNOT_SCHEDULE_TASK",
    411: "HTTP_LENGTH_REQUIRED",
    408: "TIMEOUT_EXCEEDED",
    415: "UNSUPPORTED_MEDIA_TYPE",
}
_HTTP_STATUS = {
    ErrorCode[name]: status for status, names in _ERRORS_BY_STATUS.items() for name in names.split()
}

_CODE_IN_MESSAGE = re.compile(r"Code: (\d+)\. ")


class ClickHouseError(Exception):
    """An error as ClickHouse reports it: a code and the `Code: N. DB::Exception: …` text."""

    def __init__(self, code: int, text: str) -> None:
        super().__init__(text)
        self.code = code
        self.text = text

    @classmethod
    def of(cls, code: ErrorCode, message: str) -> ClickHouseError:
        return cls(code, f"Code: {code.value}. DB::Exception: {message}. ({code.name})")

    @classmethod
    def from_engine(cls, exc: Exception) -> ClickHouseError:
        message = str(exc)
        found = _CODE_IN_MESSAGE.search(message)
        if found is None:
            return cls.of(ErrorCode.STD_EXCEPTION, message)
        # chDB's Python layer puts its own words in front ("Streaming insert append failed: …").
        return cls(int(found[1]), message[found.start() :].strip())

    @property
    def http_status(self) -> int:
        return _HTTP_STATUS.get(self.code, 500)


def body_too_large(limit: int) -> ClickHouseError:
    return ClickHouseError.of(ErrorCode.QUERY_IS_TOO_LARGE, f"The request body is larger than {limit} bytes")
