"""A hook registered with `when_imported` runs once its module has run, before the importer sees it."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from retrieval_core.lambdas.import_hooks import pending, when_imported


@pytest.fixture()
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A package `hooked_pkg` with a submodule `client` defining `Client`, importable from tmp_path."""
    name = "hooked_pkg"
    (tmp_path / name).mkdir()
    (tmp_path / name / "__init__.py").write_text("LOADED = True\n")
    (tmp_path / name / "client.py").write_text("class Client:\n    def call(self):\n        return 'real'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    # The hook finder goes into this copy, dropped with it after the test.
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    importlib.invalidate_caches()
    yield name
    for module in [m for m in sys.modules if m == name or m.startswith(f"{name}.")]:
        del sys.modules[module]


def patch_client(calls: list[str], module_name: str) -> None:
    # As the X-Ray SDK patches botocore: the submodule reached as an attribute of its package.
    package, _, submodule = module_name.rpartition(".")
    module = getattr(importlib.import_module(package), submodule)
    calls.append(module_name)
    module.Client.call = lambda self: "patched"


def test_the_hook_runs_on_first_import_before_the_importer_can_use_the_module(package: str) -> None:
    calls: list[str] = []
    when_imported(f"{package}.client", lambda: patch_client(calls, f"{package}.client"))
    importlib.import_module(package)
    assert calls == [] and pending() == {f"{package}.client"}  # the package alone is not what is hooked

    from hooked_pkg.client import Client  # type: ignore[import-not-found]

    assert calls == [f"{package}.client"]
    assert Client().call() == "patched"
    assert pending() == frozenset()


def test_the_module_keeps_its_own_loader_and_the_hook_runs_once(package: str) -> None:
    calls: list[str] = []
    when_imported(package, lambda: calls.append(package))
    module = importlib.import_module(package)
    assert module.LOADED is True
    assert type(module.__loader__).__name__ == "SourceFileLoader"
    assert module.__spec__ is not None and module.__spec__.loader is module.__loader__
    del sys.modules[package]
    importlib.import_module(package)
    assert calls == [package]


def test_an_already_imported_module_is_hooked_at_once(package: str) -> None:
    importlib.import_module(f"{package}.client")
    calls: list[str] = []
    when_imported(f"{package}.client", lambda: patch_client(calls, f"{package}.client"))
    assert calls == [f"{package}.client"]
    assert pending() == frozenset()


def test_looking_a_module_up_without_loading_it_keeps_its_hook_for_the_import(package: str) -> None:
    calls: list[str] = []
    when_imported(f"{package}.client", lambda: patch_client(calls, f"{package}.client"))
    assert importlib.util.find_spec(f"{package}.client") is not None
    assert calls == [] and pending() == {f"{package}.client"}
    from hooked_pkg.client import Client

    assert calls == [f"{package}.client"] and Client().call() == "patched"


def test_a_module_nobody_imports_is_never_loaded_for_its_hook(package: str) -> None:
    when_imported(f"{package}.client", lambda: None)
    importlib.import_module(package)
    assert f"{package}.client" not in sys.modules
    assert isinstance(sys.modules[package], ModuleType)
