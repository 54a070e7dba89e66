"""Local servers the tests start on 127.0.0.1 and stop afterwards."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from typing import Any


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# moto_server, answering one request at a time. The threaded one checks a DynamoDB condition and then
# updates without a lock, so two concurrent conditional updates of one item can both pass there; DynamoDB
# applies each UpdateItem atomically, as this serial server does. Werkzeug's own request handler: moto's
# (5.2.5 and later) only keeps underscores in S3 metadata header names, which DynamoDB requests never have.
_SERIAL_MOTO = """
import sys
from werkzeug.serving import run_simple
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

run_simple("127.0.0.1", int(sys.argv[1]), DomainDispatcherApplication(create_backend_app), threaded=False)
"""


class MotoServer:
    """`moto_server` in a subprocess: real AWS APIs (DynamoDB, SQS) over HTTP for real boto3 clients.

    `serial`: one request at a time, so that each DynamoDB update is atomic as in DynamoDB.
    """

    def __init__(self, serial: bool = False) -> None:
        self.port = free_port()
        self.endpoint_url = f"http://127.0.0.1:{self.port}"
        self._process: subprocess.Popen[bytes] | None = None
        self._serial = serial

    def start(self) -> None:
        command = (
            [sys.executable, "-c", _SERIAL_MOTO, str(self.port)]
            if self._serial
            else [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)]
        )
        self._process = subprocess.Popen(
            command,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("moto_server did not start within 20 s")

    def __enter__(self) -> MotoServer:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            self._process.wait(timeout=10)
            self._process = None

    def client(self, service: str) -> Any:
        import boto3
        from botocore.config import Config

        return boto3.client(  # type: ignore[call-overload]  # any service's name, given at run time
            service,
            endpoint_url=self.endpoint_url,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            # A refused connection fails at once; a busy serial server may take seconds to answer.
            config=Config(retries={"max_attempts": 1}, connect_timeout=1, read_timeout=10),
        )


def create_ttl_table(dynamodb: Any, name: str, key: str, ttl_attribute: str) -> None:
    """An on-demand table with one string hash key and TTL on `ttl_attribute`."""
    dynamodb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    dynamodb.update_time_to_live(
        TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": ttl_attribute}
    )


def create_cache_table(dynamodb: Any, name: str) -> None:
    """The cache table as template.yaml declares it: `pk` string key, TTL on `expiresAt`."""
    create_ttl_table(dynamodb, name, "pk", "expiresAt")


def create_idempotency_table(dynamodb: Any, name: str) -> None:
    """The idempotency table as template.yaml declares it: `id` string key, TTL on `expiration`."""
    create_ttl_table(dynamodb, name, "id", "expiration")


class XRayDaemon:
    """A UDP socket on 127.0.0.1 where the X-Ray SDK sends its segment documents, as to the daemon."""

    def __init__(self) -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.setblocking(False)
        self.address = f"127.0.0.1:{self._sock.getsockname()[1]}"

    def documents(self) -> list[dict[str, Any]]:
        """The (sub)segment documents received so far: each datagram is a JSON header line, then one."""
        received: list[dict[str, Any]] = []
        while True:
            try:
                datagram = self._sock.recv(65_536).decode()
            except BlockingIOError:
                return received
            received.append(json.loads(datagram.split("\n", 1)[1]))

    def __enter__(self) -> XRayDaemon:
        return self

    def __exit__(self, *_: object) -> None:
        self._sock.close()
