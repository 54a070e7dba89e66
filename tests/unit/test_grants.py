"""Grants, the API key configuration and JWT claims. Pure: no I/O."""

from __future__ import annotations

import json
from typing import Any

import pytest

from retrieval_core.api.api_keys import (
    READ_ONLY_KEY,
    ApiKey,
    hash_api_key,
    match_key,
    parse_api_keys,
    parse_secret,
    refuse_duplicates,
)
from retrieval_core.exceptions import ConfigurationError, ForbiddenError, StoreNotFoundError
from retrieval_core.grants import Grant, grant_from_claims, parse_store_setting, parse_stores

KEY = "rk_live_" + "c3" * 20
DIGEST = hash_api_key(KEY)


def entry(**fields: Any) -> dict[str, Any]:
    return {"name": "ingest-bot", "sha256": DIGEST, "stores": ["docs"], "scopes": ["read", "write"], **fields}


def parse(*entries: Any) -> list[ApiKey]:
    return parse_api_keys(json.dumps(list(entries)), "API_KEYS")


# Grant rules.


def test_a_missing_scope_is_403_and_a_store_outside_is_404_naming_the_store_as_written() -> None:
    grant = Grant("bot", frozenset({"write"}), frozenset({"docs"}))
    with pytest.raises(ForbiddenError) as forbidden:
        grant.require("read", "docs")
    assert forbidden.value.status_code == 403 and forbidden.value.details == {"requiredScope": "read"}
    grant.require_scope("write")  # scopes are independent: write without read is a valid grant
    with pytest.raises(StoreNotFoundError) as unknown:
        grant.require("write", "secret-store", requested_as="Secret Store")
    assert unknown.value.status_code == 404
    assert unknown.value.message == str(StoreNotFoundError("Secret Store"))
    assert Grant("all", frozenset({"read"}), None).can_access("anything")


# API_KEYS entries.


def test_an_entry_becomes_a_named_grant_and_star_means_every_store() -> None:
    scoped, everywhere = parse(
        entry(sha256=DIGEST.upper()),
        entry(name="reader", sha256=hash_api_key("other"), stores=["*"], scopes=["read"]),
    )
    assert scoped == ApiKey(
        bytes.fromhex(DIGEST), Grant("ingest-bot", frozenset({"read", "write"}), frozenset({"docs"}))
    )
    assert everywhere.grant == Grant("reader", frozenset({"read"}), None)


def test_a_write_only_uploader_key_is_legitimate() -> None:
    (uploader,) = parse(entry(scopes=["write"]))
    assert uploader.grant.scopes == frozenset({"write"})


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ({"nope": 1}, "must be a JSON list"),
        ("not json", "not valid JSON"),
        ([["a"]], "must be an object"),
        ([entry(name="")], "name must be"),
        ([entry(name="has space")], "name must be"),
        ([entry(name=DIGEST)], "name must be"),  # a digest pasted into the wrong field
        ([entry(name=KEY, sha256=hash_api_key("x"), scopes=["nope"])], "scopes must be"),
        ([entry(sha256=KEY)], "sha256 must be"),
        ([entry(sha256=DIGEST[:-1])], "sha256 must be"),
        ([entry(stores=[])], "stores must be"),
        ([entry(stores="docs")], "stores must be"),
        ([entry(stores=["docs", "*"])], "list it alone"),
        ([entry(stores=[" docs"])], "stores must be"),
        ([entry(scopes=[])], "scopes must be"),
        ([entry(scopes=["read", "delete"])], "scopes must be"),
        ([entry(scopes="read")], "scopes must be"),
        ([{**entry(), "store": ["docs"]}], "exactly the fields"),
        ([{k: v for k, v in entry().items() if k != "stores"}], "exactly the fields"),
    ],
    ids=[
        "object",
        "json",
        "entry-type",
        "empty-name",
        "name-chars",
        "name-is-digest",
        "key-as-name",
        "key-not-digest",
        "short-digest",
        "no-stores",
        "stores-string",
        "star-mixed",
        "store-spaces",
        "no-scopes",
        "unknown-scope",
        "scopes-string",
        "misspelt-field",
        "missing-field",
    ],
)
def test_bad_entries_are_configuration_errors_that_never_quote_a_key_or_digest(bad: Any, says: str) -> None:
    text = bad if isinstance(bad, str) else json.dumps(bad)
    with pytest.raises(ConfigurationError) as raised:
        parse_api_keys(text, "API_KEYS")
    message = raised.value.message
    assert says in message and message.startswith("API_KEYS")
    assert KEY not in message and DIGEST not in message and DIGEST[:-1] not in message


def test_duplicate_names_or_digests_are_refused_naming_the_entries_only() -> None:
    with pytest.raises(ConfigurationError) as same_name:
        refuse_duplicates(parse(entry(), entry(sha256=hash_api_key("other"))))
    assert same_name.value.message == (
        "API_KEYS entry 1 and API_KEYS entry 2 have the same name; names must be unique"
    )
    with pytest.raises(ConfigurationError) as same_digest:
        refuse_duplicates(parse(entry(), entry(name="copy")))
    assert same_digest.value.message == (
        "API_KEYS entry 1 and API_KEYS entry 2 have the same sha256; list each key once"
    )
    # A scoped key also listed as a plain digest: which grant would apply? Refused too.
    with pytest.raises(ConfigurationError, match="same sha256"):
        refuse_duplicates([*parse(entry()), ApiKey(bytes.fromhex(DIGEST), READ_ONLY_KEY)])
    # Plain digests share one name; only their digests must differ.
    refuse_duplicates([ApiKey(bytes.fromhex(hash_api_key(k)), READ_ONLY_KEY) for k in ("a", "b")])


def test_the_secret_holds_either_a_json_list_or_plain_digests() -> None:
    assert parse_secret(json.dumps([entry()]))[0].grant.name == "ingest-bot"
    plain = parse_secret(f"{DIGEST}\n{hash_api_key('b')}")
    assert [k.grant for k in plain] == [READ_ONLY_KEY, READ_ONLY_KEY]
    assert READ_ONLY_KEY.scopes == frozenset({"read"}) and READ_ONLY_KEY.stores is None
    with pytest.raises(ConfigurationError, match="the API key secret") as raised:
        parse_secret("[" + KEY)
    assert KEY not in raised.value.message


def test_matching_tells_which_key_matched_whatever_its_position() -> None:
    keys = parse(
        entry(name="first", sha256=hash_api_key("k1")),
        entry(name="second", sha256=hash_api_key("k2"), scopes=["admin"]),
        entry(name="third", sha256=hash_api_key("k3"), stores=["*"]),
    )
    assert [match_key(k, keys).name for k in ("k1", "k2", "k3")] == ["first", "second", "third"]  # type: ignore[union-attr]
    assert match_key("k4", keys) is None and match_key(None, keys) is None


# JWT claims, as API Gateway's JWT authorizer hands them over.


@pytest.mark.parametrize(
    ("claim", "stores"),
    [
        ('["docs", "faq"]', {"docs", "faq"}),
        (["docs", "faq"], {"docs", "faq"}),
        ("docs faq", {"docs", "faq"}),
        ("docs, faq", {"docs", "faq"}),
        ("[docs faq]", {"docs", "faq"}),  # how API Gateway renders an array claim
        ("fileSearchStores/kb-1", {"fileSearchStores/kb-1"}),
        ("*", None),
        ('["*"]', None),
        ("", set()),
        (42, set()),
        ([1, 2], set()),
    ],
    ids=[
        "json",
        "list",
        "spaces",
        "commas",
        "apigw-array",
        "gemini",
        "star",
        "json-star",
        "empty",
        "number",
        "ints",
    ],
)
def test_stores_claim_forms(claim: Any, stores: set[str] | None) -> None:
    expected = None if stores is None else frozenset(stores)
    assert parse_stores(claim) == expected
    grant = grant_from_claims(
        {"sub": "u1", "scope": "retrieval:read", "retrieval_stores": claim}, "retrieval_stores"
    )
    assert grant.stores == expected


def test_scopes_come_from_the_oauth_scope_claim() -> None:
    claims = {"sub": "svc", "scope": "openid retrieval:read retrieval:admin profile read", "stores": "*"}
    grant = grant_from_claims(claims, "stores")
    assert grant == Grant("jwt:svc", frozenset({"read", "admin"}), None)
    assert grant_from_claims({"client_id": "app"}, "stores") == Grant("jwt:app", frozenset(), frozenset())


def test_queue_stores_setting() -> None:
    assert parse_store_setting("docs, faq", "QUEUE_STORES") == frozenset({"docs", "faq"})
    assert parse_store_setting("*", "QUEUE_STORES") is None
    with pytest.raises(ConfigurationError, match="QUEUE_STORES is empty"):
        parse_store_setting(" , ", "QUEUE_STORES")
