"""The real-writers tier runs only under `make check-writers`, which builds .venv-clients and names its
python in WRITERS_PYTHON. Without it, as in `make test`'s plain `pytest`, this folder's tests are not
collected: they need that venv, and take minutes."""

from __future__ import annotations

import os

import pytest

collect_ignore_glob = [] if os.environ.get("WRITERS_PYTHON") else ["test_*.py"]


@pytest.fixture(scope="session")
def writers_python() -> str:
    """The python of .venv-clients (langchain-postgres, LlamaIndex), from `make check-writers`."""
    return os.environ["WRITERS_PYTHON"]
