#!/usr/bin/env python3
"""model_server.py - a test stand-in for paid model APIs, in three dialects.

A small local server that speaks OpenAI Chat Completions, OpenAI Responses
and Anthropic Messages, streamed and not, and plays one scripted recording
in whichever dialect a request comes in, so that real coding-agent CLIs
(opencode, codex, claude code) and Warren's model gateway can be tested
without a network, a key or a bill. Python 3 standard library only.

    model_server.py --port 0 --recording FILE [--log FILE]
                    [--require-key KEY] [--var NAME=VALUE ...]

It listens on 127.0.0.1 (--port 0: a free port, printed alone on the first
line of stdout once it listens). Routes, under any prefix (/v1 or none):

    POST .../chat/completions          Chat Completions    ("chat")
    POST .../responses                 Responses           ("responses")
    POST .../messages                  Anthropic Messages  ("messages")
    POST .../messages/count_tokens     {"input_tokens": N}, an estimate
    POST .../responses/input_tokens    the same, Responses' shape
    GET  .../models, .../models/ID     the recording's "models"

Only the first three play the recording; the others never take an entry.

The recording is JSON, {"responses": [ENTRY, ...], "models": [ID, ...]}
("models" optional: default ["stand-in"]; other keys, such as the
"prompts" try_agent_cli.sh reads, are left alone); each --var NAME=VALUE puts
VALUE for every {{NAME}} in its strings (a workspace's absolute path, say,
which claude code's file tools want). An ENTRY says what the assistant
answers, in no dialect of its own:

    {"text": "I will fix it.",                       (optional)
     "tool_calls": [{"name": "bash",                 (optional)
                     "arguments": {"command": "make test"},
                     "id": "call_1"}],               (id optional)
     "usage": {"prompt_tokens": 812, "completion_tokens": 41,
               "cached_tokens": 512},                (optional)
     "finish_reason": "stop"}    (optional: "tool_calls" when there are
                                  tool calls, else "stop"; or "length")

"arguments" is an object (or its JSON text). A call with "input": TEXT
instead of "arguments" is a free-form (custom) tool call: Responses sends
it as a custom_tool_call item, the other dialects as arguments {"input":
TEXT}. chat_server.py's entries ({"message": {"content", "tool_calls":
[{"function": {"name", "arguments"}}]}}) are read too.

Rendered:

  chat       not streamed: one chat.completion; "stream": true: the
             chat.completion.chunk events as OpenAI streams them (role
             first, content in pieces, each tool call's index, id and name
             then its arguments in fragments, a chunk with finish_reason,
             a last one with choices [] and the usage when the request
             has stream_options.include_usage), then data: [DONE]. usage:
             prompt_tokens, completion_tokens, total_tokens,
             prompt_tokens_details.cached_tokens.
  responses  not streamed: one response object; streamed: "event:" and
             "data:" pairs: response.created, response.in_progress, per
             output item response.output_item.added, for a message
             response.content_part.added, response.output_text.delta...,
             response.output_text.done, response.content_part.done, for a
             function call response.function_call_arguments.delta...,
             response.function_call_arguments.done (custom_tool_call:
             response.custom_tool_call_input.delta/.done), then
             response.output_item.done, and response.completed with usage
             input_tokens (cached ones included, as OpenAI counts),
             input_tokens_details.cached_tokens, output_tokens,
             output_tokens_details.reasoning_tokens, total_tokens. Every
             event has its sequence_number.
  messages   not streamed: one message; streamed: message_start (usage
             input_tokens = prompt_tokens - cached_tokens, as Anthropic
             counts, cache_read_input_tokens = cached_tokens,
             cache_creation_input_tokens 0), ping, per block
             content_block_start, content_block_delta (text_delta pieces,
             or input_json_delta fragments after an empty one),
             content_block_stop, then message_delta (stop_reason end_turn,
             tool_use or max_tokens; usage.output_tokens) and
             message_stop.

Which entry a request plays: the first entry of the list, in order, that
is not used up and whose "when" (if it has one) the request meets. Playing
an entry uses it up, unless it has "repeat": true. So an entry without
"when" is the next step of the script whatever the request is, and a
CLI's auxiliary requests are kept off the script by entries listed before
it that match them and repeat. What the real CLIs need (their recordings
are tests/fixtures/agents/*.json):

  - opencode sends a title request on a session's first turn, beside the
    first model call, with no tools and a system message "You are a
    title generator...":
        {"when": {"tools": false, "contains": "You are a title generator"},
         "text": "Fix the greeting", "repeat": true}
  - codex, and claude code with CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC,
    send model calls only: their scripts are plain lists;
  - a follow-up turn's first entry can name the new prompt, so that a
    CLI that lost its conversation meets a 400 instead of the next step:
        {"when": {"user_contains": "What did you change"}, "text": "..."}

"when" holds conditions, all of which must hold:

    "contains": TEXT or [TEXT, ...]  every TEXT is in the request: in one
                                     of the strings of its JSON body (so
                                     no JSON escaping to think of)
    "not_contains": TEXT or [...]    none is
    "user_contains": TEXT or [...]   every TEXT is in the last message
                                     whose role is "user" (a new prompt,
                                     or tool results in Anthropic's
                                     dialect): the turn's own words, not
                                     what an agent appends after them
    "tools": true / false            whether the request offers tools
    "format": "chat" / "responses" / "messages"
    "model": TEXT                    TEXT is in the request's "model"
    "stream": true / false

A request that no entry fits gets a 400 in its dialect's error shape
saying so (type "recording_exhausted"), and takes nothing.

Faults, as in chat_server.py, in the request's dialect ("delay" also
goes with any answer):

    {"status": 429, "retry_after": 0.1}      Retry-After header (seconds)
    {"status": 500} / {"status": 529}        the dialect's error body
    {"status": 400, "error": {"message": "...", "type": "..."}}
    {"hang_up": true}                        close without an answer
    {"raw": "TEXT", "status"?: 200, "content_type"?: "..."}  as is
    "delay": SECONDS                         wait before answering
    "chunk_bytes": N                         N bytes per write (else
                                             one event per write)

With --require-key KEY a request that carries neither "Authorization:
Bearer KEY" nor "x-api-key: KEY" gets a 401 in its dialect's shape (and
takes nothing); GET .../models too. --log FILE gets one JSON line per
request: {"method", "path", "format", "authorization", "x_api_key",
"headers" (all of them, names lower-case), "body" (parsed, or the text),
"entry" (the index played, or null), "status"}, so a test can check what
the client sent and which entry answered it.
"""

import argparse
import json
import os
import sys
import threading
import time
import zlib

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import standin  # noqa: E402

FORMATS = ("chat", "responses", "messages")


class State:
    def __init__(self, entries, models, log_path, key):
        self.entries = entries
        self.used = [False] * len(entries)
        self.models = models
        self.log = standin.RequestLog(log_path)
        self.key = key
        self.lock = threading.Lock()
        self.serial = 0

    def take(self, request):
        """(index, entry) of the first entry not used up whose "when" the
        request meets, using it up unless it repeats; (None, None) when
        none fits."""
        with self.lock:
            for i, entry in enumerate(self.entries):
                if self.used[i] or not meets(entry.get("when"), request):
                    continue
                if not entry.get("repeat"):
                    self.used[i] = True
                return i, entry
            return None, None

    def next_id(self):
        with self.lock:
            self.serial += 1
            return self.serial


# ---- the request, whatever its dialect ----------------------------------

def strings(doc, out):
    """Every string in a JSON document, depth first."""
    if isinstance(doc, str):
        out.append(doc)
    elif isinstance(doc, dict):
        for v in doc.values():
            strings(v, out)
    elif isinstance(doc, list):
        for v in doc:
            strings(v, out)
    return out


class Request:
    """What the matching reads of a request: its dialect, body, the text of
    all its strings and of its last user message."""

    def __init__(self, kind, body):
        self.format = kind
        self.body = body
        self.text = "\n".join(strings(body, []))
        conv = body.get("messages") if kind != "responses" else \
            body.get("input")
        if isinstance(conv, str):  # a Responses input may be one string
            conv = [{"role": "user", "content": conv}]
        users = [m for m in conv if isinstance(m, dict) and
                 m.get("role") == "user"] if isinstance(conv, list) else []
        self.user_text = "\n".join(strings(users[-1], [])) if users else ""
        self.tools = bool(body.get("tools"))
        self.model = body.get("model") if isinstance(body.get("model"),
                                                     str) else ""
        self.stream = body.get("stream") is True


def as_list(v):
    return v if isinstance(v, list) else [v]


def meets(when, r):
    if not when:
        return True
    if "contains" in when and \
            not all(t in r.text for t in as_list(when["contains"])):
        return False
    if "not_contains" in when and \
            any(t in r.text for t in as_list(when["not_contains"])):
        return False
    if "user_contains" in when and \
            not all(t in r.user_text for t in as_list(when["user_contains"])):
        return False
    if "tools" in when and bool(when["tools"]) != r.tools:
        return False
    if "format" in when and when["format"] != r.format:
        return False
    if "model" in when and when["model"] not in r.model:
        return False
    if "stream" in when and bool(when["stream"]) != r.stream:
        return False
    return True


# ---- the answer, in no dialect ------------------------------------------

class Answer:
    """An entry's text, tool calls, finish and usage, normalised."""

    def __init__(self, entry, serial):
        msg = entry.get("message")
        if isinstance(msg, dict):  # chat_server.py's form
            self.text = msg.get("content") or ""
            calls = []
            for c in msg.get("tool_calls") or []:
                fn = c.get("function") or {}
                calls.append({"id": c.get("id"), "name": fn.get("name"),
                              "arguments": fn.get("arguments", {})})
        else:
            self.text = entry.get("text") or ""
            calls = entry.get("tool_calls") or []
        self.calls = []
        for n, c in enumerate(calls, 1):
            call = {"name": c["name"], "n": n, "id": c.get("id")}
            if "input" in c and "arguments" not in c:
                call["input"] = c["input"]
            else:
                args = c.get("arguments", {})
                if isinstance(args, str):
                    call["arguments_text"] = args or "{}"
                    try:
                        call["arguments"] = json.loads(args or "{}")
                    except ValueError:
                        call["arguments"] = {}
                else:
                    call["arguments"] = args
                    call["arguments_text"] = json.dumps(args)
            self.calls.append(call)
        self.finish = entry.get("finish_reason") or \
            ("tool_calls" if self.calls else "stop")
        usage = entry.get("usage") or {}
        self.prompt = int(usage.get("prompt_tokens", 0))
        self.completion = int(usage.get("completion_tokens", 0))
        self.cached = int(usage.get("cached_tokens", 0))
        self.serial = serial

    def call_id(self, call, prefix):
        return call["id"] or "%s%d_%d" % (prefix, self.serial, call["n"])

    def arguments_text(self, call):
        if "input" in call:
            return json.dumps({"input": call["input"]})
        return call["arguments_text"]

    def arguments_object(self, call):
        if "input" in call:
            return {"input": call["input"]}
        return call["arguments"]


def pieces(text, count, least):
    """text cut into about count pieces of at least `least` characters."""
    if not text:
        return []
    size = max(least, -(-len(text) // count))
    return [text[i:i + size] for i in range(0, len(text), size)]


def sse(events, named):
    """Server-Sent Events text: "event: TYPE" lines when named."""
    out = []
    for e in events:
        if named:
            out.append("event: %s\ndata: %s\n\n" % (e["type"], json.dumps(e)))
        else:
            out.append("data: %s\n\n" % json.dumps(e))
    return "".join(out)


# chat completions

def chat_usage(a):
    return {"prompt_tokens": a.prompt, "completion_tokens": a.completion,
            "total_tokens": a.prompt + a.completion,
            "prompt_tokens_details": {"cached_tokens": a.cached},
            "completion_tokens_details": {"reasoning_tokens": 0}}


def chat_calls(a):
    return [{"id": a.call_id(c, "call_"), "type": "function",
             "function": {"name": c["name"],
                          "arguments": a.arguments_text(c)}}
            for c in a.calls]


def chat_completion(a, model):
    message = {"role": "assistant", "content": a.text or None,
               "refusal": None}
    if a.calls:
        message["tool_calls"] = chat_calls(a)
    return {"id": "chatcmpl-%d" % a.serial, "object": "chat.completion",
            "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": a.finish}],
            "usage": chat_usage(a)}


def chat_stream(a, model, request):
    base = {"id": "chatcmpl-%d" % a.serial, "object": "chat.completion.chunk",
            "created": int(time.time()), "model": model}

    def chunk(delta, finish=None):
        c = dict(base)
        c["choices"] = [{"index": 0, "delta": delta, "logprobs": None,
                         "finish_reason": finish}]
        return c

    out = [chunk({"role": "assistant", "content": ""})]
    for piece in pieces(a.text, 8, 3):
        out.append(chunk({"content": piece}))
    for index, call in enumerate(chat_calls(a)):
        out.append(chunk({"tool_calls": [
            {"index": index, "id": call["id"], "type": "function",
             "function": {"name": call["function"]["name"],
                          "arguments": ""}}]}))
        for frag in pieces(call["function"]["arguments"], 5, 2):
            out.append(chunk({"tool_calls": [
                {"index": index, "function": {"arguments": frag}}]}))
    out.append(chunk({}, a.finish))
    options = request.get("stream_options") or {}
    if isinstance(options, dict) and options.get("include_usage") is True:
        last = dict(base)
        last["choices"] = []
        last["usage"] = chat_usage(a)
        out.append(last)
    return sse(out, False) + "data: [DONE]\n\n"


# responses

def responses_usage(a):
    return {"input_tokens": a.prompt,
            "input_tokens_details": {"cached_tokens": a.cached},
            "output_tokens": a.completion,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": a.prompt + a.completion}


def responses_items(a):
    """The output items, complete."""
    items = []
    if a.text:
        items.append({"type": "message", "id": "msg_%d" % a.serial,
                      "status": "completed", "role": "assistant",
                      "content": [{"type": "output_text", "text": a.text,
                                   "annotations": [], "logprobs": []}]})
    for c in a.calls:
        if "input" in c:
            items.append({"type": "custom_tool_call",
                          "id": "ctc_%d_%d" % (a.serial, c["n"]),
                          "status": "completed",
                          "call_id": a.call_id(c, "call_"),
                          "name": c["name"], "input": c["input"]})
        else:
            items.append({"type": "function_call",
                          "id": "fc_%d_%d" % (a.serial, c["n"]),
                          "status": "completed",
                          "call_id": a.call_id(c, "call_"),
                          "name": c["name"],
                          "arguments": c["arguments_text"]})
    return items


def response_object(a, request, status, output, usage):
    incomplete = a.finish == "length" and status == "completed"
    return {"id": "resp_%d" % a.serial, "object": "response",
            "created_at": int(time.time()),
            "status": "incomplete" if incomplete else status,
            "incomplete_details": {"reason": "max_output_tokens"}
            if incomplete else None,
            "error": None, "model": request.get("model", ""),
            "output": output, "parallel_tool_calls": True,
            "previous_response_id": request.get("previous_response_id"),
            "tool_choice": request.get("tool_choice", "auto"),
            "tools": request.get("tools") or [],
            "usage": usage}


def responses_stream(a, request):
    events = []

    def ev(kind, **fields):
        e = {"type": kind, "sequence_number": len(events)}
        e.update(fields)
        events.append(e)

    ev("response.created",
       response=response_object(a, request, "in_progress", [], None))
    ev("response.in_progress",
       response=response_object(a, request, "in_progress", [], None))
    for index, item in enumerate(responses_items(a)):
        kind = item["type"]
        if kind == "message":
            start = dict(item, status="in_progress", content=[])
            ev("response.output_item.added", output_index=index, item=start)
            part = {"type": "output_text", "text": "", "annotations": [],
                    "logprobs": []}
            ev("response.content_part.added", item_id=item["id"],
               output_index=index, content_index=0, part=part)
            for piece in pieces(a.text, 8, 3):
                ev("response.output_text.delta", item_id=item["id"],
                   output_index=index, content_index=0, delta=piece,
                   logprobs=[])
            ev("response.output_text.done", item_id=item["id"],
               output_index=index, content_index=0, text=a.text,
               logprobs=[])
            ev("response.content_part.done", item_id=item["id"],
               output_index=index, content_index=0,
               part=item["content"][0])
        elif kind == "function_call":
            start = dict(item, status="in_progress", arguments="")
            ev("response.output_item.added", output_index=index, item=start)
            for frag in pieces(item["arguments"], 5, 2):
                ev("response.function_call_arguments.delta",
                   item_id=item["id"], output_index=index, delta=frag)
            ev("response.function_call_arguments.done", item_id=item["id"],
               output_index=index, arguments=item["arguments"])
        else:  # custom_tool_call
            start = dict(item, status="in_progress", input="")
            ev("response.output_item.added", output_index=index, item=start)
            for frag in pieces(item["input"], 5, 2):
                ev("response.custom_tool_call_input.delta",
                   item_id=item["id"], output_index=index, delta=frag)
            ev("response.custom_tool_call_input.done", item_id=item["id"],
               output_index=index, input=item["input"])
        ev("response.output_item.done", output_index=index, item=item)
    done = response_object(a, request, "completed", responses_items(a),
                           responses_usage(a))
    ev("response.incomplete" if done["status"] == "incomplete"
       else "response.completed", response=done)
    return sse(events, True)


# anthropic messages

STOP_REASONS = {"stop": "end_turn", "tool_calls": "tool_use",
                "length": "max_tokens"}


def messages_blocks(a):
    blocks = []
    if a.text:
        blocks.append({"type": "text", "text": a.text})
    for c in a.calls:
        blocks.append({"type": "tool_use", "id": a.call_id(c, "toolu_"),
                       "name": c["name"], "input": a.arguments_object(c)})
    return blocks


def messages_usage(a, output_tokens):
    return {"input_tokens": max(0, a.prompt - a.cached),
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": a.cached,
            "output_tokens": output_tokens}


def message_object(a, model, content, stop, output_tokens):
    return {"id": "msg_%d" % a.serial, "type": "message",
            "role": "assistant", "model": model, "content": content,
            "stop_reason": stop, "stop_sequence": None,
            "usage": messages_usage(a, output_tokens)}


def messages_stream(a, model):
    events = [{"type": "message_start",
               "message": message_object(a, model, [], None,
                                         min(1, a.completion))},
              {"type": "ping"}]
    for index, block in enumerate(messages_blocks(a)):
        if block["type"] == "text":
            events.append({"type": "content_block_start", "index": index,
                           "content_block": {"type": "text", "text": ""}})
            for piece in pieces(block["text"], 8, 3):
                events.append({"type": "content_block_delta", "index": index,
                               "delta": {"type": "text_delta",
                                         "text": piece}})
        else:
            events.append({"type": "content_block_start", "index": index,
                           "content_block": dict(block, input={})})
            frags = [""] + pieces(json.dumps(block["input"]), 5, 2)
            for frag in frags:
                events.append({"type": "content_block_delta", "index": index,
                               "delta": {"type": "input_json_delta",
                                         "partial_json": frag}})
        events.append({"type": "content_block_stop", "index": index})
    events.append({"type": "message_delta",
                   "delta": {"stop_reason": STOP_REASONS.get(a.finish,
                                                             a.finish),
                             "stop_sequence": None},
                   "usage": {"output_tokens": a.completion}})
    events.append({"type": "message_stop"})
    return sse(events, True)


# errors, per dialect

ANTHROPIC_ERRORS = {400: "invalid_request_error", 401: "authentication_error",
                    403: "permission_error", 404: "not_found_error",
                    413: "request_too_large", 429: "rate_limit_error",
                    500: "api_error", 529: "overloaded_error"}


def error_doc(kind, status, message, etype=None):
    if kind == "messages":
        etype = etype or ANTHROPIC_ERRORS.get(
            status, "api_error" if status >= 500 else "invalid_request_error")
        return {"type": "error", "error": {"type": etype, "message": message}}
    etype = etype or ("server_error" if status >= 500 else
                      "rate_limit_exceeded" if status == 429 else
                      "invalid_request_error")
    return {"error": {"message": message, "type": etype, "param": None,
                      "code": None}}


def estimate_tokens(body):
    return max(1, len("".join(strings(body, []))) // 4)


# ---- the handler --------------------------------------------------------

class Handler(standin.Handler):
    server_version = "model_server/1"
    json_type = "application/json"

    def route(self):
        """(kind, path) of the request: kind one of FORMATS, "count",
        "input_tokens", "models" or None."""
        path = self.path.split("?", 1)[0].rstrip("/")
        if self.command == "GET":
            if path.endswith("/models") or "/models/" in path:
                return "models", path
            return None, path
        for end, kind in (("/chat/completions", "chat"),
                          ("/responses/input_tokens", "input_tokens"),
                          ("/responses", "responses"),
                          ("/messages/count_tokens", "count"),
                          ("/messages", "messages")):
            if path.endswith(end):
                return kind, path
        return None, path

    def dialect(self, kind):
        """The error shape for a request of kind."""
        if kind in ("messages", "count"):
            return "messages"
        if kind is None and (self.headers.get("anthropic-version") or
                             self.headers.get("x-api-key")):
            return "messages"
        return "chat"

    def authorized(self, key):
        if key is None:
            return True
        return self.headers.get("Authorization") == "Bearer " + key or \
            self.headers.get("x-api-key") == key

    def read_request_body(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            raw = self.read_chunked()
        encoding = (self.headers.get("Content-Encoding") or "").lower()
        if encoding in ("gzip", "deflate") and raw:
            raw = zlib.decompress(raw, 47)  # 47: zlib or gzip header
        if not raw:
            return ""
        try:
            return json.loads(raw)
        except ValueError:
            return raw.decode("utf-8", "replace")

    def read_chunked(self):
        out = b""
        while True:
            size = int(self.rfile.readline().split(b";")[0].strip() or b"0",
                       16)
            if size == 0:
                while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return out
            out += self.rfile.read(size)
            self.rfile.readline()

    def record(self, kind, body, entry, status):
        self.server.state.log.write({
            "method": self.command, "path": self.path, "format": kind,
            "authorization": self.headers.get("Authorization"),
            "x_api_key": self.headers.get("x-api-key"),
            "headers": {k.lower(): v for k, v in self.headers.items()},
            "body": body, "entry": entry, "status": status})

    def send_stream(self, status, text, chunk_bytes):
        """text (SSE) with chunked transfer coding, chunk_bytes per write
        (0: one event per write)."""
        body = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if chunk_bytes:
            parts = [body[i:i + chunk_bytes]
                     for i in range(0, len(body), chunk_bytes)]
        else:
            parts = [p + b"\n\n" for p in body.split(b"\n\n") if p]
        for part in parts:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def fail(self, kind, status, message, etype=None, headers=None):
        self.send_json(status, error_doc(self.dialect(kind), status, message,
                                         etype), headers)

    def do_GET(self):
        state = self.server.state
        kind, path = self.route()
        body = self.read_request_body()
        if kind != "models":
            self.record(kind, body, None, 404)
            self.fail(kind, 404, "no such route: GET " + self.path,
                      "not_found_error" if self.dialect(kind) == "messages"
                      else "not_found")
            return
        if not self.authorized(state.key):
            self.record(kind, body, None, 401)
            self.fail(kind, 401, "Incorrect API key provided.")
            return
        models = [self.model_doc(m) for m in state.models]
        self.record(kind, body, None, 200)
        if "/models/" in path:
            want = path.split("/models/", 1)[1]
            found = [m for m in models if m["id"] == want]
            if not found:
                self.fail(kind, 404, "no such model: " + want)
                return
            self.send_json(200, found[0])
            return
        self.send_json(200, {"object": "list", "data": models,
                             "has_more": False,
                             "first_id": models[0]["id"] if models else None,
                             "last_id": models[-1]["id"] if models else None})

    @staticmethod
    def model_doc(name):
        """A model as both APIs list one (OpenAI's fields and
        Anthropic's)."""
        return {"id": name, "object": "model", "created": 1700000000,
                "owned_by": "model_server", "type": "model",
                "display_name": name, "created_at": "2024-01-01T00:00:00Z"}

    def do_POST(self):
        state = self.server.state
        kind, _ = self.route()
        body = self.read_request_body()
        if kind is None:
            self.record(kind, body, None, 404)
            self.fail(kind, 404, "no such route: POST " + self.path)
            return
        if not self.authorized(state.key):
            self.record(kind, body, None, 401)
            if self.dialect(kind) == "messages":
                self.fail(kind, 401, "invalid x-api-key")
            else:
                self.fail(kind, 401, "Incorrect API key provided.")
            return
        if not isinstance(body, dict):
            self.record(kind, body, None, 400)
            self.fail(kind, 400, "the body is not a JSON object")
            return
        if kind == "count":
            self.record(kind, body, None, 200)
            self.send_json(200, {"input_tokens": estimate_tokens(body)})
            return
        if kind == "input_tokens":
            self.record(kind, body, None, 200)
            self.send_json(200, {"object": "response.input_tokens",
                                 "input_tokens": estimate_tokens(body)})
            return
        index, entry = state.take(Request(kind, body))
        if entry is None:
            self.record(kind, body, None, 400)
            self.fail(kind, 400, "model_server: no recorded response fits "
                      "this request (the recording is used up)",
                      "recording_exhausted")
            return
        self.record(kind, body, index, entry.get("status", 200))
        if entry.get("delay"):
            time.sleep(float(entry["delay"]))
        self.answer(kind, entry, body, state.next_id())

    def answer(self, kind, entry, request, serial):
        stream = request.get("stream") is True
        model = request.get("model") or ""
        status = entry.get("status", 200)
        if entry.get("hang_up"):
            self.hang_up()
            return
        if "raw" in entry:
            data = entry["raw"].encode()
            ctype = entry.get("content_type") or \
                ("text/event-stream" if stream and status == 200
                 else "application/json")
            self.send_body(status, data, ctype)
            return
        if status != 200:
            headers = {}
            if "retry_after" in entry:
                after = entry["retry_after"]
                if float(after) == int(after):
                    after = int(after)
                headers["Retry-After"] = str(after)
            err = entry.get("error") or {}
            self.fail(kind, status,
                      err.get("message", "recorded HTTP %d" % status),
                      err.get("type"), headers)
            return
        a = Answer(entry, serial)
        chunk_bytes = entry.get("chunk_bytes", 0)
        if kind == "chat":
            if stream:
                self.send_stream(200, chat_stream(a, model, request),
                                 chunk_bytes)
            else:
                self.send_json(200, chat_completion(a, model))
        elif kind == "responses":
            if stream:
                self.send_stream(200, responses_stream(a, request),
                                 chunk_bytes)
            else:
                self.send_json(200, response_object(
                    a, request, "completed", responses_items(a),
                    responses_usage(a)))
        else:
            if stream:
                self.send_stream(200, messages_stream(a, model), chunk_bytes)
            else:
                self.send_json(200, message_object(
                    a, model, messages_blocks(a),
                    STOP_REASONS.get(a.finish, a.finish), a.completion))


def substitute(doc, names):
    """doc with every {{NAME}} in its strings replaced by names[NAME]."""
    if isinstance(doc, str):
        for name, value in names.items():
            doc = doc.replace("{{%s}}" % name, value)
        return doc
    if isinstance(doc, dict):
        return {k: substitute(v, names) for k, v in doc.items()}
    if isinstance(doc, list):
        return [substitute(v, names) for v in doc]
    return doc


def load(path, names):
    """The recording's entries and models, with the --var names put in,
    or exit saying what is wrong."""
    with open(path, encoding="utf-8") as f:
        doc = substitute(json.load(f), names)
    entries = doc.get("responses") if isinstance(doc, dict) else None
    if not isinstance(entries, list) or \
            not all(isinstance(e, dict) for e in entries):
        sys.exit("model_server: %s: \"responses\" must be a list of "
                 "objects" % path)
    for i, e in enumerate(entries):
        when = e.get("when")
        if when is not None and not isinstance(when, dict):
            sys.exit("model_server: %s: responses[%d].when: not an object"
                     % (path, i))
        if when and when.get("format") not in (None,) + FORMATS:
            sys.exit("model_server: %s: responses[%d].when.format: one of %s"
                     % (path, i, ", ".join(FORMATS)))
        for c in e.get("tool_calls") or []:
            if not isinstance(c, dict) or not c.get("name"):
                sys.exit("model_server: %s: responses[%d]: a tool call "
                         "without a name" % (path, i))
    models = doc.get("models") or ["stand-in"]
    return entries, models


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[2])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--recording", required=True)
    ap.add_argument("--log")
    ap.add_argument("--require-key")
    ap.add_argument("--var", action="append", default=[],
                    metavar="NAME=VALUE")
    args = ap.parse_args()
    names = {}
    for var in args.var:
        name, eq, value = var.partition("=")
        if not eq or not name:
            sys.exit("model_server: --var %s: NAME=VALUE expected" % var)
        names[name] = value
    entries, models = load(args.recording, names)
    standin.serve(args.port, Handler,
                  State(entries, models, args.log, args.require_key))


if __name__ == "__main__":
    main()
