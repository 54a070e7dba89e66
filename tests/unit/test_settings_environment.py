"""Settings come from the constructor, then the process environment, then `.env`."""

from __future__ import annotations

from pathlib import Path

import pytest

from retrieval_core.environment import read_env_file
from retrieval_core.settings import Settings


def test_the_constructor_wins_over_the_environment_which_wins_over_the_env_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text("CHUNK_SIZE=700\nCHUNK_OVERLAP=70\nDEFAULT_STORE=from-file\n")
    monkeypatch.setenv("CHUNK_OVERLAP", "90")
    monkeypatch.setenv("default_store", "from-env")  # names match whatever their case
    settings = Settings(env_file, default_store="given")
    assert (settings.chunk_size, settings.chunk_overlap, settings.default_store) == (700, 90, "given")
    assert Settings(None).chunk_size == 1000  # no file: the default


def test_a_bad_value_is_refused_naming_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHUNK_SIZE", "lots")
    with pytest.raises(ValueError, match="chunk_size"):
        Settings(None)


def test_env_file_lines(tmp_path: Path) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text(
        "\n".join(
            [
                "# a comment",
                "PLAIN=value  # trailing comment",
                "export EXPORTED=yes",
                "SINGLE='kept as # written \\n'",
                'DOUBLE="line\\nbreak \\"quoted\\" # not a comment"',
                "HASH=a#b",
                "EMPTY=",
                'OPEN="never closed',
                "not a setting",
            ]
        )
    )
    assert read_env_file(env_file) == {
        "PLAIN": "value",
        "EXPORTED": "yes",
        "SINGLE": "kept as # written \\n",
        "DOUBLE": 'line\nbreak "quoted" # not a comment',
        "HASH": "a#b",
        "EMPTY": "",
        "OPEN": '"never closed',
    }
