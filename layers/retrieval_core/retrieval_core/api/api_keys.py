"""The configured API keys: SHA-256 digests, each with the grant it carries (docs/security.md).

Three sources, read together:
- API_KEYS: a JSON list of `{"name", "sha256", "stores", "scopes"}` (scoped keys), each optionally with
  its own `"rateLimit": {"requests", "windowSeconds"}`;
- API_KEY_HASHES: comma- or whitespace-separated digests, each a read-only key on every store;
- the secret named by API_KEY_SECRET_ARN: either form (a JSON list, or digests).

Neither the environment nor the secret holds a usable key, and no error here quotes a digest, a key or
a key's name (someone may have pasted a key or a digest into the wrong field): errors name the entry
by its position.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from retrieval_core.clients.secret_store import read_secret
from retrieval_core.exceptions import AuthenticationUnavailableError, ConfigurationError
from retrieval_core.grants import ALL_STORES, SCOPES, Grant, Scope
from retrieval_core.ratelimit.window import RateLimit, parse_rate_limit
from retrieval_core.settings import Settings

# API_KEY_HASHES digests (and a secret of digests): read-only keys on every store.
READ_ONLY_KEY = Grant(name="api-key", scopes=frozenset({"read"}), stores=None)
ENTRY_FIELDS = ("name", "sha256", "stores", "scopes")
OPTIONAL_FIELDS = ("rateLimit",)
_DIGEST = re.compile(r"^[0-9a-fA-F]{64}$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,63}$")
_HINT = "make them with `retrieval make-api-key` or `retrieval hash-api-key`"


@dataclass(frozen=True, slots=True)
class ApiKey:
    """One accepted key: the digest of the key, and what the key may do."""

    digest: bytes
    grant: Grant
    # Where it is configured ("API_KEYS entry 2"), for error messages.
    origin: str = field(default="", compare=False)


def hash_api_key(key: str) -> str:
    """The SHA-256 hex digest to configure for `key` (what `retrieval hash-api-key` prints)."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def parse_key_hashes(text: str, source: str) -> list[bytes]:
    """Digests from a comma- or whitespace-separated list; anything else is a configuration error."""
    digests = []
    for item in re.split(r"[\s,]+", text.strip()):
        if not item:
            continue
        if not _DIGEST.match(item):
            raise ConfigurationError(
                f"{source} must hold SHA-256 hex digests of API keys (64 hex characters each); {_HINT}"
            )
        digests.append(bytes.fromhex(item))
    return digests


def parse_api_keys(text: str, source: str) -> list[ApiKey]:
    """Scoped keys from a JSON list of `{"name", "sha256", "stores", "scopes"}` objects."""
    try:
        entries = json.loads(text)
    except ValueError:
        raise ConfigurationError(f"{source} is not valid JSON: expected a list of key entries") from None
    if not isinstance(entries, list):
        raise ConfigurationError(f"{source} must be a JSON list of key entries")
    return [_entry(entry, f"{source} entry {index}") for index, entry in enumerate(entries, start=1)]


def _entry(entry: Any, where: str) -> ApiKey:
    if not isinstance(entry, dict):
        raise ConfigurationError(f"{where} must be an object with {', '.join(ENTRY_FIELDS)}")
    name = entry.get("name")
    if not isinstance(name, str) or not _NAME.match(name) or _DIGEST.match(name):
        raise ConfigurationError(
            f"{where}: name must be 1-64 letters, digits or ._:@-, starting alphanumeric (not a digest)"
        )
    if set(entry) - set(OPTIONAL_FIELDS) != set(ENTRY_FIELDS):
        # Unknown fields are refused, not ignored: a misspelt "store" would otherwise grant every store.
        raise ConfigurationError(
            f"{where}: needs exactly the fields {', '.join(ENTRY_FIELDS)} (and optionally rateLimit)"
        )
    digest = entry["sha256"]
    if not isinstance(digest, str) or not _DIGEST.match(digest):
        raise ConfigurationError(f"{where}: sha256 must be the SHA-256 hex digest of the key; {_HINT}")
    grant = Grant(name, _scopes(entry["scopes"], where), _stores(entry, where), _rate_limit(entry, where))
    return ApiKey(bytes.fromhex(digest), grant, where)


def _scopes(value: Any, where: str) -> frozenset[Scope]:
    if not isinstance(value, list) or not value or not all(isinstance(s, str) and s in SCOPES for s in value):
        raise ConfigurationError(f"{where}: scopes must be a non-empty list of {', '.join(SCOPES)}")
    return frozenset(s for s in SCOPES if s in value)


def _stores(entry: dict[str, Any], where: str) -> frozenset[str] | None:
    value = entry["stores"]
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(s, str) and s.strip() == s and s for s in value)
    ):
        raise ConfigurationError(f'{where}: stores must be a non-empty list of store names, or ["*"]')
    if ALL_STORES in value:
        if len(value) > 1:
            raise ConfigurationError(f'{where}: "*" already means every store; list it alone')
        return None
    return frozenset(value)


def _rate_limit(entry: dict[str, Any], where: str) -> RateLimit | None:
    if "rateLimit" not in entry:
        return None
    try:
        return parse_rate_limit(entry["rateLimit"], where)
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from None


def parse_secret(text: str) -> list[ApiKey]:
    """The API key secret: a JSON list of key entries, or (as before) digests of read-only keys."""
    if text.lstrip().startswith("["):
        return parse_api_keys(text, "the API key secret")
    return read_only_keys(text, "the API key secret")


def read_only_keys(text: str, source: str) -> list[ApiKey]:
    """Plain digests (comma- or whitespace-separated): read-only keys on every store."""
    digests = parse_key_hashes(text, source)
    return [ApiKey(d, READ_ONLY_KEY, f"{source} digest {i}") for i, d in enumerate(digests, start=1)]


def keys_configured(settings: Settings) -> bool:
    """Whether any API key source is set (then a request needs a key, unless JWT_AUTH lets a token in)."""
    return bool(settings.api_keys.strip() or settings.api_key_hashes.strip() or settings.api_key_secret_arn)


def configured_keys(settings: Settings) -> tuple[ApiKey, ...]:
    """Every accepted key from every source; the secret is read through a 5-minute cache."""
    secret = None
    if settings.api_key_secret_arn:
        # Fail closed: without the list, nobody is let in.
        secret = read_secret(
            settings.api_key_secret_arn,
            lambda _code: AuthenticationUnavailableError(
                "could not read the API key secret; try again later"
            ),
            variable="API_KEY_SECRET_ARN",
        )
    return _parsed_keys(settings.api_keys, settings.api_key_hashes, secret)


@lru_cache(maxsize=8)
def _parsed_keys(api_keys: str, api_key_hashes: str, secret: str | None) -> tuple[ApiKey, ...]:
    # Cached on the texts: requests do not re-parse JSON, and a rotated secret is new text.
    keys = parse_api_keys(api_keys, "API_KEYS") if api_keys.strip() else []
    keys += read_only_keys(api_key_hashes, "API_KEY_HASHES")
    keys += parse_secret(secret) if secret is not None else []
    refuse_duplicates(keys)
    return tuple(keys)


def refuse_duplicates(keys: list[ApiKey]) -> None:
    """ConfigurationError when two keys share a digest (which grant would apply?) or a name."""
    names: dict[str, ApiKey] = {}
    digests: dict[bytes, ApiKey] = {}
    for key in keys:
        if key.digest in digests:
            raise ConfigurationError(
                f"{digests[key.digest].origin} and {key.origin} have the same sha256; list each key once"
            )
        digests[key.digest] = key
        if key.grant is READ_ONLY_KEY:
            continue  # plain digests share one name
        if key.grant.name in names:
            raise ConfigurationError(
                f"{names[key.grant.name].origin} and {key.origin} have the same name; names must be unique"
            )
        names[key.grant.name] = key


def match_key(presented: str | None, keys: tuple[ApiKey, ...] | list[ApiKey]) -> Grant | None:
    """The grant of the key `presented` hashes to, or None; compared with every digest in constant time."""
    candidate = hashlib.sha256((presented or "").encode("utf-8")).digest()
    found: Grant | None = None
    for key in keys:
        # No early exit and no short-circuit: every digest is compared whatever the earlier ones gave,
        # so timing reveals neither whether nor which key matched.
        equal = hmac.compare_digest(candidate, key.digest)
        found = key.grant if equal else found
    return found if presented else None
