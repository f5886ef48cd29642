"""MindFormers: ``MstopCallback`` as a MindFormers callback, named in a yaml config.

Two ways, neither touching MindFormers itself:

- in a launch script, ``import mstop_writer.mindformers`` (it registers the callback with
  ``MindFormerRegister``); then the yaml's ``callbacks:`` list takes ``- type: MstopCallback``;
- with MindFormers' own ``run_mindformer.py`` (no script to edit), set ``REGISTER_PATH`` (or
  ``--register_path``) to the folder ``python -m mstop_writer.mindformers --register-path`` prints,
  and add ``auto_register: mstop_mf.MstopCallback`` to the yaml entry.

Importing this module needs mindformers (an ImportError says how to get it); printing the folder
does not.
"""

from __future__ import annotations

import os
import sys

#: the folder for REGISTER_PATH: it holds mstop_mf.py, which re-exports MstopCallback
REGISTER_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mindformers_register")
#: the yaml entry's auto_register value
AUTO_REGISTER = "mstop_mf.MstopCallback"


def register() -> type:
    """Register MstopCallback with MindFormers as a callback (``- type: MstopCallback``); return it."""
    try:
        from mindformers.tools.register import MindFormerModuleType, MindFormerRegister
    except ImportError as e:
        raise ImportError(f"mstop_writer.mindformers needs MindFormers, which cannot be imported ({e}): "
                          "pip install mindformers (see the README's MindFormers section)") from e
    from .callback import MstopCallback

    if not MindFormerRegister.is_exist(module_type=MindFormerModuleType.CALLBACK, class_name="MstopCallback"):
        MindFormerRegister.register_cls(MstopCallback, module_type=MindFormerModuleType.CALLBACK)
    return MstopCallback


def main(argv: list[str] | None = None) -> int:
    """``python -m mstop_writer.mindformers --register-path``: print the folder for REGISTER_PATH."""
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--register-path"]:
        print(REGISTER_PATH)
        return 0
    print("usage: python -m mstop_writer.mindformers --register-path\n"
          f"  prints the folder to set REGISTER_PATH to; the yaml entry then takes auto_register: {AUTO_REGISTER}",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
else:
    MstopCallback = register()
