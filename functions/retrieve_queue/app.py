"""Lambda: retrieve jobs from SQS, one reply per job (see docs/operations.md "Queue-triggered retrieval")."""

from retrieval_core.lambdas.cold_start import collector_paused

with collector_paused():
    from retrieval_core.lambdas.retrieve_queue import build_queue_handler

    handler = build_queue_handler()
