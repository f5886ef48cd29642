"""mstop: follow the files ``mstop_writer`` writes and show them (the viewer half).

The package is laid out along the data flow: ``sources`` (files, ssh) feed the ``engine`` (parse, store,
figures, health); ``view`` selects what a frame shows; ``app`` draws it; ``commands`` print it once.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

__version__ = "0.1.0"

#: Where modules lived before the regroup (0.1): scripts that import them by the old name get the same
#: module object, so they keep working. New code imports the new names.
MOVED = {
    "mstop.tail": "mstop.sources.files",
    "mstop.source": "mstop.sources.local",
    "mstop.remote": "mstop.sources.remote",
    "mstop.follower": "mstop.sources.follower",
    "mstop.replay": "mstop.sources.replay",
    "mstop.parse": "mstop.engine.parse",
    "mstop.store": "mstop.engine.store",
    "mstop.figures": "mstop.engine.figures",
    "mstop.health": "mstop.engine.health",
    "mstop.incidents": "mstop.engine.incidents",
    "mstop.summary": "mstop.commands.summary",
    "mstop.compare": "mstop.commands.compare",
    "mstop.report": "mstop.commands.report",
    "mstop.app.panels": "mstop.app.widgets",
}


class _Moved(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolve an old module name to the module at its new place (one object under two names)."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        return importlib.util.spec_from_loader(name, self) if name in MOVED else None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> object:
        module = importlib.import_module(MOVED[spec.name])
        spec.loader_state = module.__spec__  # the import system stamps the old name's spec on the module next
        return module

    def exec_module(self, module: object) -> None:
        module.__spec__ = module.__spec__.loader_state  # type: ignore[attr-defined]  # its own spec back


if not any(isinstance(f, _Moved) for f in sys.meta_path):
    sys.meta_path.append(_Moved())
