"""The store: every row of a run, by rank, in compact growable columns; plus what the events say.

    core.py    the store itself: its lock and version, the one door rows enter by (append of a Batch), the
               events' door, its snapshots
    rank.py    a rank's record (its rows' view, its sessions, what its events say) and the columns' constants
    frozen.py  what a snapshot holds: ranks frozen as they were, a first read's progress, kept answers
    snapshot.py  the reads the store and a snapshot share, and the Snapshot type (no lock, no change)
    table.py   the rows held, by column across ranks (a rank's column is a view of it)


The store knows nothing of files or widgets: sources feed it parsed rows by one
door, :meth:`Store.append` of a :class:`Batch` (a read round's rows of any number
of ranks, one file's or many files' parsed together, and the files' times), and
events (``ingest_events``); figures and charts read it. All access goes through
one lock, so a source thread can feed it while the screen reads.

Rows held in memory live in one table by column across ranks
(mstop.engine.store.table: a rank's column is a view of it, a read round's rows land
by one assignment per column); the oldest rows past the store's budget are in
the spill file (mstop.engine.spill); a rank reads either by row number alone
(:meth:`RankData.span`, ``at``, ``take``, ``col``).

Memory: ``time`` and ``step`` are float64 (exact for unix times and steps up
to 2**53), the 16 other numeric base columns float32 (7 significant digits:
plenty for losses, rates and byte counts), each only once some rank's value
varies (a column of one value in each rank is that value), plus a one-byte
session index: 17 bytes a row and 4 per varying float column, 4 more per
numeric extra column, and the table's room (a rank's region has an eighth and
64 rows more than its rows). Every row is kept at full resolution: no
downsampling at rest, so an exact value at any step can always be shown.
"""

from .core import CHANGE_LOG, Batch, Store
from .frozen import FrozenRanks, Progress
from .rank import BLOCK, EVENT_STAMPS, EXACT, EXACT_INDEX, FLOAT_COLS, FLOAT_INDEX, HAVING, Block, RankData, Segment
from .snapshot import Reads, Snapshot

__all__ = ["BLOCK", "CHANGE_LOG", "EVENT_STAMPS", "EXACT", "EXACT_INDEX", "FLOAT_COLS", "FLOAT_INDEX", "HAVING",
           "Batch", "Block", "FrozenRanks", "Progress", "RankData", "Reads", "Segment", "Snapshot", "Store"]
