"""The wire format between ``dsh exec`` and ``dsh serve`` (standard library only).

Every message, either way, is one frame: a 4-byte big-endian length, then that many bytes of a
UTF-8 JSON object. A frame longer than :data:`MAX_FRAME` is refused before it is read. Each side
checks the other's uid with ``SO_PEERCRED`` before it sends anything.
"""

from __future__ import annotations

import json
import socket
import struct

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs a served `dsh exec` measurable time
    from typing import Any

PROTOCOL = 2
"""Version of the framed protocol; a server answers a client of another version with an error."""

MAX_FRAME = 8 * 1024 * 1024
"""Largest frame either side accepts: 8 MiB, four times Linux's limit on a command's argv plus environment."""

HEADER = struct.Struct(">I")


class WireError(Exception):
    """A frame is oversized, truncated or not a JSON object."""


def encode(message: dict[str, Any]) -> bytes:
    """One frame holding ``message``; raise :class:`WireError` when it would pass :data:`MAX_FRAME`."""
    body = json.dumps(message, ensure_ascii=False).encode("utf-8", "surrogateescape")
    if len(body) > MAX_FRAME:
        raise WireError(f"a message of {len(body)} bytes exceeds the maximum of {MAX_FRAME} bytes")
    return HEADER.pack(len(body)) + body


def frame_length(header: bytes) -> int:
    """The body length a header announces; raise :class:`WireError` past :data:`MAX_FRAME`."""
    (length,) = HEADER.unpack(header)
    if length > MAX_FRAME:
        raise WireError(f"a message of {length} bytes exceeds the maximum of {MAX_FRAME} bytes (8 MiB)")
    return int(length)


def decode(body: bytes) -> dict[str, Any]:
    """The JSON object in a frame's body; raise :class:`WireError` naming what is wrong."""
    try:
        message = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise WireError(f"malformed request: not UTF-8 JSON ({exc})") from None
    if not isinstance(message, dict):
        kind = "null" if message is None else type(message).__name__
        raise WireError(f"malformed request: a JSON object is expected, not {kind}")
    return message


def peer_uid(sock: Any) -> int | None:
    """The uid of the process at the other end of a connected Unix socket (None where the OS has no SO_PEERCRED)."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:  # pragma: no cover - not Linux
        return None
    creds = sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return int(uid)


def recv_exactly(sock: socket.socket, size: int) -> bytes:
    """Read ``size`` bytes from a blocking socket; raise :class:`WireError` if it closes first."""
    chunks: list[bytes] = []
    remaining = size
    while remaining:
        chunk = sock.recv(min(remaining, 1 << 20))
        if not chunk:
            raise WireError("the connection closed in the middle of a message")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def recv_frame(sock: socket.socket) -> dict[str, Any] | None:
    """One message from a blocking socket; None when the peer closed before sending one."""
    first = sock.recv(HEADER.size)
    if not first:
        return None
    header = first + recv_exactly(sock, HEADER.size - len(first))
    return decode(recv_exactly(sock, frame_length(header)))
