"""The import paths of the modules that moved into subpackages (issue 25),
kept working: `import heapmem.cli`, `from heapmem.langgraph_store import
HeapmemStore` and `python -m heapmem.cli` give the module at its new path,
the same module object (so its classes and state are not duplicated).

Owns: the table of moved modules (MOVED) and the import hook that serves
their old names (install(), run once by heapmem/__init__.py).
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from types import ModuleType
from typing import Any, Sequence

#: old name (under heapmem.) -> where the module lives now
MOVED = {
    "_native": "heapmem.db._native",
    "schema": "heapmem.db.schema",
    "sql": "heapmem.db.sql",
    "tune": "heapmem.learning.tune",
    "priors": "heapmem.learning.priors",
    "transfer": "heapmem.io.transfer",
    "report": "heapmem.io.report",
    "hrana": "heapmem.remote.hrana",
    "sqld": "heapmem.remote.sqld",
    "cli": "heapmem.adapters.cli",
    "mcp_server": "heapmem.adapters.mcp_server",
    "langgraph_store": "heapmem.adapters.langgraph_store",
    "datasette_plugin": "heapmem.adapters.datasette_plugin",
    "sqlguard": "heapmem.adapters.sqlguard",
}


class _Alias(importlib.abc.Loader):
    """Loads an old name as the module at its new path."""

    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(self.target)

    def exec_module(self, module: ModuleType) -> None:
        pass  # imported already, at its new path

    def get_code(self, fullname: str) -> Any:  # python -m heapmem.cli
        spec = importlib.util.find_spec(self.target)
        assert spec is not None and isinstance(spec.loader, importlib.abc.InspectLoader)
        return spec.loader.get_code(self.target)


class _AliasSpec(importlib.machinery.ModuleSpec):
    """An old name's spec: its package is the new path's (so that the relative
    imports of the module's code resolve when python -m runs it)."""

    @property
    def parent(self) -> str:
        assert isinstance(self.loader, _Alias)
        return self.loader.target.rpartition(".")[0]


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        head, _, name = fullname.rpartition(".")
        if head != "heapmem" or name not in MOVED:
            return None
        real = importlib.util.find_spec(MOVED[name])
        return _AliasSpec(fullname, _Alias(MOVED[name]), origin=real.origin if real else None)


def install() -> None:
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.append(_Finder())
