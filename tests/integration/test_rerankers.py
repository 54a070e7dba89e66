"""The rerank strategies with their real clients (httpx, google-genai, boto3) against local fakes."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from retrieval_core.clients.deadline import deadline_of
from retrieval_core.exceptions import RerankerUnavailableError, RetrievalError
from retrieval_core.rerank import build_reranker, clear_reranker_cache, get_reranker
from retrieval_core.rerank.base import RerankScore
from retrieval_core.rerank.bedrock import BedrockReranker
from retrieval_core.rerank.http_service import HTTPReranker
from retrieval_core.rerank.llm import GeminiReranker
from retrieval_core.settings import Settings
from tests.fakes.bedrock_rerank import FakeBedrockAgentRuntime
from tests.fakes.gemini_rerank import FakeGeminiRerank
from tests.fakes.http import Reply
from tests.fakes.reranker import FakeReranker

FAST_RETRY_S = 0.001
QUERY = "how does the kubernetes scheduler place pods"
DOCUMENTS = [
    "Bananas are rich in potassium.",  # 0 of 7 query words
    "The scheduler places pods on nodes.",  # the, scheduler, pods: 3/7
    "Kubernetes: how the scheduler does place pods",  # all 7
    "Pods are the smallest deployable units in Kubernetes.",  # the, kubernetes, pods: 3/7
    "How does a kettle work?",  # how, does: 2/7
]
# Best first; the two 3/7 documents keep their input order.
EXPECTED = [
    RerankScore(2, 1.0),
    RerankScore(1, 3 / 7),
    RerankScore(3, 3 / 7),
    RerankScore(4, 2 / 7),
    RerankScore(0, 0.0),
]
RERANKER_KEY = "rr-test-0123456789abcdef"
GEMINI_KEY = "gm-test-0123456789abcdef"


def _settings(**fields: Any) -> Settings:
    return Settings(_env_file=None, **fields)


def _assert_scores(actual: list[RerankScore], expected: list[RerankScore]) -> None:
    assert [s.index for s in actual] == [s.index for s in expected]
    assert [s.score for s in actual] == pytest.approx([s.score for s in expected])


def _rendered(exc: RetrievalError) -> str:
    return f"{exc} {exc.message} {json.dumps(exc.details, default=str)} {exc!r}"


# bge: an HTTP reranker ---------------------------------------------------------------------------


@pytest.fixture
def reranker_fake() -> Iterator[FakeReranker]:
    with FakeReranker() as fake:
        yield fake


def _bge(url: str, **fields: Any) -> HTTPReranker:
    reranker = build_reranker("bge", _settings(reranker_service_url=url, **fields))
    assert isinstance(reranker, HTTPReranker)
    reranker.retry_base_delay_s = FAST_RETRY_S
    return reranker


def test_bge_speaks_tei_rerank(reranker_fake: FakeReranker) -> None:
    reranker = _bge(reranker_fake.url, reranker_api="tei")

    scores = reranker.rerank(QUERY, DOCUMENTS)

    _assert_scores(scores, EXPECTED)
    (request,) = reranker_fake.requests
    assert request.path == "/rerank"
    assert request.json() == {"query": QUERY, "texts": DOCUMENTS, "raw_scores": False}
    assert "authorization" not in request.headers


def test_bge_speaks_cohere_rerank_with_model_and_key() -> None:
    with FakeReranker(api_key=RERANKER_KEY) as fake:
        reranker = _bge(
            fake.url,
            reranker_api="cohere",
            reranker_model="BAAI/bge-reranker-v2-m3",
            reranker_api_key=RERANKER_KEY,
        )

        scores = reranker.rerank(QUERY, DOCUMENTS)

        _assert_scores(scores, EXPECTED)
        (request,) = fake.requests
        assert request.path == "/v1/rerank"
        assert request.json() == {"model": "BAAI/bge-reranker-v2-m3", "query": QUERY, "documents": DOCUMENTS}
        assert request.headers["authorization"] == f"Bearer {RERANKER_KEY}"


@pytest.mark.parametrize(
    ("suffix", "api", "path", "field"),
    [
        ("", "auto", "/v1/rerank", "documents"),  # a bare base URL: /v1/rerank
        ("/rerank", "auto", "/rerank", "texts"),  # TEI's path
        ("/v1/rerank", "auto", "/v1/rerank", "documents"),
        ("/v2/rerank", "auto", "/v2/rerank", "documents"),
        ("/", "tei", "/rerank", "texts"),
        ("/v1/rerank", "tei", "/v1/rerank", "texts"),  # the setting wins over the path
        ("/rerank", "cohere", "/rerank", "documents"),  # e.g. Infinity's Cohere-shaped /rerank
    ],
)
def test_bge_picks_path_and_shape_from_url_and_setting(
    reranker_fake: FakeReranker, suffix: str, api: str, path: str, field: str
) -> None:
    # The fake serves TEI at /rerank only: a Cohere body there is refused, which the client reports.
    reranker = _bge(reranker_fake.url + suffix, reranker_api=api)

    try:
        reranker.rerank(QUERY, DOCUMENTS)
    except RerankerUnavailableError:
        assert (path, field) in {("/rerank", "documents"), ("/v1/rerank", "texts")}

    (request,) = reranker_fake.requests
    assert request.path == path
    assert field in request.json()


def test_bge_splits_large_inputs_into_batches_and_merges_indices() -> None:
    with FakeReranker(max_batch_size=2) as fake:
        reranker = _bge(fake.url, reranker_api="tei", reranker_batch_size=2)

        scores = reranker.rerank(QUERY, DOCUMENTS)

        _assert_scores(scores, EXPECTED)
        assert [r.json()["texts"] for r in fake.requests] == [DOCUMENTS[0:2], DOCUMENTS[2:4], DOCUMENTS[4:]]


def test_bge_empty_input_makes_no_call(reranker_fake: FakeReranker) -> None:
    assert _bge(reranker_fake.url).rerank(QUERY, []) == []
    assert reranker_fake.requests == []


def test_bge_gives_up_within_its_timeout_when_the_service_hangs() -> None:
    with FakeReranker(hang_s=10) as fake:
        reranker = _bge(fake.url, reranker_api="tei", rerank_timeout_s=1.0)

        with pytest.raises(RerankerUnavailableError) as caught:
            reranker.rerank(QUERY, DOCUMENTS)

        assert "timeout" in caught.value.message
        # The whole budget went to the first attempt: no second request was started after it.
        assert len(fake.requests) == 1


def test_bge_gives_up_at_the_request_deadline_before_its_own_timeout() -> None:
    with FakeReranker(hang_s=10) as fake:
        reranker = _bge(fake.url, reranker_api="tei", rerank_timeout_s=30.0)
        started = time.monotonic()
        with deadline_of(1.0), pytest.raises(RerankerUnavailableError):
            reranker.rerank(QUERY, DOCUMENTS)
        assert time.monotonic() - started < 1.5
        assert len(fake.requests) == 1


@pytest.mark.parametrize("status", [500, 503, 429])
def test_bge_retries_once_then_succeeds(reranker_fake: FakeReranker, status: int) -> None:
    reranker_fake.fail_next(1, status)

    scores = _bge(reranker_fake.url, reranker_api="cohere").rerank(QUERY, DOCUMENTS)

    _assert_scores(scores, EXPECTED)
    assert len(reranker_fake.requests) == 2
    assert reranker_fake.requests[0].json() == reranker_fake.requests[1].json()


def test_bge_fails_after_two_attempts(reranker_fake: FakeReranker) -> None:
    reranker_fake.fail_always(500)

    with pytest.raises(RerankerUnavailableError) as caught:
        _bge(reranker_fake.url, reranker_api="tei").rerank(QUERY, DOCUMENTS)

    assert len(reranker_fake.requests) == 2
    assert "HTTP 500" in caught.value.message
    assert "2 attempts" in caught.value.message
    assert caught.value.code == "reranker_unavailable"


def test_bge_unreachable_service_fails_after_two_attempts() -> None:
    with FakeReranker() as fake:
        url = fake.url
    reranker = _bge(url, reranker_api="tei")

    with pytest.raises(RerankerUnavailableError) as caught:
        reranker.rerank(QUERY, DOCUMENTS)

    assert "could not be reached (ConnectError)" in caught.value.message
    assert "2 attempts" in caught.value.message


def test_bge_client_error_is_not_retried(reranker_fake: FakeReranker) -> None:
    reranker_fake.fail_next(1, 422, "input is too long")

    with pytest.raises(RerankerUnavailableError) as caught:
        _bge(reranker_fake.url, reranker_api="tei").rerank(QUERY, DOCUMENTS)

    assert len(reranker_fake.requests) == 1
    assert "HTTP 422" in caught.value.message
    assert "input is too long" in caught.value.message
    assert "sent the tei request shape to /rerank" in caught.value.message


def test_bge_rejected_key_is_reported_without_leaking_it() -> None:
    with FakeReranker(api_key="the-right-key") as fake:
        reranker = _bge(fake.url, reranker_api="cohere", reranker_api_key=RERANKER_KEY)

        with pytest.raises(RerankerUnavailableError) as caught:
            reranker.rerank(QUERY, DOCUMENTS)

        assert "RERANKER_API_KEY" in caught.value.message
        assert RERANKER_KEY not in _rendered(caught.value)
        assert len(fake.requests) == 1


@pytest.mark.parametrize(
    "body",
    [
        {"unexpected": True},
        [{"index": 0, "score": 0.5}],  # 1 of 5 documents scored
        [{"index": i, "score": 0.5} for i in (0, 1, 2, 3, 3)],  # 3 twice, 4 missing
        [{"index": i, "score": 0.5} for i in (0, 1, 2, 3, 7)],  # out of range
        [{"index": i, "score": "high"} for i in range(5)],
        [{"index": i, "score": None} for i in range(5)],
    ],
)
def test_bge_unusable_answer_is_refused(reranker_fake: FakeReranker, body: Any) -> None:
    reranker_fake.script(Reply(200, body))

    with pytest.raises(RerankerUnavailableError):
        _bge(reranker_fake.url, reranker_api="tei").rerank(QUERY, DOCUMENTS)


def test_get_reranker_is_none_when_not_configured_and_cached_otherwise(reranker_fake: FakeReranker) -> None:
    clear_reranker_cache()
    try:
        assert get_reranker("bge", _settings()) is None
        assert get_reranker("llm", _settings()) is None
        settings = _settings(reranker_service_url=reranker_fake.url, gemini_api_key=GEMINI_KEY)

        first = get_reranker("bge", settings)

        assert isinstance(first, HTTPReranker)
        assert first.strategy == "bge"
        assert get_reranker("bge", _settings(reranker_service_url=reranker_fake.url)) is first
        assert get_reranker("bge", _settings(reranker_service_url=reranker_fake.url + "/rerank")) is not first
        assert isinstance(get_reranker("llm", settings), GeminiReranker)
        assert isinstance(get_reranker("bedrock", settings), BedrockReranker)
        assert reranker_fake.requests == []  # building a reranker calls nothing
    finally:
        clear_reranker_cache()


def test_get_reranker_refuses_an_unknown_strategy() -> None:
    with pytest.raises(ValueError, match="unknown rerank strategy"):
        get_reranker("cohere", _settings())  # type: ignore[arg-type]


# llm: Gemini --------------------------------------------------------------------------------------


@pytest.fixture
def gemini_fake() -> Iterator[FakeGeminiRerank]:
    with FakeGeminiRerank(api_key=GEMINI_KEY) as fake:
        yield fake


def _llm(fake: FakeGeminiRerank, **fields: Any) -> GeminiReranker:
    values: dict[str, Any] = {"gemini_api_key": GEMINI_KEY, "gemini_base_url": fake.url, **fields}
    reranker = build_reranker("llm", _settings(**values))
    assert isinstance(reranker, GeminiReranker)
    reranker.retry_base_delay_s = FAST_RETRY_S
    return reranker


def test_llm_scores_all_candidates_in_one_json_constrained_call(gemini_fake: FakeGeminiRerank) -> None:
    reranker = _llm(gemini_fake, rerank_llm_model="gemini-2.5-flash-lite")

    scores = reranker.rerank(QUERY, DOCUMENTS)

    _assert_scores(scores, EXPECTED)
    (request,) = gemini_fake.generate_calls()
    assert request.path.endswith("/models/gemini-2.5-flash-lite:generateContent")
    assert request.headers["x-goog-api-key"] == GEMINI_KEY
    body = request.json()
    config = body["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    assert config["temperature"] == 0
    schema = config["responseJsonSchema"]
    scores_schema = schema["properties"]["scores"]
    assert (scores_schema["minItems"], scores_schema["maxItems"]) == (5, 5)
    assert scores_schema["items"]["properties"]["index"] == {"type": "integer", "minimum": 0, "maximum": 4}
    assert scores_schema["items"]["properties"]["score"] == {"type": "number", "minimum": 0, "maximum": 1}
    assert "relevance" in body["systemInstruction"]["parts"][0]["text"]
    prompt = json.loads(body["contents"][0]["parts"][0]["text"])
    assert prompt == {"query": QUERY, "passages": [{"index": i, "text": t} for i, t in enumerate(DOCUMENTS)]}


@pytest.mark.parametrize(
    "answer",
    [
        "not json at all",
        json.dumps({"ranking": [0, 1, 2, 3, 4]}),
        json.dumps({"scores": [{"index": i, "score": 0.5} for i in range(4)]}),  # one missing
        json.dumps({"scores": [{"index": i, "score": 0.5} for i in range(6)]}),  # one extra
        json.dumps({"scores": [{"index": i, "score": 0.5} for i in (0, 1, 2, 2, 4)]}),  # a duplicate
        json.dumps({"scores": [{"index": i, "score": "0.5"} for i in range(5)]}),  # not a number
        json.dumps({"scores": [{"index": i, "score": 1.5} for i in range(5)]}),  # outside 0..1
        json.dumps({"scores": [{"index": str(i), "score": 0.5} for i in range(5)]}),
    ],
)
def test_llm_garbage_answer_is_refused(gemini_fake: FakeGeminiRerank, answer: str) -> None:
    gemini_fake.answer_text = answer

    with pytest.raises(RerankerUnavailableError):
        _llm(gemini_fake).rerank(QUERY, DOCUMENTS)

    assert len(gemini_fake.generate_calls()) == 1


def test_llm_retries_once_then_succeeds(gemini_fake: FakeGeminiRerank) -> None:
    gemini_fake.fail_next(1, 503)

    scores = _llm(gemini_fake).rerank(QUERY, DOCUMENTS)

    _assert_scores(scores, EXPECTED)
    assert len(gemini_fake.generate_calls()) == 2


def test_llm_fails_after_two_attempts(gemini_fake: FakeGeminiRerank) -> None:
    gemini_fake.fail_always(500)

    with pytest.raises(RerankerUnavailableError) as caught:
        _llm(gemini_fake).rerank(QUERY, DOCUMENTS)

    assert len(gemini_fake.generate_calls()) == 2
    assert "HTTP 500" in caught.value.message


def test_llm_gives_up_within_its_timeout_when_gemini_hangs() -> None:
    with FakeGeminiRerank(api_key=GEMINI_KEY, hang_s=10) as fake:
        reranker = _llm(fake, rerank_timeout_s=1.0)

        with pytest.raises(RerankerUnavailableError) as caught:
            reranker.rerank(QUERY, DOCUMENTS)

        assert "timeout" in caught.value.message
        assert len(fake.generate_calls()) == 1


def test_llm_rejected_key_is_reported_without_leaking_it() -> None:
    with FakeGeminiRerank(api_key="the-right-key") as fake:
        with pytest.raises(RerankerUnavailableError) as caught:
            _llm(fake).rerank(QUERY, DOCUMENTS)

        assert "GEMINI_API_KEY" in caught.value.message
        assert GEMINI_KEY not in _rendered(caught.value)
        assert len(fake.generate_calls()) == 1


def test_llm_empty_input_makes_no_call(gemini_fake: FakeGeminiRerank) -> None:
    assert _llm(gemini_fake).rerank(QUERY, []) == []
    assert gemini_fake.requests == []


# bedrock: the Bedrock Agent Runtime Rerank API ----------------------------------------------------


@pytest.fixture
def bedrock_fake(aws_env: None) -> Iterator[FakeBedrockAgentRuntime]:
    with FakeBedrockAgentRuntime() as fake:
        yield fake


def _bedrock(fake: FakeBedrockAgentRuntime, **fields: Any) -> BedrockReranker:
    values: dict[str, Any] = {
        "bedrock_region": "us-west-2",
        "bedrock_agent_runtime_endpoint_url": fake.url,
        **fields,
    }
    reranker = build_reranker("bedrock", _settings(**values))
    assert isinstance(reranker, BedrockReranker)
    reranker.retry_base_delay_s = FAST_RETRY_S
    return reranker


def test_bedrock_sends_the_documented_rerank_request(bedrock_fake: FakeBedrockAgentRuntime) -> None:
    scores = _bedrock(bedrock_fake).rerank(QUERY, DOCUMENTS)

    _assert_scores(scores, EXPECTED)
    (request,) = bedrock_fake.rerank_calls()
    assert request.headers["authorization"].startswith("AWS4-HMAC-SHA256 ")
    assert "/us-west-2/bedrock/aws4_request" in request.headers["authorization"]
    assert request.json() == {
        "queries": [{"type": "TEXT", "textQuery": {"text": QUERY}}],
        "sources": [
            {"type": "INLINE", "inlineDocumentSource": {"type": "TEXT", "textDocument": {"text": text}}}
            for text in DOCUMENTS
        ],
        "rerankingConfiguration": {
            "type": "BEDROCK_RERANKING_MODEL",
            "bedrockRerankingConfiguration": {
                "numberOfResults": 5,
                "modelConfiguration": {
                    "modelArn": "arn:aws:bedrock:us-west-2::foundation-model/amazon.rerank-v1:0"
                },
            },
        },
    }


def test_bedrock_passes_a_model_arn_through(bedrock_fake: FakeBedrockAgentRuntime) -> None:
    arn = "arn:aws:bedrock:eu-central-1::foundation-model/cohere.rerank-v3-5:0"

    _bedrock(bedrock_fake, bedrock_rerank_model=arn).rerank(QUERY, DOCUMENTS)

    (request,) = bedrock_fake.rerank_calls()
    config = request.json()["rerankingConfiguration"]["bedrockRerankingConfiguration"]
    assert config["modelConfiguration"]["modelArn"] == arn


def test_bedrock_follows_next_token_pages(aws_env: None) -> None:
    with FakeBedrockAgentRuntime(page_size=2) as fake:
        scores = _bedrock(fake).rerank(QUERY, DOCUMENTS)

        _assert_scores(scores, EXPECTED)
        tokens = [r.json().get("nextToken") for r in fake.rerank_calls()]
        assert tokens == [None, "2", "4"]


def test_bedrock_sends_no_empty_text(bedrock_fake: FakeBedrockAgentRuntime) -> None:
    scores = _bedrock(bedrock_fake).rerank(QUERY, ["", *DOCUMENTS[1:]])

    assert sorted(s.index for s in scores) == [0, 1, 2, 3, 4]
    (request,) = bedrock_fake.rerank_calls()
    assert all(s["inlineDocumentSource"]["textDocument"]["text"] for s in request.json()["sources"])


def test_bedrock_retries_throttling_then_succeeds(bedrock_fake: FakeBedrockAgentRuntime) -> None:
    bedrock_fake.fail_next(1, 429, "Too many requests")

    scores = _bedrock(bedrock_fake).rerank(QUERY, DOCUMENTS)

    _assert_scores(scores, EXPECTED)
    assert len(bedrock_fake.rerank_calls()) == 2


def test_bedrock_fails_after_two_attempts(bedrock_fake: FakeBedrockAgentRuntime) -> None:
    bedrock_fake.fail_always(500)

    with pytest.raises(RerankerUnavailableError) as caught:
        _bedrock(bedrock_fake).rerank(QUERY, DOCUMENTS)

    assert len(bedrock_fake.rerank_calls()) == 2
    assert "InternalServerException" in caught.value.message


def test_bedrock_timeout_is_a_reranker_failure(aws_env: None) -> None:
    with FakeBedrockAgentRuntime(hang_s=10) as fake:
        reranker = _bedrock(fake, rerank_timeout_s=1.0)

        with pytest.raises(RerankerUnavailableError) as caught:
            reranker.rerank(QUERY, DOCUMENTS)

        assert "ReadTimeoutError" in caught.value.message
        # botocore's read timeout spent the whole budget: no second attempt was started.
        assert len(fake.rerank_calls()) == 1


def test_bedrock_access_denied_is_not_retried(bedrock_fake: FakeBedrockAgentRuntime) -> None:
    bedrock_fake.fail_next(1, 403, "User AKIAFAKE is not authorized to perform bedrock:Rerank")

    with pytest.raises(RerankerUnavailableError) as caught:
        _bedrock(bedrock_fake).rerank(QUERY, DOCUMENTS)

    assert len(bedrock_fake.rerank_calls()) == 1
    assert "bedrock:Rerank" in caught.value.message
    assert "AKIAFAKE" not in _rendered(caught.value)


def test_bedrock_missing_region_is_a_reranker_failure(
    bedrock_fake: FakeBedrockAgentRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.delenv("AWS_REGION", raising=False)
    reranker = _bedrock(bedrock_fake, bedrock_region=None)

    with pytest.raises(RerankerUnavailableError, match="BEDROCK_REGION"):
        reranker.rerank(QUERY, DOCUMENTS)

    assert bedrock_fake.requests == []
