"""Where and how ``dsh exec`` and ``dsh serve`` talk (standard library only, cheap to import).

:func:`socket_path` is the one rule naming the socket of a deployment's server. Every message,
either way, is one frame: a 4-byte big-endian length, then that many bytes of a UTF-8 JSON object.
A frame longer than :data:`MAX_FRAME` is refused before it is read. Each side checks the other's
uid with ``SO_PEERCRED`` before it sends anything. Lone surrogates (undecodable bytes of an
environment or argv, as Python holds them) travel as ``\\udcXX`` escapes, so both ends agree on
them byte for byte.

A connection carries one request (the words after ``dsh``, unread, with the client's working
directory and environment), then at most one interrupt (``{"interrupt": "SIGINT"}``, sent when
the client gets one of ``INTERRUPTS``). The server reads the words with the one parser. A request
it takes it answers with a keep-alive at once (``{"keepalive": SECONDS, "json": ..., "timeout":
...}``: what the client needs of its own options) and another every SECONDS while the command
runs, then the one answer (an object with ``"ok"``); a request it refuses gets the answer alone,
and a line it does not run (help, a usage error, ``--debug``, another deployment) the answer
``{"ok": false, "unserved": WHY}``, on which the client runs the line itself.

Both sides encode and decode with the standard library's JSON codec (:func:`dumps`, :func:`loads`):
its C core, ``_json``, straight away, because ``import json`` also imports ``re`` and ``enum``, a
fifth of a served ``dsh exec``'s own start-up (measured); ``json`` itself where ``_json`` is missing,
and for the error message of a malformed frame.
"""

from __future__ import annotations

import os
import sys
import zlib

from dsh.floor import home_text

try:
    # The C module under `socket`: socket.py adds enum and selectors, about a third of a served
    # `dsh exec`'s own start-up, for conveniences the client does not use.
    import _socket as sockets
except ImportError:  # pragma: no cover - an interpreter without it
    import socket as sockets  # type: ignore[no-redef]

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs a served `dsh exec` measurable time
    from _socket import socket as Socket
    from collections.abc import Mapping
    from typing import Any

PROTOCOL = 5
"""Version of the framed protocol; a server answers a client of another version with an error.
(4: the server's keep-alives; 5: the client sends its words unread and the server parses them.)"""

MAX_FRAME = 8 * 1024 * 1024
"""Largest frame either side accepts: 8 MiB, four times Linux's limit on a command's argv plus environment
(a request made mostly of control bytes, six bytes each in JSON, can pass it: its client runs it in process)."""

HEADER_SIZE = 4
"""Bytes of a frame's length prefix (big-endian)."""

KEEPALIVE = 5.0
"""Seconds between two keep-alives of a server while a command runs, unless ``dsh serve --keepalive`` says."""

KEEPALIVE_RANGE = (0.1, 3600.0)
"""The periods a server may announce and a client accepts: shorter ones would cut commands of a
server only briefly descheduled, longer ones no wait can be bounded by (nor ``poll`` take)."""

MISSED_KEEPALIVES = 3
"""Keep-alive periods a client waits in silence before it gives up on its server (as OpenSSH's
``ServerAliveCountMax``): a long command keeps its client, a stopped or hung server does not."""


class WireError(Exception):
    """A frame is oversized, truncated or not a JSON object.

    Not a ``DshError`` (see ``dsh.cli._errors`` for the tree and why): this module stays standard
    library only, and every site that catches one answers the peer or reports its own sentence.
    """


def socket_path(deployment: str | None, env: Mapping[str, str] | None = None) -> str:
    """Where ``dsh serve`` listens for a deployment (the built-in one when None): the one rule.

    Placed under the home of the environment (``$DSH_HOME``, else ``~/.dsh``), not a home the
    deployment file may name, so a client finds it without reading the file. The name is a 64-bit
    digest of the deployment's absolute path (two checksums, cheap to import); the server also
    checks the deployment each request names, so even a collision could never run a command under
    another deployment.
    """
    key = (os.path.abspath(deployment) if deployment else "<default>").encode("utf-8", "surrogateescape")
    home = home_text(None, os.environ if env is None else env)
    return os.path.join(home, "run", f"dsh-{zlib.crc32(key):08x}{zlib.adler32(key):08x}.sock")


def frame(body: bytes) -> bytes:
    """``body`` behind its length; raise :class:`WireError` when it would pass :data:`MAX_FRAME`."""
    if len(body) > MAX_FRAME:
        raise WireError(f"a message of {len(body)} bytes exceeds the maximum of {MAX_FRAME} bytes")
    return len(body).to_bytes(HEADER_SIZE, "big") + body


def encode(message: dict[str, Any]) -> bytes:
    """One frame holding ``message``; raise :class:`WireError` when it would pass :data:`MAX_FRAME`."""
    return frame(dumps(message))


def dumps(value: Any) -> bytes:
    """``value`` as compact UTF-8 JSON, lone surrogates as ``\\udcXX`` escapes (no NaN or infinity)."""
    if _ENCODER is not None:
        text = "".join(_ENCODER(value, 0))
    else:  # pragma: no cover - an interpreter without `_json`
        import json

        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    # A lone surrogate can only stand inside a string, where backslashreplace writes its JSON escape.
    return text.encode("utf-8", "backslashreplace")


def loads(text: str) -> Any:
    """The value of the JSON document ``text``, as :func:`json.loads` reads it; raise :class:`ValueError`."""
    if _SCANNER is not None:
        try:
            value, end = _SCANNER(text, 0)
        except RecursionError:
            raise
        except Exception:
            # json.loads below reads it again and says what is wrong: the C scanner raises its
            # errors through `json.decoder`, which is not loaded here (a SystemError, without it).
            pass
        else:
            if end == len(text):
                return value
    import json

    return json.loads(text)  # surrounding whitespace, trailing data or a malformed document


def _no_json_form(value: object) -> None:
    raise TypeError(f"{type(value).__name__} has no JSON form")


class _ScanOptions:
    """What ``_json.make_scanner`` reads off a ``json.JSONDecoder``: the defaults ``json.loads`` uses."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}.__getitem__


try:  # the C core of `json`, as json.dumps(ensure_ascii=False, allow_nan=False) and json.loads set it up
    import _json

    _ENCODER: Any = _json.make_encoder(
        None, _no_json_form, _json.encode_basestring, None, ":", ",", False, False, False
    )
    _OPTIONS: Any = _ScanOptions  # duck-typed as a JSONDecoder (typeshed asks for a scanner)
    _SCANNER: Any = _json.make_scanner(_OPTIONS)
except (ImportError, AttributeError, TypeError):  # pragma: no cover - another interpreter, or another `_json`
    _ENCODER = _SCANNER = None


def frame_length(header: bytes) -> int:
    """The body length a header announces; raise :class:`WireError` past :data:`MAX_FRAME`."""
    length = int.from_bytes(header, "big")
    if length > MAX_FRAME:
        raise WireError(f"a message of {length} bytes exceeds the maximum of {MAX_FRAME} bytes (8 MiB)")
    return length


def decode(body: bytes) -> dict[str, Any]:
    """The JSON object in a frame's body (the server's reader); raise :class:`WireError` naming what is wrong."""
    try:
        message = loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise WireError(f"malformed request: not UTF-8 JSON ({exc})") from None
    except RecursionError:  # arrays or objects nested thousands deep: no request has them
        raise WireError("malformed request: JSON nested too deeply") from None
    return _object(message)


def _object(message: object) -> dict[str, Any]:
    if not isinstance(message, dict):
        kind = "null" if message is None else type(message).__name__
        raise WireError(f"malformed request: a JSON object is expected, not {kind}")
    return message


def peer_uid(sock: Any) -> int | None:
    """The uid of the process at the other end of a connected Unix socket (None where the OS has no SO_PEERCRED)."""
    creds = _peer_creds(sock)
    return None if creds is None else int.from_bytes(creds[4:8], sys.byteorder, signed=True)


def peer_pid(sock: Any) -> int | None:
    """The pid of the process at the other end of a connected Unix socket (None where the OS has no SO_PEERCRED)."""
    creds = _peer_creds(sock)
    return None if creds is None else int.from_bytes(creds[0:4], sys.byteorder, signed=True)


def _peer_creds(sock: Any) -> bytes | None:
    option = getattr(sockets, "SO_PEERCRED", None)
    if option is None:  # pragma: no cover - not Linux
        return None
    creds: bytes = sock.getsockopt(sockets.SOL_SOCKET, option, 12)  # struct ucred: pid, uid, gid as C ints
    return creds


def connect(path: str, timeout: float) -> Socket:
    """A blocking Unix stream socket connected to ``path``; sends and receives time out after ``timeout``."""
    sock = sockets.socket(sockets.AF_UNIX, sockets.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(path)
    except BaseException:
        sock.close()
        raise
    return sock


def recv_exactly(sock: Socket, size: int) -> bytes:
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


def recv_frame(sock: Socket) -> dict[str, Any] | None:
    """One message from a blocking socket (the client's reader); None when the peer closed before sending one."""
    first = sock.recv(HEADER_SIZE)
    if not first:
        return None
    header = first + recv_exactly(sock, HEADER_SIZE - len(first))
    body = recv_exactly(sock, frame_length(header))
    try:
        return _object(loads(body.decode("utf-8")))
    except (UnicodeDecodeError, ValueError) as exc:
        raise WireError(f"malformed message: not UTF-8 JSON ({exc})") from None
