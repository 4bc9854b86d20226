"""Two real turns against a real model endpoint (manual, never in CI): ``hatch run smoke-model [PROVIDER]``.

PROVIDER is ``openai`` (default) or ``anthropic``; the endpoint, model and key come from the SDK's
environment (``OPENAI_API_KEY``, ``OPENAI_BASE_URL``, ``OPENAI_MODEL``; ``ANTHROPIC_*``) or from
the deployment in effect. A scratch ``DSH_HOME`` is used. The first turn asks the model to run a
bash command printing its session and call ids; the second resumes the session. The run passes
when both turns end, the first call printed the session id ``dsh run`` reported, and the key is
nowhere in the transcript. Exit 2 (and nothing sent) when the key variable is not set.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

KEYS = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}


def run(provider: str, home: str, *extra: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "dsh.cli", "run", "--model", provider, "--json", *extra]
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "DSH_HOME": home}, check=False)
    sys.stderr.write(done.stderr)
    return done


def main() -> int:
    provider = sys.argv[1] if len(sys.argv) > 1 else "openai"
    variable = KEYS.get(provider, "")
    key = os.environ.get(variable, "")
    if not key:
        print(f"smoke-model: ${variable} is not set; nothing was sent", file=sys.stderr)
        return 2
    home = tempfile.mkdtemp(prefix="dsh-smoke-")
    prompt = 'Use the bash tool once to run: echo "$DSH_SESSION_ID $DSH_TOOL_CALL_ID". Then say done.'
    first = run(provider, home, "--prompt", prompt)
    if first.returncode != 0:
        return 1
    document = json.loads(first.stdout)
    session_id = document["session_id"]
    outputs = [c["output"] for t in document["turns"] for c in t["tool_calls"]]
    second = run(provider, home, "--session", session_id, "--prompt", "What did the command print? One line.")
    if second.returncode != 0:
        return 1
    location = document["location"]
    transcript = Path(location["path"]).read_text() if location else ""
    checks = {
        "the call printed its own session id": any(re.search(re.escape(session_id), o) for o in outputs),
        "the key is not in the transcript": key not in transcript,
        "the resumed turn answered": bool(json.loads(second.stdout)["turns"][0]["text"]),
    }
    for name, ok in checks.items():
        print(f"smoke-model: {'ok  ' if ok else 'FAIL'} {name}")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
