"""Where cached bytes live: an in-process TTL LRU (local default) or a DynamoDB table."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Protocol

from retrieval_core.exceptions import CacheUnavailableError

Clock = Callable[[], float]

# DynamoDB refuses items over 400 KB; keep room for the key and attribute names.
DYNAMODB_MAX_VALUE_BYTES = 400 * 1024 - 1024

# After DynamoDB fails, the cache is not asked again for this long: a request makes several cache calls,
# and an outage must cost one failed call every few seconds per process, not several per request.
PAUSE_AFTER_FAILURE_S = 10.0


class ValueTooLargeError(Exception):
    """The value exceeds what the backend can hold; it is not cached."""


class CacheBackend(Protocol):
    """Bytes by key, each with its own expiry."""

    def get(self, key: str) -> bytes | None:
        """The live value, or None when absent or expired."""
        ...

    def put(self, key: str, value: bytes, ttl_s: float) -> None:
        """Store `value` until `ttl_s` seconds from now."""
        ...


class MemoryBackend:
    """A thread-safe LRU of at most `max_items`, each entry expiring on its own."""

    def __init__(self, max_items: int, clock: Clock = time.monotonic) -> None:
        self._max_items = max_items
        self._clock = clock
        # expiry and value
        self._items: OrderedDict[str, tuple[float, bytes]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> bytes | None:
        with self._lock:
            entry = self._items.get(key)
            if entry is None:
                return None
            expires_at, value = entry
            if expires_at <= self._clock():
                del self._items[key]
                return None
            self._items.move_to_end(key)
            return value

    def put(self, key: str, value: bytes, ttl_s: float) -> None:
        with self._lock:
            self._items[key] = (self._clock() + ttl_s, value)
            self._items.move_to_end(key)
            while len(self._items) > self._max_items:
                self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)


class DynamoDBBackend:
    """One item per key: `pk` (S), `value` (B, already compressed) and `expiresAt` (N, the TTL attribute).

    DynamoDB deletes expired items lazily, hours later at worst, so reads check `expiresAt`
    themselves. Only GetItem and PutItem are used (the template grants nothing else).
    After a failure every call fails at once, without the network, for PAUSE_AFTER_FAILURE_S.
    """

    def __init__(self, table_name: str, client_factory: Callable[[], Any], clock: Clock = time.time) -> None:
        self._table = table_name
        self._client_factory = client_factory
        self._client: Any = None
        self._clock = clock
        self._paused_until = 0.0

    @property
    def client(self) -> Any:
        """The boto3 DynamoDB client, created on first use."""
        if self._client is None:
            self._client = self._client_factory()
        return self._client

    def get(self, key: str) -> bytes | None:
        item = self._call(
            "GetItem",
            lambda: self.client.get_item(
                TableName=self._table,
                Key={"pk": {"S": key}},
                ProjectionExpression="#v, expiresAt",
                ExpressionAttributeNames={"#v": "value"},
            ),
        ).get("Item")
        if not item or float(item["expiresAt"]["N"]) <= self._clock():
            return None
        return bytes(item["value"]["B"])

    def put(self, key: str, value: bytes, ttl_s: float) -> None:
        if len(value) > DYNAMODB_MAX_VALUE_BYTES:
            raise ValueTooLargeError(f"{len(value)} bytes exceed DynamoDB's item limit")
        expires_at = int(self._clock() + ttl_s) + 1  # whole seconds, never earlier than asked
        item = {"pk": {"S": key}, "value": {"B": value}, "expiresAt": {"N": str(expires_at)}}
        self._call("PutItem", lambda: self.client.put_item(TableName=self._table, Item=item))

    def _call(self, operation: str, call: Callable[[], Any]) -> Any:
        from botocore.exceptions import BotoCoreError, ClientError

        if self._clock() < self._paused_until:
            raise CacheUnavailableError(
                f"DynamoDB {operation} skipped: the cache failed less than {PAUSE_AFTER_FAILURE_S:.0f} s ago"
            )
        try:
            return call()
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "unknown")
            self._paused_until = self._clock() + PAUSE_AFTER_FAILURE_S
            raise CacheUnavailableError(f"DynamoDB {operation} failed: {code}") from exc
        except BotoCoreError as exc:
            self._paused_until = self._clock() + PAUSE_AFTER_FAILURE_S
            raise CacheUnavailableError(f"DynamoDB {operation} failed: {type(exc).__name__}") from exc
