"""One stream of a child's output as it arrives, in bounded memory: the one owner of trimming and spilling.

Both ways of waiting (:mod:`._blocking`, :mod:`.aio`) feed chunks into a :class:`Capture`; memory
holds at most the bytes needed to show ``max_output`` characters (plus one chunk). Once the output
is certain to pass ``max_output``, everything is streamed to a spill file as it comes, up to
``max_spill`` bytes; past that, bytes are counted and dropped, and the note says so.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import time
from pathlib import Path

from dsh.core import DshError

from . import _spill
from ._spill import create_spill, prune


class Capture:
    """A stream's output: its tail in memory, the whole (up to ``max_spill`` bytes) in a spill file."""

    def __init__(
        self,
        stream: str,
        *,
        max_output: int,
        spill_dir: Path,
        max_spill: int | None = None,
        spill_budget: int | None = None,
    ) -> None:
        self.stream = stream
        self.max_output = max_output
        self.spill_dir = spill_dir
        self.max_spill = _spill.SPILL_MAX_BYTES if max_spill is None else max_spill
        self.spill_budget = spill_budget
        """Bytes the output folder may hold before retention removes the oldest spills (None: the default)."""
        self.started = time.time()
        """When the command began (the ``time.time()`` clock): retention spares every spill written since."""
        # Any max_output characters take at most 4 bytes each, plus a character cut at the front.
        self._keep = 4 * max_output + 3
        self._buf = bytearray()
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.chars = 0
        """Characters seen so far (decoded as the result is: invalid bytes replaced)."""
        self.total = 0
        """Bytes seen so far."""
        self.spilled = 0
        """Bytes written to the spill file."""
        self.path: Path | None = None
        self._fd: int | None = None
        self._failed: str | None = None
        self._taken = 0
        """Bytes :meth:`take` has returned (or skipped) so far."""
        self._taken_chars = 0
        self._take_decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, chunk: bytes) -> None:
        """Take the next chunk of output."""
        self.total += len(chunk)
        self.chars += len(self._decoder.decode(chunk))
        if self._fd is not None or (self._failed is None and len(self._buf) + len(chunk) > self._keep):
            if self._fd is None and self._failed is None:
                self._open()
                self._write(bytes(self._buf))
            self._write(chunk)
        self._buf += chunk
        if len(self._buf) > self._keep and (self._fd is not None or self._failed is not None):
            del self._buf[: len(self._buf) - self._keep]

    def _open(self) -> None:
        try:
            self.path, self._fd = create_spill(self.spill_dir, self.stream)
        except DshError as exc:
            self._failed = str(exc)

    def _write(self, data: bytes) -> None:
        if self._fd is None:
            return
        room = max(0, self.max_spill - self.spilled)
        view = memoryview(data)[:room]
        try:
            while view:
                written = os.write(self._fd, view)
                self.spilled += written
                view = view[written:]
        except OSError as exc:  # a full disk: keep what is there, say why the rest is missing
            self._failed = f"cannot spill {self.stream} to {self.path}: {exc.strerror or exc}"
            self._close()

    def _close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)

    def discard(self) -> None:
        """Close and remove the spill file: the run was interrupted and no result will name it."""
        self._close()
        if self.path is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.path)

    def result(self) -> tuple[str, str | None]:
        """The text to show (its tail, after a note when truncated) and the spill file's path, if any."""
        self.chars += len(self._decoder.decode(b"", final=True))
        text = self._buf.decode(errors="replace")
        if self.chars <= self.max_output:
            return text, None
        self._spill_now()
        self.finish()
        shown = f"[{self.stream} truncated: showing the last {self.max_output} of {self.chars} characters"
        return f"{shown}; {self._kept()}]\n" + text[-self.max_output :], self.spilled_to

    def take(self) -> str:
        """The output that came since the previous take, as :meth:`result` shows a whole stream.

        For output read while it is produced (a background task): at most ``max_output``
        characters, the tail, after a note naming the spill that holds the whole stream (see
        :attr:`spilled_to`); the same spill and cap as a foreground command's.
        """
        new = self.total - self._taken
        skipped = new > len(self._buf)  # more came than memory keeps: only the last of it is here
        if skipped:
            self._take_decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        text = self._take_decoder.decode(bytes(self._buf[len(self._buf) - min(new, len(self._buf)) :]))
        self._taken = self.total
        count = len(text) if not skipped else self.chars - self._taken_chars
        self._taken_chars += count
        if count <= self.max_output and not skipped:
            return text
        self._spill_now()
        shown = f"[{self.stream} truncated: showing the last {self.max_output} of {count} new characters"
        return f"{shown}; {self._kept()}]\n" + text[-self.max_output :]

    def finish(self) -> None:
        """The stream has ended: close the spill, then apply the retention rule (:func:`~._spill.prune`)."""
        self._close()
        if self.path is not None:
            prune(self.spill_dir, keep=self.path, since=self.started, budget=self.spill_budget)

    @property
    def spilled_to(self) -> str | None:
        """The spill file's path, once the output was certain to pass ``max_output`` and it could be written."""
        return None if self.path is None else str(self.path)

    def _spill_now(self) -> None:
        if self._fd is None and self._failed is None and self.path is None:  # long in characters only
            self._open()
            self._write(bytes(self._buf))

    def _kept(self) -> str:
        """Where the whole stream is, for the truncation note."""
        if self.path is None:
            return f"the full text was not kept: {self._failed}"
        if self._failed is not None:
            return f"the first {self.spilled} of {self.total} bytes in {self.path} ({self._failed})"
        if self.spilled < self.total:
            return (
                f"the first {self.spilled} of {self.total} bytes in {self.path}; the remaining "
                f"{self.total - self.spilled} bytes were dropped (the spill cap is {self.max_spill} bytes)"
            )
        return f"full text in {self.path}"
