"""The front door for Python integrators: Harness, its sessions and outside turns, through real bash children."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from dsh.agent import ModelStep, TurnError
from dsh.core import DshError
from dsh.harness import Harness
from dsh.loader import Deployment, DeploymentError, PluginEntry
from dsh.session import TOOLS, SessionLockedError, openai_tool, strict_problems

HOOK = (
    "import json, os, sys\n"
    "p = json.load(sys.stdin)\n"
    "out = os.environ['HOOK_OUT']\n"
    "with open(os.path.join(out, p['hook_event_name'] + '-' + str(len(os.listdir(out))) + '.json'), 'w') as f:\n"
    "    json.dump(p, f)\n"
    "if 'forbidden' in json.dumps(p.get('tool_input', {})):\n"
    "    print('forbidden is forbidden', file=sys.stderr); sys.exit(2)\n"
)


def _hooks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, Any], Path]:
    out = tmp_path / "hook-out"
    out.mkdir()
    script = tmp_path / "hook.py"
    script.write_text(HOOK)
    monkeypatch.setenv("HOOK_OUT", str(out))
    command = {"type": "command", "command": f"{sys.executable} {script}"}
    events = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop", "SessionEnd")
    claude = {"hooks": {event: [{"hooks": [command]}] for event in events}}
    return {"plugins": [{"id": "hooks", "config": {"claude": claude}}]}, out


def _fired(out: Path) -> list[str]:
    return [p.name.split("-")[0] for p in sorted(out.iterdir(), key=lambda p: int(p.stem.split("-")[1]))]


def _types(events: list[Any]) -> list[str]:
    return [e.type for e in events]


def test_a_turn_of_an_outside_loop_runs_bash_with_identity_hooks_and_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "home"))
    deployment, out = _hooks(tmp_path, monkeypatch)
    with Harness(deployment) as harness:
        session = harness.session(cwd=tmp_path)
        with session.turn("who am I?") as turn:
            result = turn.call(
                "bash",
                {"command": 'echo "$DSH_SESSION_ID $DSH_TOOL_CALL_ID $DSH_TURN_ID"', "timeout": None},
                call_id="call_abc123",
            )
            refused = turn.call("bash", {"command": "echo forbidden"}, call_id="toolu_2")
        assert result.output.splitlines()[0] == f"{session.id} call_abc123 {turn.id}"
        assert refused.blocked and "forbidden is forbidden" in refused.output
        session.close()
        location = session.location
    assert location is not None
    stored = [json.loads(line) for line in Path(location.path).read_text().splitlines()[1:]]
    types = [e["type"] for e in stored]
    start = types.index("turn/start")  # SessionStart's hook/result comes before the first turn, as in dsh exec
    assert types[start + 1] == "message/user" and "turn/end" in types
    calls = [e for e in stored if e["type"] == "tool/call"]
    assert [c["data"]["call_id"] for c in calls] == ["call_abc123", "toolu_2"]
    assert calls[0]["data"]["arguments"] == {
        "command": 'echo "$DSH_SESSION_ID $DSH_TOOL_CALL_ID $DSH_TURN_ID"'
    }  # null dropped
    assert _fired(out) == [
        "SessionStart",
        "UserPromptSubmit",
        "PreToolUse",
        "PostToolUse",
        "PreToolUse",
        "Stop",
        "SessionEnd",
    ]


def test_calls_from_several_threads_overlap_in_one_turn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "home"))
    results: dict[int, str] = {}
    with Harness() as harness, harness.session(cwd=tmp_path) as session:
        with session.turn("three at once") as turn:

            def one(n: int) -> None:
                results[n] = turn.call("bash", {"command": f"sleep 1; echo {n} $DSH_TOOL_CALL_ID"}).output

            started = time.monotonic()
            threads = [threading.Thread(target=one, args=(n,)) for n in range(3)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            elapsed = time.monotonic() - started
        events = session.events
    assert elapsed < 2.5, f"three 1 s calls took {elapsed:.1f} s: they did not overlap"
    ids = {line.split()[1] for line in (r.splitlines()[0] for r in results.values())}
    assert len(ids) == 3
    assert _types(events).count("tool/result") == 3 and _types(events)[-1] == "turn/end"


def test_async_calls_gather_and_an_exception_records_the_turn_as_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "home"))
    marker = tmp_path / "survived"

    async def main() -> list[Any]:
        async with Harness() as harness:
            session = harness.session(cwd=tmp_path)
            async with session.turn("fast") as turn:
                a, b = await asyncio.gather(
                    turn.acall("bash", {"command": "echo one"}), turn.acall("bash", {"command": "echo two"})
                )
                assert (a.output.splitlines()[0], b.output.splitlines()[0]) == ("one", "two")
            slow: asyncio.Future[Any] | None = None

            async def broken() -> None:
                nonlocal slow
                async with session.turn("slow") as turn:
                    slow = asyncio.ensure_future(turn.acall("bash", {"command": f"sleep 30; touch {marker}"}))
                    await asyncio.sleep(0.5)
                    raise RuntimeError("the caller's loop broke")

            with pytest.raises(RuntimeError, match="the caller's loop broke"):
                await broken()
            assert slow is not None
            with pytest.raises(asyncio.CancelledError):
                await slow
            events = session.events
            session.close()
            return events

    events = asyncio.run(main())
    ends = [e.data for e in events if e.type == "turn/end"]
    assert "failed" not in ends[0]
    assert ends[1]["failed"] == "RuntimeError: the caller's loop broke"
    assert any(e.type == "error" and "loop broke" in e.data["message"] for e in events)
    interrupted = [e for e in events if e.type == "tool/result" and e.data.get("data", {}).get("interrupted")]
    assert len(interrupted) == 1 and "process group was killed" in interrupted[0].data["output"]
    time.sleep(0.2)
    assert not marker.exists()


def test_an_unsafe_outside_call_id_is_replaced_and_recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "home"))
    with Harness() as harness, harness.session(cwd=tmp_path) as session:
        with session.turn() as turn:
            result = turn.call("bash", {"command": 'printf %s "$DSH_TOOL_CALL_ID"'}, call_id="bad id with spaces")
        call = next(e for e in session.events if e.type == "tool/call")
    used = result.output.splitlines()[0]
    assert used == call.data["call_id"] != "bad id with spaces"
    assert call.data["supplied_call_id"] == "bad id with spaces"


def test_a_turn_refuses_calls_once_it_ended(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "home"))
    with Harness() as harness, harness.session(cwd=tmp_path) as session:
        with session.turn("x") as turn:
            pass
        with pytest.raises(TurnError, match="has ended"):
            turn.call("bash", {"command": "true"})


def test_a_session_holds_its_lock_and_resumes_after_close(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "home"))
    with Harness() as harness:
        first = harness.session(cwd=tmp_path)
        with first.turn("one") as turn:
            turn.call("bash", {"command": "true"})
        with Harness() as other, pytest.raises(SessionLockedError):
            other.session(first.id)
        first.close()
        again = harness.session(first.id)
        assert again.id == first.id and _types(again.events).count("turn/start") == 1
        again.close()


def test_deployments_layer_on_the_defaults_from_a_mapping_objects_or_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "home"))
    with Harness({"plugins": [{"id": "tool-bash", "config": {"max_timeout": 5}}]}) as harness:
        names = [s.name for s in harness.tools()]
        assert {"bash", "bash_output", "bash_stop", "skill"} <= set(names)
        bash: Any = harness.runtime.ctx.require(TOOLS).get("bash")
        assert bash.config.max_timeout == 5  # replaced, not added
    with Harness(Deployment(plugins=[PluginEntry(id="skills", enabled=False)])) as harness:
        assert "skill" not in [s.name for s in harness.tools()]
    path = tmp_path / "deployment.yaml"
    path.write_text("plugins:\n  - {id: skills, enabled: false}\n")
    path.chmod(0o600)
    with Harness(path) as harness, harness.session(cwd=tmp_path) as session:  # a file: as the dsh command reads it
        assert "skill" not in [s.name for s in harness.tools()]
        with session.turn() as turn:
            shown = turn.call("bash", {"command": 'printf %s "$DSH_DEPLOYMENT"'}).output.splitlines()[0]
        assert shown == str(path)
    with pytest.raises(DeploymentError, match="enabled: false but is not a default plugin"):
        Harness({"plugins": [{"id": "nothing", "enabled": False}]}).open()
    with pytest.raises(DeploymentError, match="<deployment mapping>"):
        Harness({"plugins": [{"id": "x", "bogus": 1}]}).open()


def test_tool_specs_export_to_openai_strict_and_anthropic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "home"))
    with Harness() as harness:
        specs = harness.tools()
        strict = harness.openai_tools(strict=True)
        loose = harness.openai_tools()
        anthropic = harness.anthropic_tools()
    assert [t["function"]["name"] for t in strict] == [s.name for s in specs]
    for tool in strict:
        assert tool["type"] == "function" and tool["function"]["strict"] is True
        assert strict_problems(tool["function"]["parameters"]) == []
    bash = next(t["function"] for t in strict if t["function"]["name"] == "bash")
    assert bash["parameters"]["required"] == list(bash["parameters"]["properties"])
    assert bash["parameters"]["properties"]["timeout"]["type"] == ["number", "null"]
    assert bash["parameters"]["properties"]["command"]["type"] == "string"
    assert "strict" not in loose[0]["function"]
    assert {"name", "description", "input_schema"} == set(anthropic[0])
    assert anthropic[0]["input_schema"] == dict(specs[0].parameters)
    assert json.loads(json.dumps(strict)) == strict  # plain JSON, no read-only mappings
    assert openai_tool(specs[0]) == loose[0]


class _Answers:
    """The caller's own model: a subagent answers its task back, in upper case."""

    name = "answers"

    def __init__(self) -> None:
        self.prompt = ""

    def begin_turn(self, prompt: str) -> None:
        self.prompt = prompt

    async def step(self, session: Any, tools: Any) -> ModelStep:
        return ModelStep(text=self.prompt.upper())

    def subagent(self, agent_type: str) -> _Answers:
        return _Answers()


def test_the_caller_chooses_the_tools_and_spawn_agent_is_offered_only_with_a_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 38: an outside loop was offered spawn_agent and calling it failed with a ScriptError."""
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "home"))
    with Harness() as harness:
        default = [spec.name for spec in harness.tools()]
        assert default == sorted(default) and "bash" in default and "spawn_agent" not in default
        assert [t["function"]["name"] for t in harness.openai_tools(["skill", "bash"])] == ["skill", "bash"]
        assert [t["name"] for t in harness.anthropic_tools(["bash_stop"])] == ["bash_stop"]
        with pytest.raises(DshError, match=r"no tool named 'pwsh' in this deployment; its tools: bash, ") as refused:
            harness.tools(["bash", "pwsh"])
        assert str(refused.value).endswith(", ".join(default))  # what this caller may ask for
        with pytest.raises(DshError, match="'bash' is asked for twice"):
            harness.tools(["bash", "bash"])
        with pytest.raises(TypeError, match="list of tool names"):
            harness.tools("bash")
        with pytest.raises(DshError, match=r"harness.session\(model=your_model\)"):
            harness.tools(["spawn_agent"])

        with harness.session(cwd=tmp_path) as plain:
            assert [spec.name for spec in plain.tools()] == default
            with pytest.raises(DshError, match="has no model for spawn_agent"):
                plain.tools(["spawn_agent"])
            with plain.turn() as turn, pytest.raises(DshError, match=f"session {plain.id} has no model for spawn"):
                turn.call("spawn_agent", {"agent_type": "general", "prompt": "hi"})
            assert "tool/call" not in _types(plain.events)  # refused before anything ran or was recorded

        with harness.session(cwd=tmp_path, model=_Answers()) as session:
            assert [spec.name for spec in session.tools()] == sorted([*default, "spawn_agent"])
            assert [t["function"]["name"] for t in session.openai_tools(["spawn_agent"])] == ["spawn_agent"]
            with session.turn("delegate") as turn:
                answer = turn.call("spawn_agent", {"agent_type": "general", "prompt": "say hi"}, call_id="call_s")
            assert not answer.is_error and answer.output == "SAY HI"
            child = harness.session(answer.data["session_id"])
            try:
                assert child.header.parent_session == session.id and child.header.origin == "subagent"
            finally:
                child.close()
