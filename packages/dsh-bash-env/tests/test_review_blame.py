"""Review regression: resolves that never passed a deadline never make a contributor's calls fail."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping

from dsh.bash_env import BashEnvRegistry, FunctionContributor
from dsh.session import ToolExecution


def test_calls_cancelled_while_a_healthy_contributor_resolves_do_not_refuse_the_next_call() -> None:
    registry = BashEnvRegistry("/h", resolve_timeout=2.0)

    def resolve(execution: ToolExecution) -> Mapping[str, str]:
        time.sleep(0.3)  # well within its deadline
        return {"DSH_HEALTHY": execution.call_id}

    registry.register(FunctionContributor("healthy", {"DSH_HEALTHY": "h"}, resolve))

    async def main() -> Mapping[str, str]:
        # Served clients that disconnect while the contributor resolves.
        calls = [asyncio.ensure_future(registry.collect_async(ToolExecution("bash", f"gone-{i}"))) for i in range(5)]
        await asyncio.sleep(0.05)
        for call in calls:
            call.cancel()
        await asyncio.gather(*calls, return_exceptions=True)
        return await registry.collect_async(ToolExecution("bash", "next"))

    assert asyncio.run(main())["DSH_HEALTHY"] == "next"
