"""`retrieval hash-api-key` and `make-api-key`: the entries that API_KEY_HASHES and API_KEYS list."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from retrieval_core.exceptions import ConfigurationError


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add `hash-api-key` and `make-api-key`."""
    p_hash = sub.add_parser(
        "hash-api-key",
        help="print the SHA-256 digest to list in API_KEY_HASHES for a key read from stdin (or a prompt)",
    )
    p_hash.set_defaults(run=_hash_api_key)
    p_key = sub.add_parser(
        "make-api-key", help="print a new random API key (once) and its entry for API_KEYS or the key secret"
    )
    p_key.add_argument("--name", required=True, help="a unique name for the key, e.g. ingest-bot")
    p_key.add_argument("--stores", required=True, help="comma-separated store names, or * for every store")
    p_key.add_argument("--scopes", default="read", help="comma-separated: read, write, admin (default: read)")
    p_key.add_argument(
        "--rate-limit",
        help="the key's own rate limit, REQUESTS/SECONDS (e.g. 5000/60; 0/60: unlimited); "
        "default: RATE_LIMIT_REQUESTS per RATE_LIMIT_WINDOW_S",
    )
    p_key.set_defaults(run=_make_api_key)


def _hash_api_key(args: argparse.Namespace) -> int:
    # Read, never taken as an argument: arguments end up in shell history and `ps`.
    import getpass

    from retrieval_core.api.api_keys import hash_api_key

    key = getpass.getpass("API key: ") if sys.stdin.isatty() else sys.stdin.readline().rstrip("\r\n")
    if not key:
        print("error: no API key given on standard input", file=sys.stderr)
        return 2
    print(hash_api_key(key))
    return 0


def _make_api_key(args: argparse.Namespace) -> int:
    import json
    import secrets

    from retrieval_core.api.api_keys import hash_api_key, parse_api_keys

    key = "rk_" + secrets.token_urlsafe(32)
    entry: dict[str, object] = {
        "name": args.name,
        "sha256": hash_api_key(key),
        "stores": [s.strip() for s in args.stores.split(",") if s.strip()],
        "scopes": [s.strip() for s in args.scopes.split(",") if s.strip()],
    }
    if args.rate_limit is not None:
        requests, _, seconds = args.rate_limit.partition("/")
        if not (requests.strip().isdigit() and seconds.strip().isdigit()):
            raise ConfigurationError("--rate-limit must be REQUESTS/SECONDS, e.g. 5000/60")
        entry["rateLimit"] = {"requests": int(requests), "windowSeconds": int(seconds)}
    text = json.dumps(entry)
    parse_api_keys(f"[{text}]", "make-api-key")  # the service must accept what we print
    # The key goes to stdout alone on the first line, so a script can capture it; it is never stored.
    print(key)
    print(text)
    print(
        "The first line is the key: keep it now, it is not shown again. Add the second line to the JSON "
        "list in API_KEYS or in the API key secret.",
        file=sys.stderr,
    )
    return 0
