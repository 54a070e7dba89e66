"""POST /api/v1/rag/answer: a grounded answer with citations, as JSON or as server-sent events."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from functools import partial
from itertools import chain
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import StreamingResponse

from retrieval_core.api.dependencies import BackendsDep, GrantDep
from retrieval_core.api.docs import error_responses
from retrieval_core.exceptions import RetrievalError
from retrieval_core.schemas.answer import AnswerRequest, AnswerResponse
from retrieval_core.settings import in_lambda

if TYPE_CHECKING:
    from retrieval_core.backends.answers import AnswerEvent

logger = logging.getLogger(__name__)

router = APIRouter(prefix="/api/v1/rag", tags=["answer"])

EVENT_STREAM = "text/event-stream"
_EXTRA = error_responses(*(403, 404, 422, 500, 502, 503, 504))
_EXTRA["responses"]["200"] = {
    "description": "The answer as JSON; with `Accept: text/event-stream` (local server), server-sent "
    "events: `delta` ({text}) as the answer is written, then one `citation` per citation, then `done` "
    "(the whole answer, pipeline included), or `error` ({error: {code, message, details}}).",
    "content": {EVENT_STREAM: {"schema": {"type": "string"}}},
}


@router.post("/answer", response_model=AnswerResponse, openapi_extra=_EXTRA)
async def answer(
    body: AnswerRequest, backends: BackendsDep, grant: GrantDep, request: Request, response: Response
) -> Any:
    """Retrieve as POST /rag/retrieve would, then write an answer from the chunks found, citing them.

    Nothing above the threshold (`grade`, or `minFusedScore`): no model is called, `text` is empty and
    `grounded` false. `Accept: text/event-stream` streams the answer where the transport allows (the
    local server); behind API Gateway the same request gets the whole answer as JSON. The `X-Cache`
    header says whether the answer came from the cache (hit, miss, bypass).
    """
    streaming = EVENT_STREAM in request.headers.get("accept", "") and not in_lambda()
    events, status = await run_in_threadpool(
        partial(backends.answer, body, grant, caller="http", streaming=streaming)
    )
    if not streaming:
        from retrieval_core.backends.answers import final_answer

        result = await run_in_threadpool(final_answer, events)
        response.headers["X-Cache"] = status.value
        return result
    # The first piece is awaited before the status line: a failure of the retrieve, or of the generator
    # before it wrote anything, is still an error response, not a 200 stream ending in an error event.
    first = await run_in_threadpool(next, events, None)
    return StreamingResponse(
        server_sent(chain([first] if first is not None else [], events)),
        media_type=EVENT_STREAM,
        headers={"X-Cache": status.value, "Cache-Control": "no-cache"},
    )


def server_sent(events: Iterator[AnswerEvent]) -> Iterator[str]:
    """`delta` events as the text is written, one `citation` event per citation, then `done`.

    A failure once the stream has begun (the status line is sent) ends it with an `error` event that
    has the body an error response would have had.
    """
    try:
        for event in events:
            if isinstance(event, str):
                yield _event("delta", {"text": event})
                continue
            for citation in event.citations:
                yield _event("citation", citation.model_dump(mode="json", by_alias=True))
            yield _event("done", event.model_dump(mode="json", by_alias=True))
    except RetrievalError as exc:
        logger.warning("answer stream ended by %s: %s", exc.code, exc.message)
        yield _event("error", {"error": {"code": exc.code, "message": exc.message, "details": exc.details}})


def _event(name: str, data: dict[str, Any]) -> str:
    return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False, separators=(',', ':'))}\n\n"
