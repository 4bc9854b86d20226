"""The ``model/request`` event: what a model was offered, recorded so the transcript shows the prefix."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from dsh.session import ToolSpec

REQUEST_EVENT = "model/request"


def tool_specs_json(specs: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """The tool specs as the model receives them: name, description, parameter schema, in registry order."""
    return [{"name": s.name, "description": s.description, "parameters": dict(s.parameters)} for s in specs]


def request_data(model: str, specs: Sequence[ToolSpec]) -> dict[str, Any]:
    """The data of a ``model/request`` event: the model name, the tool specs and a digest of them.

    The digest is SHA-256 over the specs' canonical JSON (sorted keys, no spaces), so two
    requests offered the same tools byte for byte carry the same digest.
    """
    import hashlib  # here, not at the top: its OpenSSL start costs a cold `dsh exec` that asks no model

    tools = tool_specs_json(specs)
    canonical = json.dumps(tools, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return {"model": model, "tools": tools, "tools_sha256": hashlib.sha256(canonical.encode()).hexdigest()}
