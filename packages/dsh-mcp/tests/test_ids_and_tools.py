"""The server's own rules, without a client: call ids, which tools it offers, and their MCP form."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from dsh.harness import Harness
from dsh.mcp._server import call_id, mcp_tool, shell_tools
from dsh.session import TOOLS, anthropic_tool, is_safe_id


@given(st.one_of(st.none(), st.integers(), st.text(max_size=200), st.floats()))
def test_every_call_id_is_safe_and_fresh_whatever_the_request_id(request_id: object) -> None:
    made = {call_id(request_id) for _ in range(3)}
    assert len(made) == 3 and all(is_safe_id(m) and m.startswith("mcp-") for m in made)


def test_a_safe_request_id_is_kept_in_the_call_id() -> None:
    assert call_id(7).startswith("mcp-7-") and call_id("req_1").startswith("mcp-req_1-")
    assert call_id("two words").count("-") == 1  # unsafe: left out, only the random part


def test_only_the_shell_tools_and_their_companions_are_offered(tmp_path: Path) -> None:
    with Harness(env={"DSH_HOME": str(tmp_path / "home")}) as harness:
        registry, specs = harness.runtime.ctx.require(TOOLS), harness.tools()
        offered = shell_tools(specs, {spec.name: registry.get(spec.name) for spec in specs})
        assert {s.name for s in specs} >= {"bash", "bash_output", "bash_stop", "skill"}  # skill: not a shell tool
        assert [s.name for s in offered] == ["bash", "bash_output", "bash_stop"]
        for spec in offered:
            tool = mcp_tool(spec)
            assert (tool.name, tool.description, tool.input_schema) == tuple(anthropic_tool(spec).values())
