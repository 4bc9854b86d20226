"""The JSONL path scheme: ``<root>/<escaped cwd>/<session id>.jsonl``, never outside the root."""

from __future__ import annotations

import os
from functools import lru_cache

from dsh.session import validate_session_id

_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-.")
MAX_COMPONENT = 150


@lru_cache(maxsize=1024)
def escape_cwd(cwd: str) -> str:
    """Turn a working directory into one safe directory name.

    Every byte outside ``[A-Za-z0-9_.-]`` becomes ``%XX`` (so ``/`` and ``%`` can never survive),
    a leading ``.`` is escaped too (so the name is never ``.``, ``..`` or hidden), and names over
    150 characters keep a readable prefix plus a hash of the whole.
    """
    raw = cwd.encode("utf-8", "surrogateescape")
    out = []
    for i, byte in enumerate(raw):
        if byte in _SAFE and not (i == 0 and byte == ord(".")):
            out.append(chr(byte))
        else:
            out.append(f"%{byte:02X}")
    name = "".join(out) or "%00"
    if len(name) > MAX_COMPONENT:
        import hashlib  # only for long names: importing it costs every cold command a millisecond or two

        digest = hashlib.sha256(raw).hexdigest()[:16]
        name = f"{name[: MAX_COMPONENT - 17].rstrip('%')}~{digest}"
    return name


def transcript_name(session_id: str) -> str:
    """The file name of a session's transcript, ``<id>.jsonl``; the id is validated first."""
    return validate_session_id(session_id) + ".jsonl"


def session_path(root: str, cwd: str, session_id: str) -> str:
    """The absolute transcript path of a session under ``root`` (validates the id first).

    The one place the path scheme is applied: :meth:`JsonlPersistence.locate` and the DSH_SESSION_JSONL
    translator both get their path here.
    """
    return os.path.join(root, escape_cwd(cwd), transcript_name(session_id))
