"""Per-call ``collect()`` time with 0, 5 and 10 third-party contributors answering from memory.

    hatch run python benchmarks/collect_contributors.py [--calls N] [--rounds R]

Prints one JSON document: for each count, the median (and the quartiles) over ``rounds`` rounds of
the mean per-call time of ``calls`` consecutive calls, blocking ``collect()`` and ``collect_async()``
(inside one running loop, as ``dsh serve`` calls it). Rounds of the counts are interleaved, so load
on this shared machine moves them together: compare counts within one run. Not a timed test.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import time
from collections.abc import Mapping

from dsh.bash_env import BashEnvRegistry, FunctionContributor
from dsh.session import ToolExecution

COUNTS = (0, 5, 10)
CALL = ToolExecution("bash", "bench")


def _registry(count: int) -> BashEnvRegistry:
    registry = BashEnvRegistry("/h", resolve_timeout=5.0)
    for i in range(count):
        key = f"DSH_BENCH_{i}"

        def resolve(execution: ToolExecution, key: str = key) -> Mapping[str, str]:
            return {key: "value"}

        registry.register(FunctionContributor(f"bench-{i:02d}", {key: "a benchmark fact"}, resolve))
    return registry


def _blocking(registry: BashEnvRegistry, calls: int) -> float:
    collect = registry.collect
    started = time.perf_counter()
    for _ in range(calls):
        collect(CALL)
    return (time.perf_counter() - started) / calls


def _async(registry: BashEnvRegistry, calls: int) -> float:
    async def run() -> float:
        collect = registry.collect_async
        started = time.perf_counter()
        for _ in range(calls):
            await collect(CALL)
        return (time.perf_counter() - started) / calls

    return asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    registries = {count: _registry(count) for count in COUNTS}
    for registry in registries.values():  # warm-up: threads started, caches filled
        _blocking(registry, 200)
        _async(registry, 200)
    gc.collect()
    gc.freeze()
    times: dict[str, list[float]] = {f"{kind}_{c}": [] for kind in ("collect", "collect_async") for c in COUNTS}
    for _ in range(args.rounds):
        for count, registry in registries.items():
            times[f"collect_{count}"].append(_blocking(registry, args.calls))
            times[f"collect_async_{count}"].append(_async(registry, args.calls))
    report = {}
    for name, values in times.items():
        q1, median, q3 = statistics.quantiles(values, n=4)
        report[name] = {"median_us": round(median * 1e6, 1), "q1_us": round(q1 * 1e6, 1), "q3_us": round(q3 * 1e6, 1)}
    print(json.dumps({"calls": args.calls, "rounds": args.rounds, "per_call": report}, indent=2))


if __name__ == "__main__":
    main()
