"""Where the windows are counted: in process (local default) or in DynamoDB, shared by every instance.

Both take a cost from a window's count only while count + cost stays within the limit, atomically: two
callers (threads, or Lambda instances) can never both take the last unit.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

Clock = Callable[[], float]
# Sweep expired windows once the in-process table holds this many.
MEMORY_SWEEP_AT = 4096


class RateCounterError(Exception):
    """The shared counter could not be reached or failed; the limiter lets the request through."""


class RateCounter(Protocol):
    """Counts per window key."""

    def take(self, key: str, cost: int, limit: int, expires_at: int) -> bool:
        """Add `cost` to `key`'s count if the sum stays <= `limit`; True when added."""
        ...


class MemoryCounter:
    """A thread-safe dict of counts: one process's view, for `make serve` without DynamoDB."""

    def __init__(self, clock: Clock = time.time) -> None:
        self._clock = clock
        self._counts: dict[str, tuple[int, int]] = {}  # key: (count, expires_at)
        self._lock = threading.Lock()

    def take(self, key: str, cost: int, limit: int, expires_at: int) -> bool:
        with self._lock:
            if len(self._counts) >= MEMORY_SWEEP_AT:
                now = self._clock()
                self._counts = {k: v for k, v in self._counts.items() if v[1] > now}
            count = self._counts.get(key, (0, expires_at))[0]
            if count + cost > limit:
                return False
            self._counts[key] = (count + cost, expires_at)
            return True


class DynamoDBCounter:
    """One item per window: `pk` (S), `count` (N) and `expiresAt` (N, the table's TTL attribute).

    One conditional UpdateItem per request: ADD the cost if the count leaves room for it. The key names
    its window, so an expired item that TTL has not deleted yet is never read again.
    """

    def __init__(self, table_name: str, client_factory: Callable[[], Any]) -> None:
        self._table = table_name
        self._client_factory = client_factory
        self._client: Any = None

    @property
    def client(self) -> Any:
        """The boto3 DynamoDB client, created on first use."""
        if self._client is None:
            self._client = self._client_factory()
        return self._client

    def take(self, key: str, cost: int, limit: int, expires_at: int) -> bool:
        from botocore.exceptions import BotoCoreError, ClientError

        if cost > limit:
            return False  # the condition below would let it into an empty window
        try:
            self.client.update_item(
                TableName=self._table,
                Key={"pk": {"S": key}},
                UpdateExpression="ADD #count :cost SET expiresAt = :expires",
                ConditionExpression="attribute_not_exists(#count) OR #count <= :room",
                ExpressionAttributeNames={"#count": "count"},
                ExpressionAttributeValues={
                    ":cost": {"N": str(cost)},
                    ":room": {"N": str(limit - cost)},
                    ":expires": {"N": str(expires_at)},
                },
            )
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "unknown")
            if code == "ConditionalCheckFailedException":
                return False
            raise RateCounterError(f"DynamoDB UpdateItem failed: {code}") from exc
        except BotoCoreError as exc:
            raise RateCounterError(f"DynamoDB UpdateItem failed: {type(exc).__name__}") from exc
        return True
