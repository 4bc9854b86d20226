"""A hook command for the tests: records its stdin payload, then acts as asked.

usage: hook_script.py RECORD_DIR ACTION
  ACTION: ok | block-rm (exit 2 with a reason when the command has rm -rf) | deny-json |
          crash | sleep | exit2-silent | stop
"""

import json
import os
import sys
import time
import uuid

record_dir, action = sys.argv[1], sys.argv[2]
payload = json.load(sys.stdin)
os.makedirs(record_dir, exist_ok=True)
with open(os.path.join(record_dir, f"{payload['hook_event_name']}-{uuid.uuid4().hex}.json"), "w") as fh:
    json.dump({"payload": payload, "env": {k: v for k, v in os.environ.items() if k.upper().startswith("DSH_")}}, fh)

command = str((payload.get("tool_input") or {}).get("command", ""))
if action == "block-rm" and "rm -rf" in command:
    print("rm -rf is not allowed here", file=sys.stderr)
    sys.exit(2)
if action == "deny-json" and payload["hook_event_name"] == "PreToolUse":
    print(
        json.dumps(
            {
                "hookSpecificOutput": {
                    "hookEventName": "PreToolUse",
                    "permissionDecision": "deny",
                    "permissionDecisionReason": "codex policy says no",
                }
            }
        )
    )
if action == "crash":
    raise SystemExit("hook crashed on purpose")
if action == "sleep":
    time.sleep(30)
if action == "exit2-silent":
    sys.exit(2)
