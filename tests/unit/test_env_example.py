"""`.env.example` lists every setting with its default and meaning, and cannot drift."""

from __future__ import annotations

import re
from pathlib import Path

from retrieval_core.cli.env_example import render
from retrieval_core.settings import Settings

ENV_EXAMPLE = Path(__file__).resolve().parents[2] / ".env.example"


def test_env_example_is_what_the_settings_make() -> None:
    made = render(Settings)
    assert ENV_EXAMPLE.read_text("utf-8") == made, (
        "Settings changed: run `retrieval env-example > .env.example`"
    )


def test_env_example_names_every_setting_with_its_default_and_meaning() -> None:
    text = ENV_EXAMPLE.read_text("utf-8")
    for name, field in Settings.model_fields.items():
        assert field.description, f"{name} has no description"
        block = f"# {field.description}\n# {name.upper()}="
        assert block in text, name
    assert "# CHUNK_SIZE=1000\n" in text
    assert "# AUTO_MIGRATE=true\n" in text
    assert "# DATA_DIR=.data\n" in text


def test_env_example_sets_nothing_and_holds_no_key() -> None:
    lines = ENV_EXAMPLE.read_text("utf-8").splitlines()
    assert all(not line or line.startswith("#") for line in lines), "copied to .env, it must change nothing"
    for line in lines:
        match = re.match(r"# ([A-Z0-9_]*(?:KEY|SECRET|PASSWORD|TOKEN)[A-Z0-9_]*)=(.*)$", line)
        if match:
            assert match.group(2) == "", line
