"""Messages the app receives from outside the event loop and from its widgets."""

from __future__ import annotations

from textual.message import Message


class StoreChanged(Message):
    """New rows or events arrived (posted from the source thread; bursts merge into one)."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, StoreChanged)
