"""A local OpenAI-compatible chat-completions server for the AI assistant tests (docs/ai.md
"The openai_compatible provider"). Standard library only.

    with FakeLLM([fake_llm.reply("You can park on Rua Augusta.")]) as llm:
        agent = create_agent(..., provider="openai_compatible", base_url=llm.base_url, ...)
        ...
        req = llm.wait_for(1)[0]
        assert req.authorization == "Bearer sk-..."

It listens on 127.0.0.1:<free port> in a thread; an agent's `base_url` is `llm.base_url`
(`http://127.0.0.1:PORT/v1`), so carecrm calls `POST /v1/chat/completions`. Every request is
recorded (method, path, headers with Authorization, raw body, parsed JSON, arrival time).

What it answers comes from a plan, taken in order per request to /v1/chat/completions; the last
entry repeats forever. An entry is one of:

- `reply(content, usage=..., delay=...)`: 200 with a `chat.completion` object, or, when the
  request says `"stream": true`, Server-Sent Events (`Content-Type: text/event-stream`, chunked
  transfer encoding): a first chunk with `delta.role`, content chunks, a final chunk with
  `finish_reason`, a usage chunk (`"choices": []`), then `data: [DONE]`. `content` may be a
  callable taking the LLMRequest (an answer computed from the request).
- `status(code, retry_after=None)`: an OpenAI-style error body with that status (429, 500, 503
  ...), with a `Retry-After` header when given.
- `unauthorized(echo_key=True)`: 401 whose error message quotes the bearer key it got (as some
  providers do), to catch a key copied from a provider's error into carecrm's own output.
- `garbage(body)`: 200 `application/json` whose body is not JSON.
- `empty()`: a completion whose content is "".
- `slow(seconds, content)`: the reply after `seconds` (longer than carecrm's --ai-timeout).
- `close()`: read the request, then close the connection without a byte of response.
- `tool_calls((name, arguments), ...)`: an answer that calls functions (`content` null,
  `message.tool_calls`, finish_reason "tool_calls"), or, streamed, `delta.tool_calls` pieces
  by index: the first names the call, the next ones carry its arguments a few characters at a
  time, as OpenAI streams them.
- a callable taking the LLMRequest and returning one of the above.

Run `python3 fake_llm.py` for a self-test (a streamed and a whole answer over http.client).
"""
from __future__ import annotations

import http.client
import http.server
import json
import secrets
import socket
import threading
import time
from typing import Any, Callable

import crm

COMPLETIONS_PATH = "/v1/chat/completions"


# --------------------------------------------------------------------------------------------
# Plan entries


class Reply:
    """A successful completion. `stream`: None follows the request's "stream"; True/False
    forces SSE or a whole JSON answer. `usage`: a dict (total_tokens is added when missing),
    None for no usage at all, or "auto" (token counts from whitespace-separated words)."""

    def __init__(self, content: str | Callable[["LLMRequest"], str], *, usage: Any = "auto",
                 delay: float = 0.0, model: str | None = None, finish_reason: str = "stop",
                 stream: bool | None = None, usage_in_stream: bool = True,
                 chunk_chars: int = 7, split_events: bool = True):
        self.content = content
        self.usage = usage
        self.delay = delay
        self.model = model
        self.finish_reason = finish_reason
        self.stream = stream
        self.usage_in_stream = usage_in_stream
        self.chunk_chars = max(1, chunk_chars)
        self.split_events = split_events

    def __repr__(self) -> str:
        return f"Reply({self.content!r}, delay={self.delay})"


class Status:
    """An error status with an OpenAI-style error body (or `body` as given)."""

    def __init__(self, code: int, *, retry_after: float | int | None = None,
                 body: Any = None, headers: dict | None = None):
        self.code = code
        self.retry_after = retry_after
        self.body = body
        self.headers = dict(headers or {})

    def __repr__(self) -> str:
        return f"Status({self.code}, retry_after={self.retry_after})"


class Garbage:
    def __init__(self, body: bytes = b"<html><body>upstream said: not json {", *,
                 status: int = 200, content_type: str = "application/json"):
        self.body, self.status, self.content_type = body, status, content_type

    def __repr__(self) -> str:
        return f"Garbage({self.body[:40]!r})"


class Close:
    def __repr__(self) -> str:
        return "Close()"


class ToolCalls:
    """A completion that calls functions: `calls` is [(name, arguments)], arguments a dict
    (sent as its JSON text) or a string sent as it is. Ids are call_<random>."""

    def __init__(self, calls, *, stream: bool | None = None, chunk_chars: int = 5):
        self.calls = [(name, args if isinstance(args, str) else json.dumps(args))
                      for name, args in calls]
        self.ids = ["call_" + secrets.token_hex(6) for _ in self.calls]
        self.stream = stream
        self.chunk_chars = max(1, chunk_chars)

    def __repr__(self) -> str:
        return f"ToolCalls({self.calls!r})"


def tool_calls(*calls, **kw) -> ToolCalls:
    return ToolCalls(calls, **kw)


def reply(content, **kw) -> Reply:
    return Reply(content, **kw)


def status(code: int, retry_after=None, **kw) -> Status:
    return Status(code, retry_after=retry_after, **kw)


def unauthorized(echo_key: bool = True) -> Callable[["LLMRequest"], Status]:
    def answer(req: "LLMRequest") -> Status:
        got = (req.authorization or "").removeprefix("Bearer ").strip()
        shown = got if echo_key else "sk-****"
        return Status(401, body={"error": {
            "message": f"Incorrect API key provided: {shown}. You can find your API key at "
                       f"https://platform.example.test/account/api-keys.",
            "type": "invalid_request_error", "param": None, "code": "invalid_api_key"}})
    return answer


def garbage(body: bytes = b"<html><body>upstream said: not json {", **kw) -> Garbage:
    return Garbage(body, **kw)


def empty(**kw) -> Reply:
    return Reply("", **kw)


def slow(seconds: float, content: str = "This answer came too late.", **kw) -> Reply:
    return Reply(content, delay=seconds, **kw)


def close() -> Close:
    return Close()


_ERROR_TEXT = {
    400: ("invalid_request_error", "Bad request."),
    401: ("invalid_request_error", "Incorrect API key provided."),
    404: ("invalid_request_error", "The model does not exist."),
    429: ("requests", "Rate limit reached for requests. Please try again later."),
    500: ("server_error", "The server had an error while processing your request."),
    502: ("server_error", "Bad gateway."),
    503: ("server_error", "The engine is currently overloaded, please try again later."),
}


# --------------------------------------------------------------------------------------------
# Recorded requests


def content_text(content: Any) -> str:
    """The text of a message's content: a string, or the text parts of a content array."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


class LLMRequest:
    """One request the fake got: method, path, headers (case-insensitive `header()`), the raw
    body, `json` (None when not JSON), `at` (time.time()), and `answered` (the plan entry)."""

    def __init__(self, method: str, path: str, headers, body: bytes, at: float):
        self.method, self.path, self.headers, self.body, self.at = method, path, headers, body, at
        self.answered: Any = None
        try:
            self.json = json.loads(body) if body else None
        except ValueError:
            self.json = None

    def header(self, name: str) -> str | None:
        return self.headers.get(name)

    @property
    def authorization(self) -> str | None:
        return self.headers.get("Authorization")

    @property
    def model(self) -> Any:
        return self.json.get("model") if isinstance(self.json, dict) else None

    @property
    def stream(self) -> bool:
        return isinstance(self.json, dict) and self.json.get("stream") is True

    @property
    def messages(self) -> list[dict]:
        msgs = self.json.get("messages") if isinstance(self.json, dict) else None
        return msgs if isinstance(msgs, list) else []

    def texts(self, role: str) -> list[str]:
        return [content_text(m.get("content")) for m in self.messages
                if isinstance(m, dict) and m.get("role") == role]

    @property
    def tool_names(self) -> list[str]:
        """The names of the functions the request offers."""
        tools = self.json.get("tools") if isinstance(self.json, dict) else None
        return [t["function"]["name"] for t in tools or [] if isinstance(t, dict)]

    @property
    def tool_results(self) -> list[dict]:
        """The `tool` messages' contents (parsed JSON), in order."""
        out = []
        for m in self.messages:
            if isinstance(m, dict) and m.get("role") == "tool":
                try:
                    out.append(json.loads(m.get("content") or "null"))
                except ValueError:
                    out.append({"unreadable": m.get("content")})
        return out

    @property
    def system_prompt(self) -> str:
        """Every system message's text, joined."""
        return "\n".join(self.texts("system"))

    @property
    def last_user_message(self) -> str | None:
        users = self.texts("user")
        return users[-1] if users else None

    def describe(self) -> str:
        hdrs = {k: v for k, v in self.headers.items()}
        return f"{self.method} {self.path} {hdrs} {self.body[:3000]!r} -> {self.answered!r}"

    def __repr__(self) -> str:
        return f"<LLMRequest {self.describe()}>"


# --------------------------------------------------------------------------------------------
# The server


def _usage_of(entry: Reply, req: LLMRequest, content: str) -> dict | None:
    if entry.usage is None:
        return None
    if entry.usage == "auto":
        prompt = sum(len(content_text(m.get("content")).split()) for m in req.messages
                     if isinstance(m, dict)) or 1
        completion = len(content.split())
        return {"prompt_tokens": prompt, "completion_tokens": completion,
                "total_tokens": prompt + completion}
    usage = dict(entry.usage)
    usage.setdefault("total_tokens", usage.get("prompt_tokens", 0) +
                     usage.get("completion_tokens", 0))
    return usage


def sse_events(raw: bytes) -> list[str]:
    """The `data:` payloads of a text/event-stream body, in order (multi-line data joined)."""
    events, data = [], []
    for line in raw.decode("utf-8").replace("\r\n", "\n").split("\n"):
        if line == "":
            if data:
                events.append("\n".join(data))
                data = []
        elif line.startswith("data:"):
            data.append(line[5:].lstrip(" "))
    if data:
        events.append("\n".join(data))
    return events


class FakeLLM(crm.RecordingServer):
    """See the module docstring. Usable as a context manager; `stop()` wakes slow answers."""

    _what = "fake LLM"

    def __init__(self, plan=(), *, port: int = 0):
        self._cond = threading.Condition()
        self._requests: list[LLMRequest] = []
        self._plan = list(plan) or [Reply("OK")]
        self._served = 0
        self._stopping = threading.Event()
        self._stopped = False
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def _read_body(self) -> bytes:
                if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                    out = b""
                    while True:
                        size_line = self.rfile.readline()
                        if not size_line:
                            return out
                        size = int(size_line.split(b";")[0].strip() or b"0", 16)
                        if size == 0:
                            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                                pass
                            return out
                        out += self.rfile.read(size)
                        self.rfile.readline()
                length = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(length) if length > 0 else b""

            # -- writing

            def _send_whole(self, code: int, ctype: str, payload: bytes,
                            headers: dict | None = None) -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(payload)))
                for k, v in (headers or {}).items():
                    self.send_header(k, str(v))
                self.send_header("x-request-id", "req_" + secrets.token_hex(8))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(payload)
                self.wfile.flush()

            def _chunk(self, data: bytes) -> None:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

            def _send_stream(self, entry: Reply, req: LLMRequest, content: str) -> None:
                cid = "chatcmpl-" + secrets.token_hex(12)
                created = int(time.time())
                model = entry.model or req.model or "fake-model"

                def chunk(delta, finish=None, **extra):
                    obj = {"id": cid, "object": "chat.completion.chunk", "created": created,
                           "model": model, "system_fingerprint": "fp_fake",
                           "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                        "finish_reason": finish}]}
                    obj.update(extra)
                    return obj

                events = [chunk({"role": "assistant", "content": ""})]
                step = entry.chunk_chars
                for i in range(0, len(content), step):
                    events.append(chunk({"content": content[i:i + step]}))
                events.append(chunk({}, entry.finish_reason))
                usage = _usage_of(entry, req, content)
                if usage is not None and entry.usage_in_stream:
                    events.append({"id": cid, "object": "chat.completion.chunk",
                                   "created": created, "model": model,
                                   "system_fingerprint": "fp_fake", "choices": [],
                                   "usage": usage})
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Transfer-Encoding", "chunked")
                self.send_header("x-request-id", "req_" + secrets.token_hex(8))
                self.send_header("Connection", "close")
                self.end_headers()
                frames = [b"data: " + json.dumps(e, ensure_ascii=False).encode() + b"\n\n"
                          for e in events] + [b"data: [DONE]\n\n"]
                for frame in frames:
                    if entry.split_events and len(frame) > 8:
                        # A frame split over two writes, as TCP may deliver it.
                        half = len(frame) // 2
                        self._chunk(frame[:half])
                        time.sleep(0.002)
                        self._chunk(frame[half:])
                    else:
                        self._chunk(frame)
                    time.sleep(0.002)
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

            def _send_tool_calls(self, entry: ToolCalls, req: LLMRequest) -> None:
                cid = "chatcmpl-" + secrets.token_hex(12)
                model = req.model or "fake-model"
                wants_stream = req.stream if entry.stream is None else entry.stream
                calls = [{"id": i, "type": "function",
                          "function": {"name": name, "arguments": args}}
                         for i, (name, args) in zip(entry.ids, entry.calls)]
                if not wants_stream:
                    obj = {"id": cid, "object": "chat.completion", "created": int(time.time()),
                           "model": model,
                           "choices": [{"index": 0,
                                        "message": {"role": "assistant", "content": None,
                                                    "tool_calls": calls, "refusal": None},
                                        "logprobs": None, "finish_reason": "tool_calls"}],
                           "usage": {"prompt_tokens": 11, "completion_tokens": 5,
                                     "total_tokens": 16}}
                    self._send_whole(200, "application/json", json.dumps(obj).encode())
                    return

                def chunk(delta, finish=None):
                    return {"id": cid, "object": "chat.completion.chunk",
                            "created": int(time.time()), "model": model,
                            "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                         "finish_reason": finish}]}

                events = [chunk({"role": "assistant", "content": None})]
                for n, (call_id, (name, args)) in enumerate(zip(entry.ids, entry.calls)):
                    events.append(chunk({"tool_calls": [{
                        "index": n, "id": call_id, "type": "function",
                        "function": {"name": name, "arguments": ""}}]}))
                    for i in range(0, len(args), entry.chunk_chars):
                        events.append(chunk({"tool_calls": [{
                            "index": n,
                            "function": {"arguments": args[i:i + entry.chunk_chars]}}]}))
                events.append(chunk({}, "tool_calls"))
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.send_header("Connection", "close")
                self.end_headers()
                for e in events:
                    self._chunk(b"data: " + json.dumps(e).encode() + b"\n\n")
                self._chunk(b"data: [DONE]\n\n")
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

            def _answer(self, entry: Any, req: LLMRequest) -> None:
                if isinstance(entry, ToolCalls):
                    self._send_tool_calls(entry, req)
                    return
                if isinstance(entry, Close):
                    self.close_connection = True
                    try:
                        self.connection.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                    return
                if isinstance(entry, Garbage):
                    self._send_whole(entry.status, entry.content_type, entry.body)
                    return
                if isinstance(entry, Status):
                    body = entry.body
                    if body is None:
                        kind, text = _ERROR_TEXT.get(entry.code, ("server_error", "Error."))
                        body = {"error": {"message": text, "type": kind, "param": None,
                                          "code": None}}
                    payload = body if isinstance(body, bytes) else (
                        body.encode() if isinstance(body, str) else json.dumps(body).encode())
                    headers = dict(entry.headers)
                    if entry.retry_after is not None:
                        headers["Retry-After"] = entry.retry_after
                    self._send_whole(entry.code, "application/json", payload, headers)
                    return
                assert isinstance(entry, Reply), f"unknown plan entry {entry!r}"
                if entry.delay > 0 and fake._stopping.wait(timeout=entry.delay):
                    return  # stopped while "thinking"
                content = entry.content(req) if callable(entry.content) else entry.content
                wants_stream = req.stream if entry.stream is None else entry.stream
                if wants_stream:
                    self._send_stream(entry, req, content)
                    return
                obj = {"id": "chatcmpl-" + secrets.token_hex(12), "object": "chat.completion",
                       "created": int(time.time()),
                       "model": entry.model or req.model or "fake-model",
                       "system_fingerprint": "fp_fake",
                       "choices": [{"index": 0,
                                    "message": {"role": "assistant", "content": content,
                                                "refusal": None},
                                    "logprobs": None, "finish_reason": entry.finish_reason}]}
                usage = _usage_of(entry, req, content)
                if usage is not None:
                    obj["usage"] = usage
                self._send_whole(200, "application/json",
                                 json.dumps(obj, ensure_ascii=False).encode())

            def _handle(self):
                body = self._read_body()
                req = LLMRequest(self.command, self.path, self.headers, body, time.time())
                self.close_connection = True
                if self.command != "POST" or self.path.split("?")[0] != COMPLETIONS_PATH:
                    req.answered = Status(404)
                    fake._record(req)
                    try:
                        self._send_whole(404, "application/json", json.dumps({"error": {
                            "message": f"Unknown request URL: {self.command} {self.path}",
                            "type": "invalid_request_error", "param": None,
                            "code": "unknown_url"}}).encode())
                    except (BrokenPipeError, ConnectionResetError):
                        pass
                    return
                entry = fake._take_entry()
                while callable(entry) and not isinstance(
                        entry, (Reply, Status, Garbage, Close, ToolCalls)):
                    entry = entry(req)
                req.answered = entry
                fake._record(req)
                try:
                    self._answer(entry, req)
                except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
                    pass  # the client gave up (its timeout): nothing more to do

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

        class _Server(http.server.ThreadingHTTPServer):
            daemon_threads = True
            allow_reuse_address = True

        self._server = _Server(("127.0.0.1", port), Handler)
        self.host, self.port = self._server.server_address[:2]
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    # -- plan

    def _take_entry(self):
        with self._cond:
            entry = self._plan[min(self._served, len(self._plan) - 1)]
            self._served += 1
            return entry

    def script(self, *entries) -> None:
        """A new plan, starting from its first entry with the next request."""
        with self._cond:
            self._plan = list(entries) or [Reply("OK")]
            self._served = 0

    def _record(self, req: LLMRequest) -> None:
        with self._cond:
            self._requests.append(req)
            self._cond.notify_all()

    # -- what arrived

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def requests(self) -> list[LLMRequest]:
        with self._cond:
            return list(self._requests)

    @property
    def completions(self) -> list[LLMRequest]:
        """The requests to POST /v1/chat/completions."""
        return [r for r in self.requests
                if r.method == "POST" and r.path.split("?")[0] == COMPLETIONS_PATH]



# --------------------------------------------------------------------------------------------
# Self-test: python3 fake_llm.py


def _post(port: int, body: dict, token: str = "sk-self-test", timeout: float = 5.0):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", "/v1/chat/completions", body=json.dumps(body).encode(),
                     headers={"Content-Type": "application/json",
                              "Authorization": f"Bearer {token}"})
        resp = conn.getresponse()
        return resp.status, resp.getheader("Content-Type"), resp.getheader("Retry-After"), \
            resp.read()
    finally:
        conn.close()


def _self_test() -> None:
    request = {"model": "m-1", "temperature": 0.2, "messages": [
        {"role": "system", "content": "Be brief.\n[1] Parking is free."},
        {"role": "user", "content": "Where can I park?"}]}
    answer = "Parking is free in the garage — level 2, Rua Augusta. Até já!"
    with FakeLLM([reply(answer, usage={"prompt_tokens": 17, "completion_tokens": 9})]) as llm:
        code, ctype, _, raw = _post(llm.port, dict(request, stream=False))
        assert code == 200 and ctype == "application/json", (code, ctype, raw)
        obj = json.loads(raw)
        assert obj["object"] == "chat.completion" and obj["model"] == "m-1", obj
        assert obj["choices"][0]["message"] == {"role": "assistant", "content": answer,
                                                "refusal": None}, obj
        assert obj["choices"][0]["finish_reason"] == "stop", obj
        assert obj["usage"] == {"prompt_tokens": 17, "completion_tokens": 9,
                                "total_tokens": 26}, obj

        code, ctype, _, raw = _post(llm.port, dict(request, stream=True))
        assert code == 200 and ctype == "text/event-stream", (code, ctype)
        events = sse_events(raw)  # http.client undid the chunked encoding
        assert events[-1] == "[DONE]", events
        chunks = [json.loads(e) for e in events[:-1]]
        assert all(c["object"] == "chat.completion.chunk" for c in chunks), chunks
        text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks
                       if c["choices"])
        assert text == answer, (text, answer)
        finals = [c for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
        assert len(finals) == 1 and finals[0]["choices"][0]["finish_reason"] == "stop", chunks
        assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] == 26, chunks

        reqs = llm.wait_for(2, 1)
        assert reqs[0].authorization == "Bearer sk-self-test", reqs[0].describe()
        assert reqs[0].json["stream"] is False and reqs[1].stream is True
        assert reqs[0].system_prompt.startswith("Be brief.")
        assert reqs[0].last_user_message == "Where can I park?"

        # A sequence: 429 with Retry-After, 500, then an answer computed from the request.
        llm.script(status(429, retry_after=1), status(500),
                   reply(lambda r: "echo: " + (r.last_user_message or "")), garbage(),
                   unauthorized(), close(), slow(0.2, "late"), empty())
        code, _, retry_after, _ = _post(llm.port, request)
        assert code == 429 and retry_after == "1", (code, retry_after)
        code, _, _, raw = _post(llm.port, request)
        assert code == 500 and json.loads(raw)["error"]["type"] == "server_error", raw
        code, _, _, raw = _post(llm.port, request)
        assert json.loads(raw)["choices"][0]["message"]["content"] == "echo: Where can I park?"
        code, _, _, raw = _post(llm.port, request)
        assert code == 200, code
        try:
            json.loads(raw)
            raise AssertionError("garbage parsed as JSON")
        except ValueError:
            pass
        code, _, _, raw = _post(llm.port, request, token="sk-secret-1")
        assert code == 401 and "sk-secret-1" in json.loads(raw)["error"]["message"], raw
        try:
            _post(llm.port, request)
            raise AssertionError("close() answered")
        except (http.client.RemoteDisconnected, ConnectionResetError):
            pass
        code, _, _, raw = _post(llm.port, request)
        assert json.loads(raw)["choices"][0]["message"]["content"] == "late"
        code, _, _, raw = _post(llm.port, request)
        assert json.loads(raw)["choices"][0]["message"]["content"] == "", raw
        # The last entry repeats.
        code, _, _, raw = _post(llm.port, dict(request, stream=True))
        events = sse_events(raw)
        assert events[-1] == "[DONE]" and "".join(
            json.loads(e)["choices"][0]["delta"].get("content", "")
            for e in events[:-1] if json.loads(e)["choices"]) == "", events
        assert len(llm.completions) == 11, len(llm.completions)

    # A slow answer does not keep stop() waiting.
    llm = FakeLLM([slow(30)])
    try:
        _post(llm.port, request, timeout=0.3)
    except (socket.timeout, TimeoutError):
        pass
    started = time.monotonic()
    llm.stop()
    assert time.monotonic() - started < 5
    print("fake_llm self-test: ok")


if __name__ == "__main__":
    _self_test()
