"""Who is asking: the one account, and requests a web page or a foreign Host name could send."""

from __future__ import annotations

import base64
import binascii
import hmac
from collections.abc import Mapping
from dataclasses import dataclass

from ops.clickhouse_endpoint.errors import ClickHouseError, ErrorCode


@dataclass(frozen=True)
class Credentials:
    user: str
    password: str

    def matches(self, presented: Credentials) -> bool:
        # Both halves are always compared, in constant time: timing tells nothing about which was wrong.
        user_ok = hmac.compare_digest(self.user.encode(), presented.user.encode())
        password_ok = hmac.compare_digest(self.password.encode(), presented.password.encode())
        return user_ok & password_ok

    @classmethod
    def presented(cls, headers: Mapping[str, str], url_parameters: Mapping[str, str]) -> Credentials:
        """Who the request says it is, looked for where ClickHouse looks: basic auth, the
        X-ClickHouse-User / X-ClickHouse-Key headers, the user / password parameters."""
        authorization = headers.get("authorization", "")
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() == "basic":
            try:
                user, _, password = base64.b64decode(token.strip(), validate=True).decode().partition(":")
            except (binascii.Error, UnicodeDecodeError):
                raise ClickHouseError.of(
                    ErrorCode.AUTHENTICATION_FAILED, "Malformed basic authentication"
                ) from None
            return cls(user, password)
        if authorization:
            raise ClickHouseError.of(
                ErrorCode.AUTHENTICATION_FAILED, f"Unsupported authorization scheme {scheme}"
            )
        if "x-clickhouse-user" in headers or "x-clickhouse-key" in headers:
            return cls(headers.get("x-clickhouse-user", "default"), headers.get("x-clickhouse-key", ""))
        return cls(url_parameters.get("user", "default"), url_parameters.get("password", ""))
