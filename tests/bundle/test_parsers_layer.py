"""ParsersLayer: built by its Makefile as `sam build` does, within its size budget, and able to parse
one real file of every format in a python3.12 that sees only what Lambda would give it.

Lambda puts every layer of a function under /opt/python: this layer beside RetrievalCoreLayer, which
holds the parser code and the packages both need (typing_extensions, cryptography). So the isolated
interpreter's sys.path is the built layer, the core's source and the core layer's requirements
installed the same way (Lambda platform wheels), and nothing else.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.conftest import REPO_ROOT
from tests.files import pdf_bytes, sample_files

pytestmark = pytest.mark.bundle

MIB = 1024 * 1024
LAYER_BUDGET_BYTES = 40 * MIB  # unzipped; the 250 MB Lambda limit counts the function and all its layers
PARSERS_DIR = REPO_ROOT / "layers" / "parsers"
CORE_DIR = REPO_ROOT / "layers" / "retrieval_core"
PIP_PLATFORM = [
    "--platform",
    "manylinux2014_x86_64",
    "--implementation",
    "cp",
    "--python-version",
    "3.12",
    "--only-binary=:all:",
]

PROBE = textwrap.dedent(
    """
    import json, pathlib, sys
    from retrieval_core.parsers import parse
    report = {}
    for path in sorted(pathlib.Path(sys.argv[1]).iterdir()):
        parsed = parse(path.read_bytes(), None, path.name)
        first = parsed.documents[0]
        report[path.name] = {
            "contentType": parsed.content_type,
            "text": first.text,
            "blockMetadata": first.blocks[0].metadata,
        }
    libraries = {name: sys.modules[name].__file__ for name in ("pypdf", "docx", "lxml.html", "markdown_it")}
    print(json.dumps({"report": report, "libraries": libraries}))
    """
)


@pytest.fixture(scope="module")
def built_layer(tmp_path_factory: pytest.TempPathFactory, python312: str) -> Path:
    """The layer as `sam build` makes it: its Makefile run with ARTIFACTS_DIR."""
    artifacts = tmp_path_factory.mktemp("parsers-layer")
    result = subprocess.run(
        [
            "make",
            "-C",
            str(PARSERS_DIR),
            "build-ParsersLayer",
            f"ARTIFACTS_DIR={artifacts}",
            f"PYTHON={python312}",
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return artifacts / "python"


@pytest.fixture(scope="module")
def core_packages(tmp_path_factory: pytest.TempPathFactory, python312: str) -> Path:
    """The core layer's third-party packages, installed as its Makefile installs them."""
    target = tmp_path_factory.mktemp("core-packages")
    command = [python312, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile"]
    command += [*PIP_PLATFORM, "--target", str(target), "-r", str(CORE_DIR / "requirements.txt")]
    result = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    return target


def tree_bytes(root: Path) -> int:
    return sum(path.stat().st_size for path in root.rglob("*") if path.is_file() and not path.is_symlink())


def test_layer_is_within_its_budget(built_layer: Path) -> None:
    size = tree_bytes(built_layer)
    print(f"\nParsersLayer: {size / MIB:.1f} MiB unzipped (budget {LAYER_BUDGET_BYTES // MIB} MiB)")
    assert size <= LAYER_BUDGET_BYTES
    # The layer holds the parsers' libraries and their bytecode, not build leftovers.
    assert {"pypdf", "docx", "lxml", "markdown_it"} <= {p.name for p in built_layer.iterdir()}
    assert not list(built_layer.glob("lxml/**/*.pyx")) and not (built_layer / "bin").exists()
    assert list(built_layer.glob("pypdf/__pycache__/*.cpython-312.pyc"))


def test_layer_shares_no_package_with_the_core_layer(built_layer: Path, core_packages: Path) -> None:
    def names(root: Path) -> set[str]:
        return {p.name for p in root.iterdir() if p.name not in ("__pycache__", "bin")}

    assert names(built_layer) & names(core_packages) == set()


def test_every_requirement_is_met_by_this_layer_or_the_core_layer(
    built_layer: Path, core_packages: Path
) -> None:
    """pip resolved the whole set; after the Makefile took out what the core ships, each requirement,
    followed through the requirements of what meets it, must still be met in a version it accepts."""
    layer = {
        canonicalize_name(d.metadata["Name"]): d for d in metadata.distributions(path=[str(built_layer)])
    }
    core = {
        canonicalize_name(d.metadata["Name"]): d for d in metadata.distributions(path=[str(core_packages)])
    }
    environment = {"python_version": "3.12", "python_full_version": "3.12.0", "sys_platform": "linux"}
    environment |= {
        "platform_system": "Linux",
        "platform_machine": "x86_64",
        "implementation_name": "cpython",
    }
    lines = (
        raw.split("#", 1)[0].strip() for raw in (PARSERS_DIR / "requirements.txt").read_text().splitlines()
    )
    pending = [Requirement(line) for line in lines if line]
    seen: set[tuple[str, str]] = set()
    from_core: set[str] = set()
    while pending:
        requirement = pending.pop()
        name = canonicalize_name(requirement.name)
        met = layer.get(name) or core.get(name)
        assert met is not None, f"{requirement} is met by neither this layer nor the core layer"
        assert requirement.specifier.contains(met.version, prereleases=True), f"{requirement}: {met.version}"
        if name not in layer:
            from_core.add(name)
        for extra in {"", *requirement.extras}:
            if (name, extra) not in seen:
                seen.add((name, extra))
                for dependency in map(Requirement, met.requires or []):
                    if dependency.marker is None or dependency.marker.evaluate(
                        {**environment, "extra": extra}
                    ):
                        pending.append(dependency)
    assert {"cryptography", "typing-extensions"} <= from_core


def test_built_layer_parses_every_format_in_an_isolated_python312(
    tmp_path: Path, python312: str, built_layer: Path, core_packages: Path
) -> None:
    files = tmp_path / "files"
    files.mkdir()
    samples = sample_files()
    for name, data in samples.values():
        (files / name).write_bytes(data)
    # AES-256 with an empty user password: decrypted with the core layer's cryptography.
    (files / "restricted.pdf").write_bytes(
        pdf_bytes(["Install on Linux with apt."], password="", owner_password="o")
    )
    path = os.pathsep.join(str(p) for p in (built_layer, CORE_DIR, core_packages))
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": path, "PYTHONDONTWRITEBYTECODE": "1"}
    result = subprocess.run(
        [python312, "-S", "-s", "-c", PROBE, str(files)], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == 0, result.stderr[-3000:]
    answer = json.loads(result.stdout.strip().splitlines()[-1])
    report = answer["report"]
    assert {name: entry["contentType"] for name, entry in report.items() if name != "restricted.pdf"} == {
        name: kind for kind, (name, _) in samples.items()
    }
    assert all("apt" in entry["text"] or "Use apt." in entry["text"] for entry in report.values())
    assert report["guide.pdf"]["blockMetadata"] == {"pageNumber": 1}
    assert report["restricted.pdf"]["blockMetadata"] == {"pageNumber": 1}
    assert report["guide.md"]["blockMetadata"] == {"section": "Guide > Install"}
    assert report["guide.html"]["blockMetadata"] == {"section": "Install"}
    assert report["guide.docx"]["blockMetadata"] == {"section": "Install"}
    for module, file in answer["libraries"].items():
        assert file.startswith(str(built_layer)), f"{module} came from {file}, not the layer"
