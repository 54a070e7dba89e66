"""Run a callback as soon as a module has been imported, before the importer gets it.

What lets tracing patch a library on its first import instead of importing it at cold start to patch it.
Standard library only: importing this module must cost next to nothing.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Sequence
from importlib.abc import Loader, MetaPathFinder
from importlib.machinery import ModuleSpec
from types import ModuleType

Hook = Callable[[], None]

_lock = threading.Lock()


def when_imported(module_name: str, hook: Hook) -> None:
    """Call `hook` once `module_name` is imported: now if it already is, else right after the module has
    run and before the statement importing it goes on, so that nothing can use it unpatched."""
    with _lock:
        if module_name not in sys.modules:
            _finder().add(module_name, hook)
            return
    hook()


def pending() -> frozenset[str]:
    """The modules whose hooks have not run yet."""
    with _lock:
        finder = next((f for f in sys.meta_path if isinstance(f, _HookFinder)), None)
        return frozenset(finder.hooks) if finder else frozenset()


def _finder() -> _HookFinder:
    for finder in sys.meta_path:
        if isinstance(finder, _HookFinder):
            return finder
    finder = _HookFinder()
    # First: the other finders would load the module without the hook.
    sys.meta_path.insert(0, finder)
    return finder


class _HookFinder(MetaPathFinder):
    """Finds nothing itself: asks the finders after it, and wraps the loader of a hooked module."""

    def __init__(self) -> None:
        self.hooks: dict[str, list[Hook]] = {}

    def add(self, module_name: str, hook: Hook) -> None:
        self.hooks.setdefault(module_name, []).append(hook)

    def take(self, module_name: str) -> list[Hook]:
        """The hooks of `module_name`, now due: each runs once."""
        with _lock:
            return self.hooks.pop(module_name, [])

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname not in self.hooks:
            return None
        spec = self._spec_from_others(fullname, path, target)
        if spec is not None and spec.loader is not None:
            # The hooks are taken when the module runs: a spec may be looked up and never loaded
            # (importlib.util.find_spec to see whether a library is there).
            spec.loader = _HookedLoader(spec.loader, self)
        return spec

    def _spec_from_others(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None
    ) -> ModuleSpec | None:
        for finder in list(sys.meta_path):
            find_spec = getattr(finder, "find_spec", None)
            if finder is self or find_spec is None:
                continue
            spec: ModuleSpec | None = find_spec(fullname, path, target)
            if spec is not None:
                return spec
        return None


class _HookedLoader(Loader):
    """The module's own loader, then the hooks; the module keeps its own loader as `__loader__`."""

    def __init__(self, loader: Loader, finder: _HookFinder) -> None:
        self._loader = loader
        self._finder = finder

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        # The module's own loader answers for it afterwards (importlib.resources, linecache, reload).
        module.__loader__ = self._loader
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        self._loader.exec_module(module)
        # The import system binds a submodule to its package only once this returns; a hook may well
        # reach it as an attribute (`import botocore.client` then `botocore.client`): bind it now.
        parent, _, child = module.__name__.rpartition(".")
        if parent:
            setattr(sys.modules[parent], child, sys.modules.get(module.__name__, module))
        for hook in self._finder.take(module.__name__):
            hook()
