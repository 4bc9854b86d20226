"""dsh's standard streams: its output written whole or reported lost, its own messages best effort.

Three rules, set once by the ``dsh`` entry point (:func:`claim_streams`) and used by every verb:

- A descriptor 0, 1 or 2 that was closed when dsh started (``dsh exec -- cmd >&-``) is held open on
  ``/dev/null``, so no file dsh opens later (a lock, a transcript) takes its number and receives
  what was meant for the terminal. ``sys.stdout`` stays None there: output for it is lost, and
  :func:`write_all` says so.
- Output (a command's, a verb's lines and documents) goes through :func:`write_all`: whole, or
  :class:`OutputLost` naming the stream, and dsh's failure status.
- dsh's own messages (warnings, notices, errors: ``sys.stderr``) are written if stderr takes them.
  A stderr that is closed, full or gone cannot be told that it failed; the exit status still says
  what happened, and neither the command's output on stdout nor its status is lost for it.
"""

from __future__ import annotations

import os
import select
import sys

from ._status import OutputLost

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs a served `dsh exec` measurable time
    from typing import Any


class Diagnostics:
    """``sys.stderr`` as dsh uses it: line-buffered like Python's own, each complete line written to
    descriptor 2 at once, or dropped when descriptor 2 cannot take it (closed at start, a full disk,
    a reader gone).

    A failed write is dropped, not kept, so nothing is left for the interpreter's last flush to fail on.
    """

    def __init__(self, encoding: str, errors: str, closed: bool) -> None:
        self.encoding = encoding
        self.errors = errors
        self.closed = closed
        """Descriptor 2 was closed when dsh started: what is written goes nowhere, and
        :func:`write_all` says a command's stderr is lost, as for a closed stdout."""
        self._pending = ""

    def write(self, text: str) -> int:
        pending = self._pending + text
        cut = pending.rfind("\n") + 1
        self._pending = pending[cut:]
        if cut:
            self._send(pending[:cut])
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        pending, self._pending = self._pending, ""
        if pending:
            self._send(pending)

    def _send(self, text: str) -> None:
        to_stderr(text, self.encoding, self.errors)

    def fileno(self) -> int:
        return 2

    def isatty(self) -> bool:
        return os.isatty(2)

    def writable(self) -> bool:
        return True


def to_stderr(text: str, encoding: str = "utf-8", errors: str = "backslashreplace") -> None:
    """``text`` on descriptor 2 at once, or nowhere when it cannot take it: nothing is left to say it
    (see the module's rules). Safe in a signal handler that ends dsh: it never raises ``OSError``."""
    data = memoryview(text.encode(encoding, errors))
    try:
        while data:
            data = data[os.write(2, data) :]
    except OSError:
        pass


def quiet_stdout() -> None:
    """Point descriptor 1 at ``/dev/null`` once its output is lost or its reader gone, so the
    interpreter's last flush of what ``sys.stdout`` still holds cannot fail again with an
    "Exception ignored" traceback (descriptor 1, not ``sys.stdout``'s: that is None when it was closed)."""
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.close(null)


def claim_streams() -> None:
    """Hold descriptors 0-2 that were closed at start on ``/dev/null`` and make ``sys.stderr`` a
    :class:`Diagnostics` (the module's rules); ``sys.stdin`` and ``sys.stdout`` keep Python's None."""
    for fd, stream in ((0, sys.stdin), (1, sys.stdout), (2, sys.stderr)):
        if stream is None:  # how Python says the descriptor was not open when it started
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
    stderr = sys.stderr
    if stderr is not None:
        stderr.flush()
    sys.stderr = Diagnostics(getattr(stderr, "encoding", None) or "utf-8", "backslashreplace", stderr is None)


def write_all(text: str, stream: Any, name: str = "stdout", *, json: bool = False) -> None:
    """Write ``text`` to ``stream`` whole, even when a signal comes while a reader holds it back.

    CPython's buffered writer drops the rest of a large write that a signal interrupted (the
    handler returns, and the call reports success), so the bytes go through ``os.write`` until all
    are out, waiting while a non-blocking descriptor is full; a stream without a descriptor (a
    test's capture) is written as it is. Text the stream's encoding cannot hold
    (``PYTHONIOENCODING=ascii``) is written with backslash escapes, or for a JSON document
    (``json``) with JSON's own ``\\u`` escapes, so it stays the same document.

    Raises :class:`OutputLost` naming the stream (``name``) when it cannot take it (closed, a full
    disk); ``BrokenPipeError`` (the reader went away) is left to the caller, which ends quietly.
    """
    if stream is None or getattr(stream, "closed", False):  # None: how Python says fd 1 was closed at start
        if text:
            raise OutputLost(f"cannot write the output: {name} is closed")
        return
    try:
        try:
            fd = stream.fileno()
        except (AttributeError, OSError, ValueError):
            stream.write(text)
            stream.flush()
            return
        stream.flush()
        encoding = stream.encoding or "utf-8"
        try:
            data = memoryview(text.encode(encoding, stream.errors or "strict"))
        except UnicodeEncodeError:
            data = memoryview(ascii_json(text).encode() if json else text.encode(encoding, "backslashreplace"))
        while data:
            try:
                data = data[os.write(fd, data) :]
            except BlockingIOError:  # a non-blocking descriptor its reader has not emptied yet
                select.select([], [fd], [])
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise OutputLost(f"cannot write the output to {name}: {exc.strerror or exc}") from None


def ascii_json(text: str) -> str:
    """JSON ``text`` with every character beyond ASCII written as its ``\\u`` escape (a pair of them
    beyond the first plane), as ``json.dumps(..., ensure_ascii=True)`` writes it: the same document."""
    out = []
    for char in text:
        code = ord(char)
        if code < 0x80:
            out.append(char)
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            code -= 0x10000
            out.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
    return "".join(out)


def write_outputs(stdout: str, stderr: str) -> BaseException | None:
    """Write a command's two streams, each whole; stderr is written even when stdout cannot take its part.

    Returns what stopped stdout (:class:`OutputLost`, ``BrokenPipeError``), for the caller to raise once
    it has said the rest (the command's notices); a failing stderr raises at once.
    """
    lost: BaseException | None = None
    try:
        write_all(stdout, sys.stdout)
    except (OutputLost, BrokenPipeError) as exc:
        lost = exc
    write_all(stderr, sys.stderr, "stderr")
    return lost
