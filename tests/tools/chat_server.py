#!/usr/bin/env python3
"""chat_server.py - a test stand-in for a paid model API.

A small local server that speaks the chat-completions protocol (streaming
and not) and serves recorded responses, so that the agent's "openai"
provider can be tested without a network, a key or a bill. Python 3
standard library only.

    chat_server.py --port 0 --recording FILE [--log FILE] [--require-key KEY]

It listens on 127.0.0.1 (--port 0: a free port, printed alone on the first
line of stdout once it listens) and answers POST {any base}/chat/completions.

The recording (the same format the "replay" provider plays, so that one
file drives both) is JSON:

    {"responses": [ENTRY, ...]}

and each request takes the next ENTRY, in order (the requests' contents do
not choose: a recording is a script). An ENTRY is

    {"message": {"role": "assistant", "content": "...",
                 "tool_calls": [{"id", "type": "function",
                                 "function": {"name", "arguments"}}]},
     "usage": {"prompt_tokens": N, "completion_tokens": N},
     "finish_reason": "stop"}          (optional: from the tool calls)

answered as the request asks: "stream": false -> one chat.completion object
with usage; "stream": true -> Server-Sent Events, "data: {chunk}" with
choices[0].delta pieces: the role first, the content cut into several
pieces, each tool call as OpenAI streams it (index, id, type and
function.name in its first delta, function.arguments in fragments after),
a last chunk with finish_reason, one with the usage when the request had
"stream_options": {"include_usage": true}, then "data: [DONE]". Options for
an ENTRY, to test a client's parser:

    "interleave_tool_calls": true   the fragments of parallel tool calls
                                    take turns instead of one call after
                                    the other
    "chunk_bytes": N                the body goes out N bytes per write
                                    (lines cut anywhere between reads)
    "delay": SECONDS                wait before answering

and faults:

    {"status": 429, "retry_after": 0.1}     Retry-After header (seconds)
    {"status": 500}                         {"error": {...}} body
    {"status": 400, "error": {"message": "...", "type": "..."}}
    {"hang_up": true}                       close without an answer (on
                                            a kept-alive connection
                                            libcurl resends at once,
                                            taking the next entry too)
    {"raw": "TEXT", "status"?: 200, "content_type"?: "..."}
                                            TEXT as the body, as is
                                            (malformed JSON or SSE)

A request when the recording is used up gets a 400 saying so. With
--require-key KEY a request whose Authorization is not "Bearer KEY" gets a
401 (and takes no entry). --log FILE gets one JSON line per request:
{"path", "authorization", "content_type", "body"} (the body parsed, or
the text when it is not JSON), so a test can check what the client sent.
"""

import argparse
import json
import os
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import standin  # noqa: E402


class State:
    def __init__(self, responses, log_path, key):
        self.responses = responses
        self.next = 0
        self.log = standin.RequestLog(log_path)
        self.key = key
        self.lock = threading.Lock()

    def take(self):
        """The recording's next response, None when it is used up (the
        responses are one list in order: no routes, no "repeat")."""
        with self.lock:
            if self.next >= len(self.responses):
                return None
            entry = self.responses[self.next]
            self.next += 1
            return entry


def pieces(text, count, least):
    """text cut into about count pieces of at least `least` characters."""
    if not text:
        return []
    size = max(least, -(-len(text) // count))
    return [text[i:i + size] for i in range(0, len(text), size)]


def finish_reason(entry):
    if entry.get("finish_reason"):
        return entry["finish_reason"]
    return "tool_calls" if entry["message"].get("tool_calls") else "stop"


def usage_of(entry):
    usage = dict(entry.get("usage") or {})
    usage.setdefault("prompt_tokens", 0)
    usage.setdefault("completion_tokens", 0)
    usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    return usage


def arguments_text(function):
    args = function.get("arguments", "")
    return args if isinstance(args, str) else json.dumps(args)


def completion(entry, model):
    message = dict(entry["message"])
    message.setdefault("role", "assistant")
    message.setdefault("content", None)
    return {
        "id": "chatcmpl-recorded",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": None,
                     "finish_reason": finish_reason(entry)}],
        "usage": usage_of(entry),
    }


def chunks(entry, model, include_usage):
    """The chat.completion.chunk objects of a streamed answer."""
    base = {"id": "chatcmpl-recorded", "object": "chat.completion.chunk",
            "created": int(time.time()), "model": model}

    def chunk(delta, finish=None):
        c = dict(base)
        c["choices"] = [{"index": 0, "delta": delta, "logprobs": None,
                         "finish_reason": finish}]
        return c

    message = entry["message"]
    out = [chunk({"role": "assistant", "content": ""})]
    for piece in pieces(message.get("content") or "", 8, 3):
        out.append(chunk({"content": piece}))
    # each call: a first delta with index, id, type, name; then the
    # arguments in fragments
    streams = []
    for index, call in enumerate(message.get("tool_calls") or []):
        fn = call.get("function", {})
        one = [{"index": index, "id": call.get("id"), "type": "function",
                "function": {"name": fn.get("name"), "arguments": ""}}]
        for frag in pieces(arguments_text(fn), 5, 2):
            one.append({"index": index, "function": {"arguments": frag}})
        streams.append(one)
    if entry.get("interleave_tool_calls"):
        while any(streams):
            for s in streams:
                if s:
                    out.append(chunk({"tool_calls": [s.pop(0)]}))
    else:
        for s in streams:
            for d in s:
                out.append(chunk({"tool_calls": [d]}))
    out.append(chunk({}, finish_reason(entry)))
    if include_usage:
        last = dict(base)
        last["choices"] = []
        last["usage"] = usage_of(entry)
        out.append(last)
    return out


class Handler(standin.Handler):
    server_version = "chat_server/1"
    json_type = "application/json"  # no charset

    def send_error_doc(self, status, message, kind, headers=None):
        self.send_json(status, {"error": {"message": message, "type": kind,
                                          "param": None, "code": None}},
                       headers)

    def send_chunked(self, status, content_type, body, chunk_bytes):
        """body (bytes) with chunked transfer coding, chunk_bytes per write
        (0: one write)."""
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        step = chunk_bytes or len(body) or 1
        for i in range(0, len(body), step):
            part = body[i:i + step]
            self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.flush()
            if chunk_bytes:
                time.sleep(0.0005)
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def do_GET(self):
        self.send_error_doc(404, "POST /chat/completions", "not_found")

    def do_POST(self):
        state = self.server.state
        body = self.read_body(empty="")
        state.log.write({"path": self.path,
                         "authorization": self.headers.get("Authorization"),
                         "content_type": self.headers.get("Content-Type"),
                         "accept": self.headers.get("Accept"),
                         "body": body})
        if not self.path.endswith("/chat/completions"):
            self.send_error_doc(404, "no such route: " + self.path,
                                "not_found")
            return
        if not self.authorized(state.key):
            self.send_error_doc(401, "Incorrect API key provided.",
                                "invalid_request_error")
            return
        if not isinstance(body, dict) or \
                not isinstance(body.get("messages"), list):
            self.send_error_doc(400, "the body is not a chat-completions "
                                "request", "invalid_request_error")
            return
        entry = state.take()
        if entry is None:
            self.send_error_doc(400, "chat_server: the recording has no "
                                "response left", "recording_exhausted")
            return
        if entry.get("delay"):
            time.sleep(float(entry["delay"]))
        self.answer(entry, body)

    def answer(self, entry, request):
        stream = request.get("stream") is True
        model = request.get("model", "")
        status = entry.get("status", 200)
        if entry.get("hang_up"):
            self.hang_up()
            return
        if "raw" in entry:
            data = entry["raw"].encode()
            kind = entry.get("content_type") or \
                ("text/event-stream" if stream and status == 200
                 else "application/json")
            self.send_chunked(status, kind, data, entry.get("chunk_bytes", 0))
            return
        if status != 200:
            headers = {}
            if "retry_after" in entry:
                after = entry["retry_after"]
                if float(after) == int(after):
                    after = int(after)
                headers["Retry-After"] = str(after)
            error = entry.get("error") or {
                "message": "recorded HTTP %d" % status,
                "type": "server_error" if status >= 500 else "rate_limit"
                if status == 429 else "invalid_request_error"}
            self.send_json(status, {"error": error}, headers)
            return
        if not stream:
            self.send_json(200, completion(entry, model))
            return
        options = request.get("stream_options") or {}
        include_usage = options.get("include_usage") is True
        text = "".join("data: %s\n\n" % json.dumps(c)
                       for c in chunks(entry, model, include_usage))
        text += "data: [DONE]\n\n"
        self.send_chunked(200, "text/event-stream", text.encode(),
                          entry.get("chunk_bytes", 0))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[2])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--recording", required=True)
    ap.add_argument("--log")
    ap.add_argument("--require-key")
    args = ap.parse_args()
    with open(args.recording, encoding="utf-8") as f:
        responses = json.load(f)["responses"]
    standin.serve(args.port, Handler,
                  State(responses, args.log, args.require_key))


if __name__ == "__main__":
    main()
