"""``dsh run --model openai`` end to end: the real command, the real SDK, a loopback Chat Completions server.

Two turns with bash calls, the second in a resumed session: each child sees its own session and
call id, the key reaches neither a child nor the transcript, and a provider's fault is one line.
"""

from __future__ import annotations

import json
import os
import pty
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from dsh.testing import Endpoint, dsh

KEY = "sk-full-loop-secret"
PROBE = 'echo "$DSH_SESSION_ID $DSH_TOOL_CALL_ID"; env | grep -c full-loop-secret || true'


def _calls(call_id: str) -> dict[str, Any]:
    call = {
        "id": call_id,
        "type": "function",
        "function": {"name": "bash", "arguments": json.dumps({"command": PROBE})},
    }
    return _reply({"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls")


def _text(text: str) -> dict[str, Any]:
    return _reply({"role": "assistant", "content": text}, "stop")


def _reply(message: dict[str, Any], finish: str) -> dict[str, Any]:
    return {
        "json": {
            "id": "chatcmpl-x",
            "object": "chat.completion",
            "created": 1764600000,
            "model": "loop-model",
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }
    }


def _env(endpoint: Endpoint) -> dict[str, str]:
    return {"OPENAI_BASE_URL": f"{endpoint.url}/v1", "OPENAI_API_KEY": KEY, "OPENAI_MODEL": "loop-model"}


def test_two_turns_with_bash_calls_and_a_resume(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with Endpoint() as endpoint:
        endpoint.queue(_calls("call_first"), _text("turn one done"), _calls("call_second"), _text("turn two done"))
        first = dsh("run", "--model", "openai", "--prompt", "first", home=home, env=_env(endpoint), cwd=tmp_path)
        assert first.returncode == 0, first.stderr
        assert first.stdout == "turn one done\n"
        found = re.search(r"^dsh: session (\S+)$", first.stderr, re.M)
        assert found, first.stderr
        session_id = found[1]
        assert f"bash: {' '.join(PROBE.split())} (exit 0)" in first.stderr
        second = dsh(
            "run", "--model", "openai", "--session", session_id, "--json", "--prompt", "second",
            home=home, env=_env(endpoint), cwd=tmp_path,
        )  # fmt: skip
        assert second.returncode == 0, second.stderr
    document = json.loads(second.stdout)
    assert document["session_id"] == session_id and document["model"] == "loop-model"
    (turn,) = document["turns"]
    assert turn["text"] == "turn two done" and turn["error"] is None
    assert turn["tool_calls"][0]["output"] == f"{session_id} call_second\n0\n[exit code: 0]"
    # The first turn's child saw its own ids (what the model was sent back), and no key.
    tool_messages = [m for m in endpoint.seen[1].body["messages"] if m["role"] == "tool"]
    assert tool_messages == [
        {"role": "tool", "tool_call_id": "call_first", "content": f"{session_id} call_first\n0\n[exit code: 0]"}
    ]
    # The resumed session continues the conversation: its first request holds the whole first turn.
    assert endpoint.seen[2].body["messages"][: len(endpoint.seen[1].body["messages"]) + 1] == [
        *endpoint.seen[1].body["messages"],
        {"role": "assistant", "content": "turn one done"},
    ]
    assert all(s.headers["authorization"] == f"Bearer {KEY}" for s in endpoint.seen)
    transcript = Path(document["location"]["path"]).read_text()
    for text in (transcript, first.stdout, first.stderr, second.stdout, second.stderr):
        assert KEY not in text


def test_a_refused_key_is_one_line_the_turn_is_recorded_failed_and_the_session_resumes(tmp_path: Path) -> None:
    home = tmp_path / "home"
    refused = {"status": 401, "json": {"error": {"message": "Incorrect API key provided", "type": "auth"}}}
    with Endpoint() as endpoint:
        endpoint.queue(refused, _text("fine now"))
        failed = dsh("run", "--model", "openai", "--prompt", "hi", home=home, env=_env(endpoint), cwd=tmp_path)
        assert failed.returncode == 1
        lines = failed.stderr.splitlines()
        session_id = lines[0].removeprefix("dsh: session ")
        assert lines[1:] == [
            f"dsh: model provider openai at {endpoint.url}/v1: the key was refused "
            "(401: Incorrect API key provided); check $OPENAI_API_KEY"
        ]
        again = dsh(
            "run", "--model", "openai", "--session", session_id, "--prompt", "again",
            home=home, env=_env(endpoint), cwd=tmp_path,
        )  # fmt: skip
        assert again.returncode == 0 and again.stdout == "fine now\n", again.stderr
    shown = json.loads(dsh("sessions", "show", session_id, "--json", home=home).stdout)
    ends = [e["data"] for e in shown["events"] if e["type"] == "turn/end"]
    assert ends[0]["failed"].startswith("model provider openai at ") and "failed" not in ends[1]
    assert endpoint.seen[1].body["messages"] == [
        {"role": "user", "content": "hi"},
        {"role": "user", "content": "again"},
    ]


def test_the_prompt_comes_from_stdin_and_a_missing_provider_is_one_line(tmp_path: Path) -> None:
    import subprocess
    import sys

    home = tmp_path / "home"
    with Endpoint() as endpoint:
        endpoint.queue(_text("from stdin"))
        env = {**__import__("os").environ, "DSH_HOME": str(home), **_env(endpoint)}
        proc = subprocess.run(
            [sys.executable, "-m", "dsh.cli", "run", "--model", "openai"],
            input="piped prompt\n",
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=120,
            check=False,
        )
        assert proc.returncode == 0 and proc.stdout == "from stdin\n", proc.stderr
        assert endpoint.seen[0].body["messages"] == [{"role": "user", "content": "piped prompt\n"}]
    missing = dsh("run", "--model", "nosuch", "--prompt", "x", home=home)
    assert missing.returncode == 1
    assert "no entry point 'nosuch' in group 'dsh.models'; available: anthropic, openai, scripted" in missing.stderr


class _Reader:
    """What a process wrote on one pipe, read as it comes; each wait starts where the last one matched."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.text = ""
        self._at = 0

    def until(self, wanted: str, timeout: float = 60) -> None:
        import select

        deadline = time.monotonic() + timeout
        while wanted not in self.text[self._at :]:
            left = deadline - time.monotonic()
            assert left > 0, f"waited for {wanted!r}; read {self.text!r}"
            if select.select([self.stream], [], [], left)[0]:
                chunk = os.read(self.stream.fileno(), 65536).decode()
                assert chunk, f"the stream ended before {wanted!r}; read {self.text!r}"
                self.text += chunk
        self._at = self.text.index(wanted, self._at) + len(wanted)


def test_from_a_terminal_ctrl_c_interrupts_the_turn_and_the_run_goes_on(tmp_path: Path) -> None:
    home = tmp_path / "home"
    marker = tmp_path / "started"
    slow = {"id": "call_slow", "type": "function", "function": {"name": "bash", "arguments": ""}}
    slow["function"]["arguments"] = json.dumps({"command": f"echo $$ > {marker}; exec sleep 300"})
    primary, secondary = pty.openpty()  # standard input is a terminal: the interactive loop
    # (stdout is a pipe, not the terminal: the prompt goes to stderr, so stdout holds the answers alone)
    with Endpoint() as endpoint:
        endpoint.queue(
            _reply({"role": "assistant", "content": None, "tool_calls": [slow]}, "tool_calls"),
            _text("second answered"),
            _text("third answered"),
        )
        env = {**os.environ, "DSH_HOME": str(home), **_env(endpoint)}
        proc = subprocess.Popen(
            [sys.executable, "-m", "dsh.cli", "run", "--model", "openai"],
            stdin=secondary, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=tmp_path,
        )  # fmt: skip
        os.close(secondary)
        assert proc.stdout is not None and proc.stderr is not None
        out, err = _Reader(proc.stdout), _Reader(proc.stderr)
        try:
            err.until("> ")
            os.write(primary, b"first\n")
            deadline = time.monotonic() + 60
            while not marker.exists() or not marker.read_text().strip():
                assert time.monotonic() < deadline and proc.poll() is None, "the command never started"
                time.sleep(0.02)
            command = int(marker.read_text())
            proc.send_signal(signal.SIGINT)  # what Ctrl-C sends to the terminal's foreground job
            err.until("the session goes on")
            err.until("> ")
            assert not Path(f"/proc/{command}").exists() or "zombie" in Path(f"/proc/{command}/status").read_text()
            os.write(primary, b"second\n")
            out.until("second answered")
            err.until("> ")
            proc.send_signal(signal.SIGINT)  # at the prompt: the line is discarded, the run goes on
            time.sleep(0.3)
            os.write(primary, b"third\n")
            out.until("third answered")
            err.until("> ")
            os.write(primary, b"\x04")  # Ctrl-D ends the run
            assert proc.wait(timeout=60) == 0, err.text + proc.stderr.read().decode()
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            os.close(primary)
    session_id = re.search(r"dsh: session (\S+)", err.text)[1]  # type: ignore[index]
    events = [
        json.loads(line)
        for line in (home / "sessions").rglob(f"{session_id}.jsonl").__next__().read_text().splitlines()
    ]
    ends = [e["data"] for e in events if e.get("type") == "turn/end"]
    assert [e.get("interrupted") for e in ends] == ["SIGINT", None, None]
    prompts = [e["data"]["text"] for e in events if e.get("type") == "message/user"]
    assert prompts == ["first", "second", "third"]


def test_a_prompt_that_is_not_text_is_one_line_and_stdin_closed_is_no_prompt(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with Endpoint() as endpoint:
        env = {**os.environ, "DSH_HOME": str(home), **_env(endpoint)}
        run = [sys.executable, "-m", "dsh.cli", "run", "--model", "openai"]
        # A byte the locale could not decode reached the SDK as a lone surrogate: a traceback.
        odd = subprocess.run(
            [*run, "--prompt", os.fsdecode(b"caf\xff")], capture_output=True, text=True, env=env, timeout=120
        )
        assert odd.returncode == 1 and odd.stderr.endswith(
            "dsh: the prompt from --prompt is not UTF-8 text (byte 0xff at character 3)\n"
        ), odd.stderr
        ascii_only = subprocess.run(
            run, input="café\n", capture_output=True, text=True, timeout=120, env={**env, "PYTHONIOENCODING": "ascii"}
        )
        assert ascii_only.returncode == 1 and "the prompt on standard input is not ascii text" in ascii_only.stderr
        assert "Traceback" not in odd.stderr + ascii_only.stderr
        code = "import os, subprocess, sys; os.close(0); sys.exit(subprocess.call(sys.argv[1:]))"
        closed = subprocess.run([sys.executable, "-c", code, *run], capture_output=True, text=True, env=env)
        assert (closed.returncode, closed.stdout) == (0, ""), closed.stderr
        assert endpoint.seen == [], "no prompt, no request"


def test_a_key_the_server_names_past_the_cut_leaves_no_prefix_on_stderr_or_in_the_json(tmp_path: Path) -> None:
    home = tmp_path / "home"
    said = f"{'x' * 285}{KEY} is not a key this server knows"
    with Endpoint() as endpoint:
        endpoint.queue({"status": 400, "json": {"error": {"message": said, "type": "invalid_request_error"}}})
        failed = dsh("run", "--model", "openai", "--json", "--prompt", "hi", home=home, env=_env(endpoint))
    assert failed.returncode == 1
    (line,) = [x for x in failed.stderr.splitlines() if "refused" in x]
    assert "x*** is not" in line
    document = json.loads(failed.stdout)
    transcript = Path(document["location"]["path"]).read_text()
    for text in (failed.stderr, failed.stdout, transcript):
        assert KEY[:6] not in text
