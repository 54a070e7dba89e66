"""What the bundle tier needs from the machine: a python3.12, the runtime Lambda gives the functions.

Without one the bundle tests fail, so that CI cannot pass without them; ALLOW_MISSING_PYTHON312=1
skips them instead, for a developer machine that has no python3.12.
"""

from __future__ import annotations

import os

import pytest

from bench.common import find_python312

ALLOW_MISSING_PYTHON312 = "ALLOW_MISSING_PYTHON312"
NO_PYTHON312 = (
    "the bundle tests build and run the Lambda bundle with python3.12, and none was found on PATH or under "
    "pyenv ($PYENV_ROOT/versions/3.12.*): install one (`pyenv install 3.12`, or your system's python3.12 "
    "package)"
)


def require_python312() -> str:
    """A working python3.12; the test fails without one, or skips when ALLOW_MISSING_PYTHON312=1."""
    python = find_python312()
    if python is not None:
        return python
    if os.environ.get(ALLOW_MISSING_PYTHON312) == "1":
        pytest.skip(f"{NO_PYTHON312}; skipped because {ALLOW_MISSING_PYTHON312}=1")
    pytest.fail(f"{NO_PYTHON312}, or set {ALLOW_MISSING_PYTHON312}=1 to skip the bundle tests here")


@pytest.fixture(scope="session")
def python312() -> str:
    """The python3.12 the bundle is built for and run with."""
    return require_python312()
