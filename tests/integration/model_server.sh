#!/bin/bash
# tests/tools/model_server.py, the stand-in for paid model APIs that the
# agent CLIs and the model gateway are tested against: one neutral
# recording played in the three dialects, streamed and not, as the real
# APIs send them (the pieces reassemble, the usage is where each API puts
# it); the key required in either header, a 401 in the request's own error
# shape taking no entry; entries matched by "when" and kept by "repeat";
# faults; the models list and token counts outside the script; the log.
. "$(dirname "$0")/../lib.sh"

# lib.sh's scratch directory (its trap is replaced here: remove it too)
TMP="$TEST_TMP"
trap 'kill $MS_PID 2>/dev/null; wait 2>/dev/null; rm -rf "$TMP"' EXIT

cat >"$TMP/rec.json" <<'EOF'
{"models": ["m-1", "m-2"],
 "responses": [
  {"when": {"tools": false, "contains": "title generator"}, "repeat": true,
   "text": "A title"},
  {"text": "Running the tests.",
   "tool_calls": [{"name": "bash", "arguments": {"command": "make test", "path": "{{DIR}}/x"}, "id": "call_a"},
                  {"name": "read", "arguments": "{\"file\": \"a.c\"}"}],
   "usage": {"prompt_tokens": 1000, "completion_tokens": 50, "cached_tokens": 600}},
  {"text": "Patched.",
   "tool_calls": [{"name": "apply_patch", "input": "*** Begin Patch\n*** End Patch\n"}],
   "usage": {"prompt_tokens": 1200, "completion_tokens": 30, "cached_tokens": 1000}},
  {"text": "Done: the greeting ends with an exclamation mark now.",
   "usage": {"prompt_tokens": 1300, "completion_tokens": 12, "cached_tokens": 1200}},
  {"when": {"user_contains": "second turn"}, "text": "second answer"},
  {"status": 429, "retry_after": 2},
  {"status": 529},
  {"hang_up": true},
  {"text": "plain", "finish_reason": "length",
   "usage": {"prompt_tokens": 7, "completion_tokens": 3}}
 ]}
EOF
KEY="sk-ms-test-42"
python3 "$ROOT_DIR/tests/tools/model_server.py" --port 0 --recording "$TMP/rec.json" \
	--log "$TMP/log.jsonl" --require-key "$KEY" --var "DIR=/workspace" \
	>"$TMP/port" 2>"$TMP/err" &
MS_PID=$!
for _ in $(seq 1 100); do [ -s "$TMP/port" ] && break; sleep 0.05; done
PORT="$(head -1 "$TMP/port")"
if [ -z "$PORT" ]; then
	fail "model_server starts" "$(cat "$TMP/err")"
	exit 0
fi

python3 - "$PORT" "$KEY" "$TMP/log.jsonl" >"$TMP/results" 2>&1 <<'EOF'
import http.client, json, socket, sys

port, key, log_path = int(sys.argv[1]), sys.argv[2], sys.argv[3]


def say(name, ok, why=""):
    print(("ok %s" % name) if ok else ("bad %s: %s" % (name, why)))


def call(method, path, body=None, headers=None):
    """(status, headers, raw body) of one request."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    data = json.dumps(body).encode() if body is not None else None
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    c.request(method, path, data, h)
    r = c.getresponse()
    out = (r.status, {k.lower(): v for k, v in r.getheaders()}, r.read().decode())
    c.close()
    return out


def events(raw):
    """SSE events: (event name or None, data text)."""
    out = []
    for block in raw.split("\n\n"):
        if not block.strip():
            continue
        name, data = None, []
        for line in block.split("\n"):
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data.append(line[6:])
        out.append((name, "\n".join(data)))
    return out


BEARER = {"Authorization": "Bearer " + key}
XKEY = {"x-api-key": key, "anthropic-version": "2023-06-01"}
TOOLS_CHAT = [{"type": "function", "function": {"name": "bash", "parameters": {}}}]

# ---- the key ---------------------------------------------------------------
s, _, raw = call("POST", "/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "hi"}]})
d = json.loads(raw)
say("no key: 401 in OpenAI's shape", s == 401 and d["error"]["message"], "%s %s" % (s, raw))
s, _, raw = call("POST", "/v1/messages", {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5},
                 {"x-api-key": "wrong"})
d = json.loads(raw)
say("wrong key: 401 in Anthropic's shape", s == 401 and d["type"] == "error" and d["error"]["type"] == "authentication_error",
    "%s %s" % (s, raw))

# ---- the title request: matched by "when", kept by "repeat" ----------------
for i in (1, 2):
    s, _, raw = call("POST", "/v1/chat/completions", {"model": "m", "messages": [
        {"role": "system", "content": "You are a title generator."}, {"role": "user", "content": "x"}]}, BEARER)
    d = json.loads(raw) if s == 200 else {}
    say("side request %d answered by its entry" % i, s == 200 and d["choices"][0]["message"]["content"] == "A title",
        "%s %s" % (s, raw[:200]))

# ---- chat completions, streamed, with usage ---------------------------------
s, h, raw = call("POST", "/v1/chat/completions", {"model": "m", "stream": True, "stream_options": {"include_usage": True},
                 "tools": TOOLS_CHAT, "messages": [{"role": "user", "content": "fix it"}]}, BEARER)
ev = events(raw)
say("chat: streamed as SSE", s == 200 and h.get("content-type", "").startswith("text/event-stream") and ev[-1][1] == "[DONE]",
    "%s %s" % (s, raw[-200:]))
chunks = [json.loads(e[1]) for e in ev[:-1]]
deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
text = "".join(d.get("content") or "" for d in deltas)
calls = {}
for d in deltas:
    for tc in d.get("tool_calls") or []:
        one = calls.setdefault(tc["index"], {"id": None, "name": None, "args": ""})
        if "id" in tc:
            one["id"], one["name"] = tc["id"], tc["function"]["name"]
        one["args"] += tc["function"].get("arguments", "")
say("chat: role first, content in pieces", deltas[0].get("role") == "assistant" and text == "Running the tests."
    and sum(1 for d in deltas if d.get("content")) > 1, repr(text))
say("chat: tool calls whole, --var put in", calls.get(0, {}).get("id") == "call_a" and calls[0]["name"] == "bash"
    and json.loads(calls[0]["args"]) == {"command": "make test", "path": "/workspace/x"}
    and calls.get(1, {}).get("name") == "read" and json.loads(calls[1]["args"]) == {"file": "a.c"}, repr(calls))
fin = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
use = [c for c in chunks if not c["choices"]]
say("chat: finish_reason, then usage with cached tokens", fin == ["tool_calls"] and len(use) == 1
    and use[0]["usage"]["prompt_tokens"] == 1000 and use[0]["usage"]["completion_tokens"] == 50
    and use[0]["usage"]["prompt_tokens_details"]["cached_tokens"] == 600, repr((fin, use)))

# ---- responses, streamed: a message and a custom tool call -------------------
s, h, raw = call("POST", "/v1/responses", {"model": "m", "stream": True, "input": [
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]}],
    "tools": [{"type": "custom", "name": "apply_patch"}]}, BEARER)
ev = events(raw)
docs = [json.loads(e[1]) for e in ev]
names = [e[0] for e in ev]
say("responses: each event named as its type, numbered", s == 200 and names == [d["type"] for d in docs]
    and [d["sequence_number"] for d in docs] == list(range(len(docs))), repr(names))
want = ["response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"]
say("responses: the event order", names[:4] == want and names[-1] == "response.completed"
    and "response.custom_tool_call_input.delta" in names, repr(names))
text = "".join(d["delta"] for d in docs if d["type"] == "response.output_text.delta")
patch = "".join(d["delta"] for d in docs if d["type"] == "response.custom_tool_call_input.delta")
done = docs[-1]["response"]
items = [i["type"] for i in done["output"]]
say("responses: text and free-form input whole", text == "Patched." and patch == "*** Begin Patch\n*** End Patch\n"
    and items == ["message", "custom_tool_call"], repr((text, patch, items)))
u = done["usage"]
say("responses: usage in response.completed", u["input_tokens"] == 1200 and u["output_tokens"] == 30
    and u["input_tokens_details"]["cached_tokens"] == 1000 and u["total_tokens"] == 1230, repr(u))

# ---- anthropic messages, streamed --------------------------------------------
s, h, raw = call("POST", "/v1/messages?beta=true", {"model": "claude-x", "stream": True, "max_tokens": 100,
                 "messages": [{"role": "user", "content": "go on"}]}, XKEY)
ev = events(raw)
docs = [json.loads(e[1]) for e in ev]
names = [e[0] for e in ev]
say("messages: event order", s == 200 and names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    and names == [d["type"] for d in docs], repr(names))
start = docs[0]["message"]["usage"]
say("messages: message_start usage as Anthropic counts", start["input_tokens"] == 100
    and start["cache_read_input_tokens"] == 1200, repr(start))
text = "".join(d["delta"]["text"] for d in docs if d["type"] == "content_block_delta" and d["delta"]["type"] == "text_delta")
say("messages: text whole", text == "Done: the greeting ends with an exclamation mark now.", repr(text))
md = [d for d in docs if d["type"] == "message_delta"][0]
say("messages: message_delta stop_reason and output tokens", md["delta"]["stop_reason"] == "end_turn"
    and md["usage"]["output_tokens"] == 12, repr(md))

# ---- a follow-up matched by the last user message ----------------------------
s, _, raw = call("POST", "/v1/messages", {"model": "m", "max_tokens": 5, "messages": [
    {"role": "user", "content": "first"}, {"role": "assistant", "content": "ok"},
    {"role": "user", "content": [{"type": "text", "text": "the second turn"}]}]}, BEARER)
d = json.loads(raw) if s == 200 else {}
say("user_contains picks the follow-up's entry", s == 200 and d["content"][0]["text"] == "second answer"
    and d["stop_reason"] == "end_turn", "%s %s" % (s, raw[:200]))

# ---- outside the script: models, token counts --------------------------------
s, _, raw = call("GET", "/v1/models", None, BEARER)
d = json.loads(raw) if s == 200 else {}
say("GET /v1/models lists the recording's models", s == 200 and [m["id"] for m in d["data"]] == ["m-1", "m-2"]
    and d["object"] == "list" and d["data"][0]["type"] == "model", raw[:200])
s, _, raw = call("POST", "/v1/messages/count_tokens", {"model": "m", "messages": [{"role": "user", "content": "x" * 400}]}, XKEY)
say("count_tokens answers an estimate", s == 200 and json.loads(raw)["input_tokens"] >= 100, raw)

# ---- faults ------------------------------------------------------------------
s, h, raw = call("POST", "/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "x"}]}, BEARER)
say("429 with Retry-After", s == 429 and h.get("retry-after") == "2" and json.loads(raw)["error"]["type"], "%s %s" % (s, h))
s, h, raw = call("POST", "/v1/messages", {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}, XKEY)
say("529 as Anthropic's overloaded_error", s == 529 and json.loads(raw)["error"]["type"] == "overloaded_error", "%s %s" % (s, raw))
try:
    call("POST", "/v1/responses", {"model": "m", "input": "x"}, BEARER)
    say("hang_up closes without an answer", False, "an answer came")
except (http.client.HTTPException, ConnectionError, socket.timeout):
    say("hang_up closes without an answer", True)

# ---- not streamed, in each dialect -------------------------------------------
s, _, raw = call("POST", "/v1/responses", {"model": "m", "input": "x"}, BEARER)
d = json.loads(raw) if s == 200 else {}
say("responses not streamed; length: incomplete", s == 200 and d["object"] == "response" and d["status"] == "incomplete"
    and d["output"][0]["content"][0]["text"] == "plain" and d["usage"]["input_tokens"] == 7, raw[:300])
s, _, raw = call("POST", "/v1/messages", {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}, XKEY)
d = json.loads(raw)
say("used up: 400 recording_exhausted in the dialect's shape", s == 400 and d["error"]["type"] == "recording_exhausted",
    "%s %s" % (s, raw))

# ---- the log -------------------------------------------------------------------
log = [json.loads(l) for l in open(log_path)]
say("one log line per request", len(log) == 15, "%d lines" % len(log))
first = log[0]
say("the log: method, path, format, auth headers, body, entry", first["method"] == "POST"
    and first["path"] == "/v1/chat/completions" and first["format"] == "chat" and first["authorization"] is None
    and first["status"] == 401 and first["entry"] is None and first["body"]["messages"][0]["content"] == "hi", repr(first)[:300])
xk = [r for r in log if r["path"].startswith("/v1/messages?beta")][0]
say("the log: x-api-key and all headers", xk["x_api_key"] == key and xk["headers"]["anthropic-version"] == "2023-06-01"
    and xk["entry"] == 3, repr(xk)[:300])
say("the log: the side requests played entry 0, the script 1, 2, 3",
    [r["entry"] for r in log if r["status"] == 200 and r["format"] in ("chat", "responses", "messages")][:5] == [0, 0, 1, 2, 3],
    repr([r["entry"] for r in log]))
EOF

while read -r word rest; do
	case "$word" in
	ok) pass "$rest" ;;
	bad) fail "${rest%%: *}" "${rest#*: }" ;;
	*) fail "model_server checks" "$word $rest" ;;
	esac
done <"$TMP/results"
