#!/usr/bin/env python3
"""Stop hook: refuse to stop until a test runner was called through the Bash tool.

Reads the transcript line by line and looks only at the assistant's Bash tool_use blocks (what the
agent ran, not what anyone said), taking the first word of each command as the program.
"""

import json
import os
import shlex
import sys

RUNNERS = {"pytest", "py.test", "tox", "nox"}


def ran_tests(path: str) -> bool:
    with open(path, encoding="utf-8") as transcript:
        for line in transcript:
            entry = json.loads(line)
            if entry.get("type") != "assistant":
                continue
            content = entry.get("message", {}).get("content")
            if not isinstance(content, list):
                continue
            for block in content:
                if block.get("type") == "tool_use" and block.get("name") == "Bash":
                    words = shlex.split(block.get("input", {}).get("command", ""))
                    program = os.path.basename(words[0]) if words else ""
                    if program in RUNNERS or words[1:3] == ["-m", "pytest"]:
                        return True
    return False


payload = json.load(sys.stdin)
path = payload.get("transcript_path") or ""
# A transcript it cannot read shows no test run: the gate holds (it is a gate).
if not os.path.isfile(path) or not ran_tests(path):
    print(json.dumps({"decision": "block", "reason": "Run the tests (pytest) before you stop."}))
