"""mstop: follow the files ``mstop_writer`` writes and show them (the viewer half).

The package is laid out along the data flow: ``sources`` (files, ssh) feed the ``engine`` (parse, store,
figures, health); ``view`` selects what a frame shows; ``app`` draws it; ``commands`` print it once.
"""

__version__ = "0.1.0"
