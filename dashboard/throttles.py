"""Throttling guesses at a secret: the sign-in password of an account, a shared link's password,
the password an invitation asks for.

Two limits, so that neither one guesser nor many lock the secret's owner out:
- per client network (an IPv4 address, an IPv6 /64: tally/client_ip.network_key): at most
  `ADDRESS_FAILURES` wrong guesses per window. One guesser is slowed; nobody else notices.
- per target (the account, the link, the invitation): a guesser with many addresses is slowed
  too: once the target has `TARGET_FAILURES` wrong guesses in the window, it takes guesses only
  from its usual clients: a network that proved the secret in the last `KNOWN_CLIENT_S`, or (for
  sign-in) a browser holding the account's device mark (`DeviceMarks`, a cookie set on each
  sign-in: it survives a restart of the dashboard and the owner's change of network). The
  target's usual client is never locked out by strangers; a new client waits for the window.
  Chosen over a growing delay, which a stranger would raise for the owner too, and over a sleep
  in the request, which would hold one of the server's few threads per guess.
`TARGET_FAILURES` is twice `ADDRESS_FAILURES`: one guesser reaching his own limit does not close
the target to new clients.

Every table is bounded in keys (the keys are what strangers type): the oldest are forgotten first.
Kept in memory: restarting the dashboard forgets them, which only ever unlocks.
"""

from __future__ import annotations

import hashlib
import hmac
import threading
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field

from tally.client_ip import network_key

WINDOW_S = 15 * 60.0
ADDRESS_FAILURES = 10  # enough for typos, far too few to guess a generated password
TARGET_FAILURES = 2 * ADDRESS_FAILURES
KNOWN_CLIENT_S = 30 * 24 * 3600.0
MAX_KEYS = 50_000
MAX_KNOWN_PER_TARGET = 32
MAX_TARGET_CHARS = 320  # an email address at most; longer keys are cut, never stored whole


@dataclass
class FailureCounts:
    """Failures per key within a sliding window; at most `max_keys` keys."""

    max_failures: int
    window_s: float = WINDOW_S
    max_keys: int = MAX_KEYS
    _failures: OrderedDict[str, deque[float]] = field(default_factory=OrderedDict)

    def over(self, key: str, now: float) -> bool:
        return len(self._recent(key, now)) >= self.max_failures

    def failed(self, key: str, now: float) -> None:
        self._recent(key, now)  # drops what the window left behind
        self._failures.setdefault(key, deque()).append(now)
        self._failures.move_to_end(key)
        while len(self._failures) > self.max_keys:
            self._failures.popitem(last=False)

    def forget(self, key: str) -> None:
        self._failures.pop(key, None)

    def _recent(self, key: str, now: float) -> deque[float]:
        recent = self._failures.get(key)
        if recent is None:
            return deque()  # not stored until something fails
        while recent and recent[0] <= now - self.window_s:
            recent.popleft()
        if not recent:
            del self._failures[key]
            return deque()
        return recent


@dataclass
class GuessThrottle:
    """Per client network and per target; see the module's docstring."""

    address_failures: int = ADDRESS_FAILURES
    target_failures: int = TARGET_FAILURES
    window_s: float = WINDOW_S
    _by_address: FailureCounts = field(init=False)
    _by_target: FailureCounts = field(init=False)
    # target -> client network -> when it last proved the secret
    _known: OrderedDict[str, OrderedDict[str, float]] = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._by_address = FailureCounts(self.address_failures, self.window_s)
        self._by_target = FailureCounts(self.target_failures, self.window_s)

    def blocked(self, address: str, target: str, usual_client: bool = False) -> bool:
        """Whether this client may not guess this target's secret now (answer 429, check nothing).
        `usual_client`: the client showed the target's device mark."""
        network, target = network_key(address), target[:MAX_TARGET_CHARS]
        now = time.monotonic()
        with self._lock:
            if self._by_address.over(network, now):
                return True
            if usual_client or self._knows(target, network, now):
                return False
            return self._by_target.over(target, now)

    def failed(self, address: str, target: str) -> None:
        now = time.monotonic()
        with self._lock:
            self._by_address.failed(network_key(address), now)
            self._by_target.failed(target[:MAX_TARGET_CHARS], now)

    def succeeded(self, address: str, target: str) -> None:
        """The client proved the secret: its own count is cleared and it is known to the target.
        The target's count stays: the strangers guessing at it have not stopped."""
        network, target = network_key(address), target[:MAX_TARGET_CHARS]
        with self._lock:
            self._by_address.forget(network)
            known = self._known.setdefault(target, OrderedDict())
            known[network] = time.monotonic()
            known.move_to_end(network)
            while len(known) > MAX_KNOWN_PER_TARGET:
                known.popitem(last=False)
            self._known.move_to_end(target)
            while len(self._known) > MAX_KEYS:
                self._known.popitem(last=False)

    def _knows(self, target: str, network: str, now: float) -> bool:
        proved = self._known.get(target, {}).get(network)
        return proved is not None and proved > now - KNOWN_CLIENT_S


@dataclass(frozen=True)
class DeviceMarks:
    """The mark a browser gets with each sign-in to an account (a cookie; OWASP's "device
    cookie"): a MAC of the account under a server secret. Not a credential: it exempts its
    browser from the account's limit only, never from the password or the per-address limit."""

    key: bytes

    @classmethod
    def of(cls, secret: str) -> DeviceMarks:
        return cls(hashlib.sha256(b"tally device mark\0" + secret.encode()).digest())

    def mark(self, target: str) -> str:
        return hmac.new(self.key, target[:MAX_TARGET_CHARS].encode(), hashlib.sha256).hexdigest()

    def holds(self, shown: str | None, target: str) -> bool:
        return bool(shown) and hmac.compare_digest(str(shown), self.mark(target))
