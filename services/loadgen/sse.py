"""Server-sent events, decoded as the bytes arrive (Triton's ``generate_stream``).

A streamed response is only useful if each event is seen the moment its bytes are in:
the time to the first token is measured at the chunk that completes the first event.
So the decoder is incremental: :meth:`SseDecoder.feed` takes whatever the socket gave
(an event split anywhere, several events, half a UTF-8 character) and returns the
``data`` of every event it completed.

It follows the WHATWG rules that matter for a client that only reads data: lines end in
CRLF, LF or CR (a CRLF split across two chunks is one line end); a blank line ends an
event; ``data:`` lines (one leading space dropped) are joined with newlines; comments
(``:``) and the ``event``, ``id`` and ``retry`` fields are ignored; an event without a
data line is not an event (one with an empty ``data:`` is, with data ``""``); an
unfinished event at the end of the stream is dropped. An event or line longer than
``max_chars`` raises :class:`SseError` rather than growing without bound.
Pure: no sockets, no clock.
"""

from __future__ import annotations

import codecs
import re

__all__ = ["MAX_EVENT_CHARS", "SseDecoder", "SseError"]

# Far above any token event; an endless line is a broken server, not a long answer.
MAX_EVENT_CHARS = 1 << 20
_LINE_END = re.compile(r"\r\n|\r|\n")


class SseError(ValueError):
    """The byte stream is not a usable event stream."""


class SseDecoder:
    """Decodes one event stream; feed it the chunks in order."""

    def __init__(self, max_chars: int = MAX_EVENT_CHARS) -> None:
        self.max_chars = max_chars
        self._text = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._partial = ""  # the line still being received
        self._after_cr = False  # the last chunk ended in CR: a leading LF is its pair
        self._data: list[str] = []
        self._data_chars = 0

    def feed(self, chunk: bytes) -> list[str]:
        """The data of each event this chunk completed, in order.

        Raises SseError when a line or an event grows past ``max_chars``.
        """
        text = self._text.decode(chunk)
        if self._after_cr and text.startswith("\n"):
            text = text[1:]
        if text:
            self._after_cr = text.endswith("\r")
        *lines, self._partial = _LINE_END.split(self._partial + text)
        if len(self._partial) > self.max_chars:
            raise SseError(f"a line longer than {self.max_chars} characters")
        events: list[str] = []
        for line in lines:
            if (event := self._line(line)) is not None:
                events.append(event)
        return events

    def _line(self, line: str) -> str | None:
        if not line:
            if not self._data:
                return None
            event = "\n".join(self._data)
            self._data, self._data_chars = [], 0
            return event
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        if name == "data":
            value = value.removeprefix(" ")
            self._data_chars += len(value) + 1
            if self._data_chars > self.max_chars:
                raise SseError(f"an event longer than {self.max_chars} characters")
            self._data.append(value)
        return None
