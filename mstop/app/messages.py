"""Messages the app receives from outside the event loop and from its widgets."""

from __future__ import annotations

from textual.message import Message


class StoreChanged(Message):
    """New rows or events arrived (posted from the source thread; bursts merge into one)."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, StoreChanged)


class LogLinesRead(Message):
    """A read of a rank's log over ssh ended (posted from the reading thread): its new lines. A pane closed
    meanwhile never gets it (a closed screen's messages are dropped), so a late answer is shown nowhere."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__()
        self.lines = lines
