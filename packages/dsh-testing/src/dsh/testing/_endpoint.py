"""A real HTTP server on the loopback interface that replays recorded replies and keeps the requests.

Model providers' tests point the official SDKs at it (unpatched): every request the SDK sends is
kept (method, path, headers, JSON body) and answered with the next queued reply, a JSON body or a
stream of server-sent events, with any status and headers, after an optional delay. A fixture
file holds such exchanges: ``{"exchanges": [{"request": {...}, "response": {...}}, ...]}``.
"""

import json
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, NamedTuple


class Seen(NamedTuple):
    """One request the server received: its method, path, headers (lower-case names) and JSON body."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


def load_exchanges(path: str | Path) -> list[dict[str, Any]]:
    """The exchanges of a fixture file: each ``{"request": {...}, "response": {...}}``."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    exchanges: list[dict[str, Any]] = data["exchanges"]
    return exchanges


class Endpoint:
    """A loopback HTTP server answering each request with the next queued reply.

    A reply is a mapping: ``status`` (default 200), ``headers``, and either ``json`` (a body) or
    ``sse`` (a list of events: each a JSON value sent as ``data: ...``, or a mapping with ``event``
    and ``data`` for named events, or the string ``[DONE]``); ``delay`` seconds to wait first.
    With no reply queued the server answers 500 naming the request, so a test fails loudly.
    """

    def __init__(self) -> None:
        self.seen: list[Seen] = []
        self._replies: deque[dict[str, Any]] = deque()
        self._lock = threading.Lock()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: the test asserts on what was seen."""

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                headers = {k.lower(): v for k, v in self.headers.items()}
                with endpoint._lock:
                    endpoint.seen.append(Seen(self.command, self.path, headers, body))
                    reply = endpoint._replies.popleft() if endpoint._replies else None
                if reply is None:
                    reply = {"status": 500, "json": {"error": {"message": f"no reply queued for {self.path}"}}}
                endpoint._answer(self, reply)

            do_GET = do_POST

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self._server.server_port}"

    def queue(self, *replies: dict[str, Any]) -> None:
        """Answer the next requests with ``replies``, in order."""
        with self._lock:
            self._replies.extend(replies)

    @property
    def pending(self) -> int:
        """Replies queued and not yet sent."""
        with self._lock:
            return len(self._replies)

    def bodies(self) -> list[Any]:
        """The JSON bodies of the requests seen, in order."""
        return [s.body for s in self.seen]

    def __enter__(self) -> "Endpoint":
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._server.shutdown()
        self._server.server_close()

    @staticmethod
    def _answer(handler: BaseHTTPRequestHandler, reply: dict[str, Any]) -> None:
        time.sleep(float(reply.get("delay", 0)))
        status = int(reply.get("status", 200))
        headers = dict(reply.get("headers") or {})
        try:
            if "sse" in reply:
                chunks = []
                for event in reply["sse"]:
                    if event == "[DONE]":
                        chunks.append("data: [DONE]\n\n")
                    elif isinstance(event, dict) and "event" in event and "data" in event:
                        chunks.append(f"event: {event['event']}\ndata: {json.dumps(event['data'])}\n\n")
                    else:
                        chunks.append(f"data: {json.dumps(event)}\n\n")
                payload = "".join(chunks).encode()
                headers.setdefault("content-type", "text/event-stream")
            else:
                payload = json.dumps(reply.get("json", {})).encode()
                headers.setdefault("content-type", "application/json")
            handler.send_response(status)
            for name, value in headers.items():
                handler.send_header(name, str(value))
            handler.send_header("content-length", str(len(payload)))
            handler.end_headers()
            handler.wfile.write(payload)
            handler.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test): nothing to answer
