"""`python -m tests.client_server COMMAND...`: run COMMAND against a fresh `retrieval serve` with API keys.

The clients' test suites (clients/python, clients/typescript) run this way: the server is started as
`make serve` starts it (embedded PostgreSQL, local model, the sample corpus), with three API keys, and
COMMAND gets its address and the keys in the environment:

- RETRIEVAL_URL: `http://127.0.0.1:PORT`
- RETRIEVAL_API_KEY: read, write and admin on every store, no rate limit
- RETRIEVAL_READ_KEY: read only, every store, no rate limit
- RETRIEVAL_LIMITED_KEY: read on every store, LIMITED_REQUESTS requests per LIMITED_WINDOW_S-second window

The exit status is COMMAND's; the server and its database are stopped either way.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

from tests.doc_examples import served_app

KEYS = {
    "RETRIEVAL_API_KEY": ("client-tests-admin", "rk_client_tests_admin", ["read", "write", "admin"], None),
    "RETRIEVAL_READ_KEY": ("client-tests-read", "rk_client_tests_read", ["read"], None),
    "RETRIEVAL_LIMITED_KEY": ("client-tests-limited", "rk_client_tests_limited", ["read"], (3, 2)),
}


def api_keys_setting() -> str:
    """The API_KEYS value granting the keys above."""
    entries = []
    for name, key, scopes, limit in KEYS.values():
        entry: dict[str, object] = {
            "name": name,
            "sha256": hashlib.sha256(key.encode()).hexdigest(),
            "stores": ["*"],
            "scopes": scopes,
        }
        if limit is not None:
            entry["rateLimit"] = {"requests": limit[0], "windowSeconds": limit[1]}
        entries.append(entry)
    return json.dumps(entries)


def main(command: list[str]) -> int:
    """Run `command` against the server; its exit status."""
    if not command:
        print(__doc__, file=sys.stderr)
        return 2
    # The suites send far more than RATE_LIMIT_REQUESTS' default 600 a minute with the admin key (the
    # generated-id tests alone some 400 per run); the limited key keeps its own limit for the 429 tests.
    with served_app({"API_KEYS": api_keys_setting(), "RATE_LIMIT_REQUESTS": "0"}) as app:
        env = {**os.environ, "RETRIEVAL_URL": f"http://{app.address}"}
        env.update({variable: key for variable, (_, key, _, _) in KEYS.items()})
        limited = KEYS["RETRIEVAL_LIMITED_KEY"][3]
        assert limited is not None
        env.update(LIMITED_REQUESTS=str(limited[0]), LIMITED_WINDOW_S=str(limited[1]))
        return subprocess.run(command, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
