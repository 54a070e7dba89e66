"""ci/min-deps.txt, what `make check-min-deps` installs, pins each lower bound of pyproject.toml."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
CHECKED_EXTRAS = ("local", "dev")  # the torch extra is pinned already and never part of the tiers


def declared() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    lines = [
        *project["dependencies"],
        *(r for extra in CHECKED_EXTRAS for r in project["optional-dependencies"][extra]),
    ]
    return [Requirement(line) for line in lines]


def pinned() -> dict[str, Version]:
    pins: dict[str, Version] = {}
    for line in (ROOT / "ci" / "min-deps.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[canonicalize_name(name)] = Version(version)
    return pins


def lower_bound(requirement: Requirement) -> Version | None:
    bounds = [Version(s.version) for s in requirement.specifier if s.operator in (">=", "==")]
    return max(bounds, default=None)


def test_every_lower_bound_is_the_version_pinned() -> None:
    pins = pinned()
    wrong = {
        r.name: (str(bound), str(pins.get(canonicalize_name(r.name))))
        for r in declared()
        if (bound := lower_bound(r)) is not None and pins.get(canonicalize_name(r.name)) != bound
    }
    assert wrong == {}, "pyproject.toml bound vs ci/min-deps.txt pin (regenerate it: see its header)"


def test_the_pgvector_that_langchain_postgres_allows_is_the_one_tested() -> None:
    # langchain-postgres 0.0.x requires pgvector<0.4: our lower bound must stay below that.
    assert pinned()["pgvector"] < Version("0.4")
