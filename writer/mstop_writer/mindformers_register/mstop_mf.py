"""The module MindFormers' ``auto_register`` loads from the folder ``REGISTER_PATH`` names: with
``REGISTER_PATH=$(python -m mstop_writer.mindformers --register-path)`` a yaml entry
``- type: MstopCallback`` + ``auto_register: mstop_mf.MstopCallback`` is all a job adds."""

from mstop_writer.callback import MstopCallback  # noqa: F401  (what auto_register looks up)
