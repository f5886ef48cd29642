"""Formats: the bytes of a file into rows and events, and nothing else (no store, no figure, no source).

Below the engine: the sources hand a file's new bytes to a format, the engine stores what it gives. Every
module here imports only the standard library, numpy, pyarrow and ``mstop.safe``.

    parse.py       the writer's files: rank CSV (bad rows counted), events JSONL, devices CSV
    mflog.py       a job's own log, one driver: each line to the format that reads it (tried in order, the
                   last to read one first), a process's start, end and errors; msrun's scheduler log
    mfsteps.py     MindFormers' formats: its step lines (each shape), the progress line, the job's lines
    msmonitors.py  MindSpore's formats: LossMonitor's and TimeMonitor's lines
    logstate.py    what the formats of one log share: its sessions, rows held, the lines' time
    logs.py        a log's last error (traceback, CANN code), its lines made safe to show
    waits.py       the peer a collective's timeout line says the rank waited for (CANN's EI0002)
"""
