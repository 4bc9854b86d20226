"""docs/embedding.md runs: every ``python`` and ``bash`` block, in order, in one scratch folder.

Each block is a whole program (its own ``assert`` lines are its checks) run by this interpreter or
by ``bash`` with this installation's ``dsh`` first on ``PATH``, with a fresh ``DSH_HOME``. The model
blocks reach a loopback OpenAI-compatible endpoint through the SDK's own environment variables,
the way the guide tells a reader to point them at theirs.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dsh.testing import Endpoint

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "embedding.md"
BLOCK = re.compile(r"^```(python|bash)\n(.*?)^```$", re.M | re.S)
ASKS_A_MODEL = re.compile(r'"provider": "openai"|--model openai')
"""A block that runs a turn of a real model: the endpoint answers it."""


def _blocks() -> list[tuple[str, str]]:
    return [(m[1], m[2]) for m in BLOCK.finditer(GUIDE.read_text())]


def _reply(message: dict[str, Any], finish: str) -> dict[str, Any]:
    choice = {"index": 0, "message": message, "finish_reason": finish, "logprobs": None}
    return {"json": {"id": "c", "object": "chat.completion", "created": 1, "model": "guide", "choices": [choice]}}


def _model_turn() -> list[dict[str, Any]]:
    """What a model answers to "Say hello from the shell.": one bash call, then its text."""
    call = {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "echo hello"}'}}
    return [
        _reply({"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"),
        _reply({"role": "assistant", "content": "The shell said hello."}, "stop"),
    ]


def test_the_guide_has_every_part() -> None:
    text = GUIDE.read_text()
    for heading in (
        "The front door",
        "Your own loop",
        "Your own model",
        "Reading a transcript",
        "dsh's shell for other",
    ):
        assert f"## {heading}" in text
    assert len(_blocks()) >= 8


def test_the_guide_imports_only_library_modules() -> None:
    """An integrator needs the library, not the command: no block imports ``dsh.cli`` (dsh-cli's)."""
    imported = {m[1] for _, code in _blocks() for m in re.finditer(r"^\s*(?:from|import) (dsh\.[a-z_.]+)", code, re.M)}
    assert "dsh.harness" in imported
    assert not [m for m in imported if m == "dsh.cli" or m.startswith("dsh.cli.")], sorted(imported)


def test_every_block_of_the_guide_runs(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("a file to count\n")
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith(("DSH_", "OPENAI_"))}
    env["DSH_HOME"] = str(tmp_path / "home")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    with Endpoint() as endpoint:
        env |= {"OPENAI_BASE_URL": f"{endpoint.url}/v1", "OPENAI_API_KEY": "sk-guide", "OPENAI_MODEL": "guide"}
        for number, (language, code) in enumerate(_blocks(), 1):
            asks = ASKS_A_MODEL.search(code) is not None
            if asks:
                endpoint.queue(*_model_turn())
            command = [sys.executable, "-c", code] if language == "python" else ["bash", "-euo", "pipefail", "-c", code]
            run = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=120, check=False)
            if run.returncode != 0:
                pytest.fail(
                    f"block {number} ({language}) of {GUIDE.name} exited {run.returncode}:\n{code}\n{run.stderr}"
                )
            if asks:
                assert "The shell said hello." in run.stdout, run.stderr
        assert endpoint.pending == 0
    # The model's call ran in dsh's shell, in a session of its own, as the guide says.
    sent = [json.dumps(s.body) for s in endpoint.seen]
    assert sum('"content": "hello\\n' in body for body in sent) == 2
