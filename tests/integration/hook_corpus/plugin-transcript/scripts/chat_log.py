#!/usr/bin/env python3
"""Stop hook: copy the conversation so far into a chat log (one "role: text" line per message).

The log goes to $CHAT_LOG, else chat.log in the plugin's data folder. Each transcript line is one
entry; user and assistant entries carry a message whose content is a string or a list of blocks.
"""

import json
import os
import sys


def text_of(content):
    if isinstance(content, str):
        return content
    parts = []
    for block in content or []:
        if block.get("type") == "text":
            parts.append(block["text"])
        elif block.get("type") == "tool_use":
            parts.append(f"[{block['name']}] {json.dumps(block.get('input'), sort_keys=True)}")
        elif block.get("type") == "tool_result":
            result = block.get("content")
            parts.append("[result] " + (result if isinstance(result, str) else text_of(result)))
    return "\n".join(parts)


payload = json.load(sys.stdin)
log = os.environ.get("CHAT_LOG") or os.path.join(os.environ["CLAUDE_PLUGIN_DATA"], "chat.log")
entries = []
with open(payload["transcript_path"], encoding="utf-8") as transcript:
    for line in transcript:
        entry = json.loads(line)
        if entry.get("type") not in ("user", "assistant") or entry.get("isMeta"):
            continue
        message = entry["message"]
        entries.append(f"{message['role']}: {text_of(message['content'])}")
with open(log, "a", encoding="utf-8") as out:
    out.write(f"--- {payload['session_id']} ({len(entries)} entries)\n")
    out.write("".join(f"{e}\n" for e in entries))
