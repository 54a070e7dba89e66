"""Run a snippet in a fresh interpreter that sees only this checkout's layer, and read what it printed."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def probe(code: str, timeout_s: float = 60, args: Sequence[str] = ()) -> Any:
    """The JSON `code` prints on its last line, run with the layer alone on PYTHONPATH (no site tricks);
    `args` are its sys.argv[1:]."""
    result = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=timeout_s,
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT / "layers" / "retrieval_core")},
    )
    return json.loads(result.stdout.strip().splitlines()[-1])
