"""A deployment entry whose distribution is uninstalled is disposed on refresh (over the default JSONL backend)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from dsh.core import FiberState
from dsh.loader import PLUGINS_GROUP
from tests.helpers import make_dist, remove_dist, touch_dir

PLUGIN_SRC = """
from dsh.core import Plugin
plugin = Plugin(name="{name}", apply=lambda ctx, cfg: ctx.provide("{name}-svc", "{version}"))
"""


def test_uninstalled_deployment_entry_is_disposed_on_refresh(site: Path, tmp_path: Path) -> None:
    from dsh.loader import boot, parse_deployment

    info = make_dist(
        site,
        "svc2-dist",
        "1.0",
        {PLUGINS_GROUP: {"svc2": "svc2_mod:plugin"}},
        {"svc2_mod": PLUGIN_SRC.format(name="svc2", version="1.0")},
    )
    runtime = boot(parse_deployment({"dsh_home": str(tmp_path / "h"), "plugins": [{"id": "s", "name": "svc2"}]}))
    try:
        assert runtime.ctx.get("svc2-svc") == "1.0"
        remove_dist(info, ("svc2_mod",))
        touch_dir(site)
        runtime.refresh()
        assert runtime.entries["s"].state is FiberState.DISPOSED
        assert runtime.entries["s"].error == "distribution svc2-dist 1.0 was uninstalled"
        assert runtime.ctx.get("svc2-svc") is None
    finally:
        runtime.close()
        sys.modules.pop("svc2_mod", None)


@pytest.mark.parametrize("per_turn", [True, False])
def test_a_turn_refreshes_only_when_the_deployment_says_so(site: Path, tmp_path: Path, per_turn: bool) -> None:
    """``refresh_per_turn`` (default true) decides whether an uninstall shows at the next turn."""
    import asyncio

    from dsh.agent import BUILTINS, Agent, ModelStep, ScriptedModel
    from dsh.loader import boot, parse_deployment
    from dsh.session import SESSIONS

    info = make_dist(
        site,
        "svc3-dist",
        "1.0",
        {PLUGINS_GROUP: {"svc3": "svc3_mod:plugin"}},
        {"svc3_mod": PLUGIN_SRC.format(name="svc3", version="1.0")},
    )
    deployment = parse_deployment(
        {"dsh_home": str(tmp_path / "h"), "refresh_per_turn": per_turn, "plugins": [{"id": "s", "name": "svc3"}]}
    )
    runtime = boot(deployment, builtins=BUILTINS)
    try:
        session = runtime.ctx.require(SESSIONS).create(tmp_path)
        remove_dist(info, ("svc3_mod",))
        touch_dir(site)
        asyncio.run(Agent(runtime.ctx, session, ScriptedModel([[ModelStep(text="ok")]])).run_turn("hi"))
        expected = FiberState.DISPOSED if per_turn else FiberState.ACTIVE
        assert runtime.entries["s"].state is expected
    finally:
        runtime.close()
        sys.modules.pop("svc3_mod", None)
