"""mstop's tests.

The bytecode caches are written (Python's default) even where ``PYTHONDONTWRITEBYTECODE`` is set, as it is on
the machines this suite runs on: without them every run parsed, rewrote and compiled again each test module
(pytest's assertion rewriting) and each of mstop's modules it imports. Set here, in the package every test
module and conftest.py is imported through, before any of them."""

import sys

sys.dont_write_bytecode = False
