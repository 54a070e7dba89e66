"""The window arithmetic, the rateLimit field of a key entry, and the in-process counter."""

from __future__ import annotations

import json

import pytest

from retrieval_core.api.api_keys import parse_api_keys
from retrieval_core.exceptions import ConfigurationError, RateLimitedError
from retrieval_core.ratelimit.counters import MEMORY_SWEEP_AT, MemoryCounter
from retrieval_core.ratelimit.limiter import RateLimiter
from retrieval_core.ratelimit.window import TTL_SLACK_S, RateLimit, parse_rate_limit, window_at
from tests.fakes.clock import ManualClock

DIGEST = "ab" * 32


def test_windows_are_aligned_on_the_epoch_so_every_instance_names_the_same_counter() -> None:
    limit = RateLimit(200, 60)
    first = window_at("key:abc", limit, 1_800_000_000.0)  # a multiple of 60
    assert (first.start, first.end) == (1_800_000_000, 1_800_000_060)
    assert window_at("key:abc", limit, 1_800_000_059.999) == first
    after = window_at("key:abc", limit, 1_800_000_060.0)
    assert after.start == first.end and after.key != first.key
    # Another credential, or the same one under another window length, counts apart.
    assert window_at("key:def", limit, 1_800_000_000.0).key != first.key
    assert window_at("key:abc", RateLimit(200, 30), 1_800_000_000.0).key != first.key
    assert first.key == "ratelimit#key:abc#60#1800000000"


def test_retry_after_is_the_whole_seconds_left_in_the_window_and_never_zero() -> None:
    window = window_at("s", RateLimit(1, 60), 1_800_000_000.0)
    assert window.retry_after_s(1_800_000_000.0) == 60
    assert window.retry_after_s(1_800_000_030.2) == 30  # 29.8 s left: rounded up
    assert window.retry_after_s(1_800_000_059.99) == 1
    assert window.retry_after_s(1_800_000_060.0) == 1  # a late clock still gets a usable answer


def test_a_counter_expires_a_little_after_its_window() -> None:
    window = window_at("s", RateLimit(1, 60), 1_800_000_010.0)
    assert window.expires_at == 1_800_000_060 + TTL_SLACK_S


@pytest.mark.parametrize(
    "value",
    [
        {"requests": True, "windowSeconds": 60},
        {"requests": "200", "windowSeconds": 60},
        {"requests": 1.5, "windowSeconds": 60},
        {"requests": -1, "windowSeconds": 60},
        {"requests": 1_000_001, "windowSeconds": 60},
        {"requests": 10, "windowSeconds": 0},
        {"requests": 10, "windowSeconds": 3601},
        {"requests": 10},
        {"requests": 10, "windowSeconds": 60, "burst": 5},
        [10, 60],
        "200/60",
    ],
)
def test_a_malformed_rate_limit_is_refused_with_its_place(value: object) -> None:
    with pytest.raises(ValueError, match="API_KEYS entry 1: rateLimit"):
        parse_rate_limit(value, "API_KEYS entry 1")


def test_a_key_entry_may_carry_its_own_rate_limit_and_zero_means_unlimited() -> None:
    entries = [
        {"name": "bot", "sha256": DIGEST, "stores": ["*"], "scopes": ["read"]},
        {
            "name": "fast",
            "sha256": "cd" * 32,
            "stores": ["*"],
            "scopes": ["read"],
            "rateLimit": {"requests": 5000, "windowSeconds": 60},
        },
        {
            "name": "batch-job",
            "sha256": "ef" * 32,
            "stores": ["*"],
            "scopes": ["read"],
            "rateLimit": {"requests": 0, "windowSeconds": 1},
        },
    ]
    keys = parse_api_keys(json.dumps(entries), "API_KEYS")
    assert [k.grant.rate_limit for k in keys] == [None, RateLimit(5000, 60), RateLimit(0, 1)]
    assert keys[2].grant.rate_limit is not None and keys[2].grant.rate_limit.unlimited


def test_a_bad_rate_limit_or_a_misspelt_field_in_a_key_entry_is_a_configuration_error() -> None:
    entry = {"name": "bot", "sha256": DIGEST, "stores": ["*"], "scopes": ["read"]}
    with pytest.raises(ConfigurationError, match=r"API_KEYS entry 1: rateLimit\.requests") as bad:
        parse_api_keys(
            json.dumps([{**entry, "rateLimit": {"requests": -5, "windowSeconds": 60}}]), "API_KEYS"
        )
    assert DIGEST not in bad.value.message
    with pytest.raises(ConfigurationError, match="optionally rateLimit"):
        parse_api_keys(json.dumps([{**entry, "ratelimit": {"requests": 5, "windowSeconds": 60}}]), "API_KEYS")


def test_the_memory_counter_lets_exactly_the_limit_through_and_a_cost_only_if_it_fits() -> None:
    counter = MemoryCounter()
    assert [counter.take("w", 1, 3, 100) for _ in range(4)] == [True, True, True, False]
    assert counter.take("other", 2, 3, 100) is True
    assert counter.take("other", 2, 3, 100) is False  # 4 > 3: refused whole, nothing taken
    assert counter.take("other", 1, 3, 100) is True


def test_the_memory_counter_forgets_windows_that_ended() -> None:
    clock = ManualClock(1_000.0)
    counter = MemoryCounter(clock)
    for i in range(MEMORY_SWEEP_AT):
        counter.take(f"old-{i}", 1, 1, 500)
    clock.now = 2_000.0
    counter.take("new", 1, 1, 2_100)
    assert len(counter._counts) == 1  # the sweep kept only the live window


def test_the_limiter_refuses_with_retry_after_until_the_next_window() -> None:
    clock = ManualClock(1_800_000_000.0)
    limiter = RateLimiter(MemoryCounter(clock), RateLimit(600, 60), shared=False, clock=clock)
    own = RateLimit(2, 10)
    limiter.check("key:a", own)
    limiter.check("key:a", own)
    clock.now += 4.5
    with pytest.raises(RateLimitedError) as refused:
        limiter.check("key:a", own)
    assert refused.value.status_code == 429 and refused.value.code == "rate_limited"
    assert refused.value.retry_after_s == 6  # 5.5 s left, rounded up
    assert refused.value.details == {"limit": 2, "windowSeconds": 10, "retryAfterSeconds": 6}
    limiter.check("key:b", own)  # another credential has its own count
    clock.now += 6
    limiter.check("key:a", own)


def test_the_default_applies_without_a_grant_limit_and_zero_is_unlimited() -> None:
    clock = ManualClock(1_800_000_000.0)
    limiter = RateLimiter(MemoryCounter(clock), RateLimit(3, 60), shared=False, clock=clock)
    for _ in range(3):
        limiter.check("jwt:x", None)
    with pytest.raises(RateLimitedError):
        limiter.check("jwt:x", None)
    for _ in range(1000):
        limiter.check("key:unlimited", RateLimit(0, 60))
    unlimited_by_default = RateLimiter(MemoryCounter(clock), RateLimit(0, 60), shared=False, clock=clock)
    for _ in range(1000):
        unlimited_by_default.check("jwt:x", None)


def test_a_cost_larger_than_the_room_left_is_refused_and_takes_nothing() -> None:
    clock = ManualClock(1_800_000_000.0)
    limiter = RateLimiter(MemoryCounter(clock), RateLimit(5, 60), shared=False, clock=clock)
    limiter.check("key:a", None, cost=3)
    with pytest.raises(RateLimitedError):
        limiter.check("key:a", None, cost=3)
    limiter.check("key:a", None, cost=2)
    with pytest.raises(RateLimitedError):
        limiter.check("key:a", None, cost=1)
