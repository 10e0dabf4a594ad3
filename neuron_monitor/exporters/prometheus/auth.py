"""HTTP basic auth against bcrypt hashes, bounded in CPU and blind to which users exist.

bcrypt is slow on purpose (~250 ms at cost 12), so an unbounded check per request lets a few clients with wrong
passwords take the host. As Prometheus's exporter-toolkit does, this checker:

- runs at most ``max_concurrent`` bcrypt checks at a time (a semaphore; the HTTP front adds a bounded queue);
- keeps verdicts in bounded caches keyed by a SHA-256 of the (user, password) pair: a refused pair for
  ``cache_ttl`` seconds (a repeated wrong password is cheap), an accepted pair for as long as this checker lives
  (its hashes do not change: bcrypt would give the same answer again), in a cache of its own that refused pairs
  cannot evict. So a known-good credential is never queued behind failing ones: Prometheus pays bcrypt once, not
  once per expiry, and a wrong-password storm that fills the bcrypt queue (503 beyond ``max_auth_pending``)
  costs its scrapes nothing (before issue 32, an expired verdict put it behind the storm: 503, then 24 s);
- checks an unknown user's password against a dummy hash of the configured users' highest cost, so an unknown
  name costs what a known one does and response times do not tell which users exist.

The ``Basic`` scheme name is case-insensitive (RFC 9110 section 11.1).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

import bcrypt

DEFAULT_CACHE_TTL = 60.0
DEFAULT_CACHE_SIZE = 1024
DEFAULT_GOOD_CACHE_SIZE = 64  # accepted pairs kept (scrapers, people): refused ones never evict them
DEFAULT_MAX_CONCURRENT = 2


def bcrypt_cost(hashed: bytes) -> int:
    """The cost factor of a ``$2b$12$...`` hash (4 when unreadable)."""
    try:
        return int(hashed.split(b"$")[2])
    except (IndexError, ValueError):
        return 4


def parse_basic(header: str | None) -> tuple[str, str] | None:
    """(user, password) from an ``Authorization`` header value, or None when it is not valid Basic credentials."""
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(token.strip(), validate=True).decode("utf-8")
    except (binascii.Error, ValueError, UnicodeDecodeError):
        return None
    user, sep, password = decoded.partition(":")
    return (user, password) if sep else None


class BasicAuth:
    """Checks ``Authorization: Basic`` headers against bcrypt hashes (see the module docstring)."""

    def __init__(
        self,
        users: dict[str, str],
        max_concurrent: int = DEFAULT_MAX_CONCURRENT,
        cache_ttl: float = DEFAULT_CACHE_TTL,
        cache_size: int = DEFAULT_CACHE_SIZE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.users = {u: h.encode() for u, h in users.items()}
        self.max_concurrent = max_concurrent
        self._slots = threading.BoundedSemaphore(max_concurrent)
        self._cache: OrderedDict[bytes, tuple[bool, float]] = OrderedDict()  # refused pairs, with their expiry
        self._good: OrderedDict[bytes, None] = OrderedDict()  # accepted pairs, most recently used last
        self._good_size = DEFAULT_GOOD_CACHE_SIZE
        self._cache_ttl = cache_ttl
        self._cache_size = cache_size
        self._clock = clock
        self._lock = threading.Lock()
        self.bcrypt_checks = 0
        cost = max((bcrypt_cost(h) for h in self.users.values()), default=4)
        self._dummy = bcrypt.hashpw(b"no such user", bcrypt.gensalt(rounds=cost)) if self.users else b""

    @property
    def enabled(self) -> bool:
        return bool(self.users)

    @staticmethod
    def _key(user: str, password: str) -> bytes:
        return hashlib.sha256(user.encode("utf-8", "surrogatepass") + b"\0" + password.encode("utf-8")).digest()

    def cached(self, header: str | None) -> bool | None:
        """The verdict without bcrypt when there is one (no users, malformed header, cached pair); else None."""
        if not self.users:
            return True
        creds = parse_basic(header)
        if creds is None:
            return False
        key = self._key(*creds)
        with self._lock:
            if key in self._good:
                self._good.move_to_end(key)
                return True
            entry = self._cache.get(key)
            if entry is not None:
                if entry[1] > self._clock():
                    return entry[0]
                del self._cache[key]
        return None

    def verify(self, header: str | None) -> bool:
        """The verdict, running bcrypt when needed (blocks; at most ``max_concurrent`` at a time)."""
        verdict = self.cached(header)
        if verdict is not None:
            return verdict
        creds = parse_basic(header)
        assert creds is not None  # cached() answered False otherwise
        user, password = creds
        hashed = self.users.get(user)
        with self._slots:
            verdict = self.cached(header)  # another request may have checked the same pair meanwhile
            if verdict is not None:
                return verdict
            self.bcrypt_checks += 1
            try:  # an unknown user is checked against the dummy hash: the same cost, then refused
                ok = bcrypt.checkpw(password.encode("utf-8"), hashed if hashed is not None else self._dummy)
            except ValueError:
                ok = False
        ok = ok and hashed is not None
        self._remember(self._key(user, password), ok)
        return ok

    def _remember(self, key: bytes, ok: bool) -> None:
        with self._lock:
            if ok:
                self._good[key] = None
                self._good.move_to_end(key)
                while len(self._good) > self._good_size:
                    self._good.popitem(last=False)
                return
            self._cache[key] = (ok, self._clock() + self._cache_ttl)
            self._cache.move_to_end(key)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)

    def check(self, header: str | None) -> bool:
        """Alias of ``verify`` (the earlier interface)."""
        return self.verify(header)
