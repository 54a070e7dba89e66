"""`.env.example`: every setting of `Settings` with its default and meaning, made from the class itself.

`retrieval env-example > .env.example` writes it; tests/unit/test_env_example.py checks that the file
in the repository is what this makes, so the list cannot drift from the code.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pydantic import BaseModel

HEADER = """\
# Settings of the retrieval service, read from the environment or from a `.env` file in the working
# directory. Copy this file to `.env` and uncomment what you change; every line shows the default.
# Made by `retrieval env-example > .env.example` from retrieval_core/settings.py: do not edit by hand.
# Never commit a real key to a `.env`: deployed stacks read keys from the *_SECRET_ARN secrets.
# DEBUG=retrieval-service (a debug line per stage of every request) is read from the process
# environment only, not from `.env`.
"""


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add `env-example`."""
    p_env = sub.add_parser(
        "env-example", help="print .env.example: every setting with its default and meaning"
    )
    p_env.set_defaults(run=_print_env_example)


def _print_env_example(args: argparse.Namespace) -> int:
    from retrieval_core.settings import Settings

    print(render(Settings), end="")
    return 0


def render(settings_class: type[BaseModel]) -> str:
    """The `.env.example` text of `settings_class`: a comment and a commented `NAME=default` per field."""
    blocks = [HEADER]
    fields = settings_class.model_fields
    # The class's own fields first, then those of the bases it takes groups of settings from.
    own = [name for name in settings_class.__annotations__ if name in fields]
    for name in [*own, *(name for name in fields if name not in own)]:
        field = fields[name]
        blocks.append(f"# {field.description}\n# {name.upper()}={_value(field.default)}\n")
    return "\n".join(blocks)


def _value(default: Any) -> str:
    if default is None:
        return ""
    if isinstance(default, bool):
        return "true" if default else "false"
    if isinstance(default, Path):
        return default.as_posix()
    return str(default)
