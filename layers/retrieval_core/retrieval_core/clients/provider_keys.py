"""The API keys of the providers we call (embeddings, Gemini, rerankers, generation): from the environment,
else from a secret.

A key in a variable such as OPENAI_API_KEY is for local runs. A deployed stack names a Secrets Manager
secret or an SSM SecureString parameter instead (a *_SECRET_ARN variable), holding the key itself or
`{"apiKey": "..."}`. That key is read when a provider is called, never when it is built, through
aws_secrets' 5-minute cache: a rotated key reaches a warm instance within that time, and a SnapStart
restore (which clears the cache) reads it anew. No message raised here quotes a key or a secret's text.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar
from urllib.parse import urlsplit

from pydantic import SecretStr

from retrieval_core.clients.secret_store import read_secret, secret_service
from retrieval_core.exceptions import ConfigurationError, RetrievalError
from retrieval_core.settings import Settings

C = TypeVar("C")

# The field of a JSON secret that holds the key (a key/value secret made in the console).
API_KEY_FIELD = "apiKey"
# The endpoint that always needs a key; other OpenAI-compatible servers (Ollama, TEI, vLLM) may need none.
OPENAI_HOST = "api.openai.com"


def api_key_from_secret(
    text: str, variable: str, error: type[RetrievalError] = ConfigurationError
) -> SecretStr:
    """The API key a secret's text holds: the text itself, or the "apiKey" field of a JSON object.

    `variable` names the setting that points at the secret, for the message of `error` when the
    secret holds no key. The message never quotes the text.
    """
    value = text.strip()
    if value.startswith("{"):
        try:
            parsed: Any = json.loads(value)
        except ValueError:
            # Not raised from here: a decode error keeps the whole document, i.e. the secret.
            parsed = None
        field = parsed.get(API_KEY_FIELD) if isinstance(parsed, dict) else None
        value = field.strip() if isinstance(field, str) else ""
    if not value:
        raise error(
            f"the secret {variable} names holds no API key; store the key itself or "
            f'{{"{API_KEY_FIELD}": "..."}}'
        )
    return SecretStr(value)


@dataclass(frozen=True)
class ProviderKey:
    """Where one provider's API key comes from: `variable` (the key itself, for local runs), else the
    first set of `secrets`, (variable, ARN) pairs in order of precedence. `required`: a provider that
    cannot work without a key (an OpenAI-compatible server may need none).
    """

    variable: str
    value: SecretStr | None = None
    secrets: tuple[tuple[str, str | None], ...] = ()
    required: bool = True

    @property
    def from_environment(self) -> SecretStr | None:
        """The key given in `variable`, when it is set and not empty."""
        return self.value if self.value is not None and self.value.get_secret_value() else None

    @property
    def secret(self) -> tuple[str, str] | None:
        """(variable, ARN) of the secret the key is read from; None when the environment gives it."""
        if self.from_environment is not None:
            return None
        return next(((name, arn) for name, arn in self.secrets if arn), None)

    @property
    def configured(self) -> bool:
        """Whether a key is given or a secret named (which may still turn out unreadable)."""
        return self.from_environment is not None or self.secret is not None

    @property
    def source(self) -> str:
        """Where the key in use comes from, for messages: a variable, or the secret a variable names."""
        secret = self.secret
        return f"the key in the secret {secret[0]} names" if secret is not None else self.variable

    def problem(self) -> str | None:
        """Why this key cannot be used, without reading anything; None when it can."""
        secret = self.secret
        if secret is not None and secret_service(secret[1]) is None:
            return f"{secret[0]} is neither a Secrets Manager secret ARN nor an SSM parameter ARN"
        if self.required and not self.configured:
            names = " or ".join([self.variable, *(name for name, _ in self.secrets)])
            return f"no API key is configured; set {names}"
        return None

    def read(self, error: type[RetrievalError] = ConfigurationError) -> SecretStr | None:
        """The key now: from the environment, else from the secret (cached); None when neither is set
        and none is required.

        A `problem()`, or a secret that cannot be read or holds no key, raises `error` naming the
        variable (and the AWS error code), never the key.
        """
        problem = self.problem()
        if problem is not None:
            raise error(problem)
        key = self.from_environment
        secret = self.secret
        if key is not None or secret is None:
            return key
        variable, arn = secret
        text = read_secret(
            arn,
            lambda code: error(
                f"could not read the API key from the secret {variable} names ({code})",
                {"setting": variable, "awsErrorCode": code},
            ),
            variable=variable,
        )
        return api_key_from_secret(text, variable, error)

    def read_required(self, error: type[RetrievalError] = ConfigurationError) -> SecretStr:
        """`read()` for a provider that cannot work without a key: `error` when none is configured."""
        key = self.read(error)
        if key is None:
            raise error(f"no API key is configured; set {self.variable}")
        return key


def openai_embedding_key(settings: Settings) -> ProviderKey:
    """OPENAI_API_KEY, else EMBEDDING_API_KEY_SECRET_ARN; required only by api.openai.com itself."""
    return ProviderKey(
        "OPENAI_API_KEY",
        settings.openai_api_key,
        (("EMBEDDING_API_KEY_SECRET_ARN", settings.embedding_api_key_secret_arn),),
        required=urlsplit(settings.openai_base_url).hostname == OPENAI_HOST,
    )


def gemini_embedding_key(settings: Settings) -> ProviderKey:
    """GEMINI_API_KEY, else EMBEDDING_API_KEY_SECRET_ARN, else GEMINI_API_KEY_SECRET_ARN.

    The last lets one Gemini key serve both embeddings and File Search; a key of its own for
    embeddings (EMBEDDING_API_KEY_SECRET_ARN) takes precedence.
    """
    return ProviderKey(
        "GEMINI_API_KEY",
        settings.gemini_api_key,
        (
            ("EMBEDDING_API_KEY_SECRET_ARN", settings.embedding_api_key_secret_arn),
            ("GEMINI_API_KEY_SECRET_ARN", settings.gemini_api_key_secret_arn),
        ),
    )


def gemini_key(settings: Settings) -> ProviderKey:
    """GEMINI_API_KEY, else GEMINI_API_KEY_SECRET_ARN: File Search and the `llm` reranker."""
    return ProviderKey(
        "GEMINI_API_KEY",
        settings.gemini_api_key,
        (("GEMINI_API_KEY_SECRET_ARN", settings.gemini_api_key_secret_arn),),
    )


def reranker_key(settings: Settings) -> ProviderKey:
    """RERANKER_API_KEY, else RERANKER_API_KEY_SECRET_ARN; optional (TEI needs none)."""
    return ProviderKey(
        "RERANKER_API_KEY",
        settings.reranker_api_key,
        (("RERANKER_API_KEY_SECRET_ARN", settings.reranker_api_key_secret_arn),),
        required=False,
    )


def generation_key(settings: Settings) -> ProviderKey:
    """GENERATION_API_KEY, else GENERATION_API_KEY_SECRET_ARN: the OpenAI-compatible chat provider's key,
    required only by api.openai.com itself (vLLM and Ollama may run without one)."""
    return ProviderKey(
        "GENERATION_API_KEY",
        settings.generation_api_key,
        (("GENERATION_API_KEY_SECRET_ARN", settings.generation_api_key_secret_arn),),
        required=urlsplit(settings.generation_base_url).hostname == OPENAI_HOST,
    )


class ClientForKey(Generic[C]):
    """One client built with the current key, built again when the key changes (it was rotated)."""

    def __init__(self, build: Callable[[SecretStr], C]) -> None:
        self._build = build
        self._client: C | None = None
        self._key: SecretStr | None = None
        self._lock = threading.Lock()

    def get(self, key: SecretStr) -> C:
        """The client for `key`: the one already built when the key is the same."""
        with self._lock:
            if self._client is None or self._key != key:
                self._client = self._build(key)
                self._key = key
            return self._client

    @property
    def key(self) -> SecretStr | None:
        """The key the current client was built with (None before the first, or after `forget`)."""
        return self._key

    def forget(self) -> None:
        """Drop the client: the next `get` builds one again."""
        with self._lock:
            self._client = None
            self._key = None
