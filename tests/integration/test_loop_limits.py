"""The loop's limits a user can see, through the real ``dsh run``: the step cap and parallel tool calls."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from tests.helpers import dsh, record_hook

pytestmark = pytest.mark.integration


def _script(path: Path, steps: list[dict[str, object]]) -> Path:
    path.write_text(json.dumps({"turns": [{"user": "go", "steps": steps}]}))
    return path


def _bash(command: str) -> dict[str, object]:
    return {"name": "bash", "arguments": {"command": command}}


def _transcript(path: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


@pytest.mark.parametrize("where", ["flag", "deployment"])
def test_a_turn_that_reaches_max_steps_fails_says_why_and_runs_the_stop_hooks(tmp_path: Path, where: str) -> None:
    home = tmp_path / "home"
    stopped = tmp_path / "stop.jsonl"
    record_hook(home, "Stop", stopped)
    # A model that never stops calling tools.
    script = _script(
        tmp_path / "loop.json", [{"text": f"step {n}", "tool_calls": [_bash(f"echo {n}")]} for n in range(10)]
    )
    args = ["run", "--script", str(script), "--json"]
    if where == "flag":
        args += ["--max-steps", "3"]
    else:
        deployment = tmp_path / "dep.yaml"
        deployment.write_text("loop: {max_steps: 3}\n")
        args += ["--deployment", str(deployment)]
    proc = dsh(*args, home=home, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    reason = (
        "the turn reached max_steps (3): the model was still working after 3 steps; "
        "raise loop.max_steps in the deployment (dsh run: --max-steps N)"
    )
    out = json.loads(proc.stdout)
    (turn,) = out["turns"]
    assert turn["failed"] == reason
    assert [c["output"].split("\n")[0] for c in turn["tool_calls"]] == ["0", "1", "2"]
    assert [line for line in proc.stderr.splitlines() if line.startswith("dsh:")] == [
        f"dsh: turn {turn['turn_id']} failed: {reason}"
    ]
    events = _transcript(out["location"]["path"])
    (end,) = [e for e in events if e["type"] == "turn/end"]
    assert end["data"]["failed"] == reason
    assert [e["data"]["message"] for e in events if e["type"] == "error"] == [reason]
    (stop,) = [json.loads(line) for line in stopped.read_text().splitlines() if line.strip()]
    assert stop["hook_event_name"] == "Stop" and stop["last_assistant_message"] == "step 2"


def test_the_step_cap_refuses_a_count_below_one(tmp_path: Path) -> None:
    script = _script(tmp_path / "s.json", [{"text": "hi"}])
    proc = dsh("run", "--script", str(script), "--max-steps", "0", home=tmp_path / "home", cwd=tmp_path)
    assert (
        proc.returncode == 2
        and "--max-steps: must be a whole number of model steps, at least 1, not '0'" in proc.stderr
    )
    deployment = tmp_path / "dep.yaml"
    deployment.write_text("loop: {max_parallel_tools: 0}\n")
    proc = dsh("run", "--script", str(script), "--deployment", str(deployment), home=tmp_path / "home", cwd=tmp_path)
    assert proc.returncode == 1
    assert "field 'loop.max_parallel_tools'" in proc.stderr and "at least 1" in proc.stderr


@pytest.mark.parametrize("limit", [None, 5])
def test_150_calls_of_one_answer_all_run_at_most_n_at_once_in_the_models_order(
    tmp_path: Path, limit: int | None
) -> None:
    log = tmp_path / "log"
    # Each child appends "+" when it starts and "-" when it ends: one short O_APPEND write each, so the
    # file's order is the order they happened in, and the running count at any line is real concurrency.
    calls = [
        _bash(f"echo + >> {shlex.quote(str(log))}; sleep 0.1; echo - >> {shlex.quote(str(log))}; echo {n}")
        for n in range(150)
    ]
    script = _script(tmp_path / "wide.json", [{"tool_calls": calls}, {"text": "all done"}])
    args = ["run", "--script", str(script), "--json"]
    if limit is not None:
        deployment = tmp_path / "dep.yaml"
        deployment.write_text(f"loop: {{max_parallel_tools: {limit}}}\n")
        args += ["--deployment", str(deployment)]
    proc = dsh(*args, home=tmp_path / "home", cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    (turn,) = json.loads(proc.stdout)["turns"]
    assert turn["text"] == "all done"
    assert [c["output"].split("\n")[0] for c in turn["tool_calls"]] == [str(n) for n in range(150)]
    running = peak = 0
    marks = log.read_text().split()
    for mark in marks:
        running += 1 if mark == "+" else -1
        peak = max(peak, running)
    assert marks.count("+") == marks.count("-") == 150
    cap = limit or 16
    assert 2 <= peak <= cap


def _chat(message: dict[str, object], finish: str) -> dict[str, object]:
    """One Chat Completions answer, as the loopback server sends it."""
    choice = {"index": 0, "message": message, "finish_reason": finish, "logprobs": None}
    return {"json": {"id": "c", "object": "chat.completion", "created": 1, "model": "m", "choices": [choice]}}


def _tool_calls(step: int, width: int) -> dict[str, object]:
    calls = [
        {
            "id": f"call_{step}_{n}",
            "type": "function",
            "function": {"name": "bash", "arguments": json.dumps({"command": f"sleep 0.0{n % 3}; echo {step}.{n}"})},
        }
        for n in range(width)
    ]
    return _chat({"role": "assistant", "content": f"step {step}", "tool_calls": calls}, "tool_calls")


@pytest.mark.parametrize("where", ["flag", "deployment"])
def test_a_provider_model_that_never_stops_fails_at_its_cap_with_the_stop_hook_run_and_order_kept(
    tmp_path: Path, where: str
) -> None:
    from dsh.testing import Endpoint

    home = tmp_path / "home"
    stopped = tmp_path / "stop.jsonl"
    record_hook(home, "Stop", stopped)
    args = ["run", "--model", "openai", "--json", "--prompt", "go"]
    if where == "flag":
        args += ["--max-steps", "2"]
    else:
        deployment = tmp_path / "dep.yaml"
        deployment.write_text("loop: {max_steps: 2, max_parallel_tools: 3}\n")
        args += ["--deployment", str(deployment)]
    with Endpoint() as endpoint:
        endpoint.queue(*(_tool_calls(step, 7) for step in range(5)))
        env = {"OPENAI_BASE_URL": f"{endpoint.url}/v1", "OPENAI_API_KEY": "sk-cap-test", "OPENAI_MODEL": "m"}
        proc = dsh(*args, home=home, cwd=tmp_path, env=env)
        asked = len(endpoint.seen)
    assert proc.returncode == 1, proc.stderr
    assert asked == 2, "no step past the cap"
    reason = (
        "the turn reached max_steps (2): the model was still working after 2 steps; "
        "raise loop.max_steps in the deployment (dsh run: --max-steps N)"
    )
    (turn,) = json.loads(proc.stdout)["turns"]
    assert turn["failed"] == reason
    assert [c["output"].split("\n")[0] for c in turn["tool_calls"]] == [f"{s}.{n}" for s in range(2) for n in range(7)]
    assert f"dsh: turn {turn['turn_id']} failed: {reason}" in proc.stderr.splitlines()
    events = _transcript(json.loads(proc.stdout)["location"]["path"])
    (end,) = [e for e in events if e["type"] == "turn/end"]
    assert end["data"]["failed"] == reason
    (stop,) = [json.loads(line) for line in stopped.read_text().splitlines() if line.strip()]
    assert stop["hook_event_name"] == "Stop" and stop["last_assistant_message"] == "step 1"
