"""KeysFooter: Textual's footer, made again once a refresh and without restyling each key twice.

Textual's :class:`~textual.widgets.Footer` makes its keys again after every change of the screen's bindings
(a focus moved, ``refresh_bindings``), one remake for each change even when several come before one refresh,
and each key it makes is restyled twice on mount: its ``compact`` starts True (a class added, the stylesheet
applied) and is then bound to the footer's False (the class removed, applied again). A monitor's first frame
changes its bindings several times: the footer was a fifth of the CPU an app takes to open (measured with
cProfile on a one-rank run: 0.75 s of 3.6 s over three opens). This one draws the same keys the same way.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer
from textual.widgets._footer import FooterKey


class KeysFooter(Footer):
    """:class:`~textual.widgets.Footer`, its keys made once a refresh, each styled once."""

    _remake_due = False

    def compose(self) -> ComposeResult:
        """The footer's own keys, each told the footer's ``compact`` before it is mounted (no watcher runs:
        the value it is then bound to is the one it has)."""
        for widget in super().compose():
            if isinstance(widget, FooterKey):
                widget.set_reactive(FooterKey.compact, self.compact)
            yield widget

    def bindings_changed(self, screen: Screen) -> None:
        """The bindings changed: the keys are made again after the next refresh, once however many changes
        come before it."""
        self._bindings_ready = True
        if not screen.app.app_focus or not self.is_attached or screen is not self.screen or self._remake_due:
            return
        self._remake_due = True
        self.call_after_refresh(self._remake)

    async def _remake(self) -> None:
        self._remake_due = False
        await self.recompose()
