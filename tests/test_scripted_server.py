"""The scripted server, driven through litellm: the same road a real provider's answers take."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import urllib.request

import pytest

from orchestrator.testing.scripted_server import Reply, ScriptedServer, estimate_prompt_tokens

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning:pydantic.*")

MESSAGES = [{"role": "user", "content": "Say something."}]


@pytest.fixture(scope="module")
def litellm():
    import litellm

    litellm.suppress_debug_info = True
    return litellm


@pytest.fixture
def srv():
    with ScriptedServer() as server:
        yield server


def call(litellm, srv, model="m", timeout=10, **kwargs):
    kwargs.setdefault("messages", MESSAGES)
    return asyncio.run(litellm.acompletion(
        model=f"openai/{model}", api_base=srv.url, api_key="sk-test", timeout=timeout,
        max_retries=0, **kwargs))


def test_text_reply_and_usage(litellm, srv):
    srv.script("m", Reply(text="hello there", reasoning="thinking hard",
                          usage={"prompt_tokens": 120, "completion_tokens": 30,
                                 "cached_tokens": 100, "reasoning_tokens": 20}))
    response = call(litellm, srv)
    assert response.choices[0].message.content == "hello there"
    assert response.choices[0].message.reasoning_content == "thinking hard"
    assert response.choices[0].finish_reason == "stop"
    usage = response.usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (120, 30, 150)
    assert usage.prompt_tokens_details.cached_tokens == 100
    assert usage.completion_tokens_details.reasoning_tokens == 20

    (recorded,) = srv.requests_for("openai/m")
    assert recorded.model == "m" and recorded.status == 200
    assert recorded.body["messages"] == MESSAGES
    assert recorded.headers["authorization"] == "Bearer sk-test"
    assert recorded.t_end >= recorded.t_start


def test_default_usage_is_estimated_and_script_order(litellm, srv):
    srv.script("m", "first", Reply(text="x" * 40), lambda body, n: Reply(text=f"call {n}"))
    texts = [call(litellm, srv).choices[0].message.content for _ in range(4)]
    assert texts == ["first", "x" * 40, "call 2", "call 3"]
    assert call(litellm, srv, model="other").choices[0].message.content == "ok"
    assert srv.count("m") == 4 and srv.count() == 5

    srv.script("m", Reply(text="x" * 40))
    usage = call(litellm, srv).usage
    assert usage.completion_tokens == 10
    assert usage.prompt_tokens == estimate_prompt_tokens({"messages": MESSAGES})


def test_tool_calls_round_trip(litellm, srv):
    srv.script("m", Reply(text="", tool_calls=[
        {"name": "search", "arguments": {"q": "orch"}, "id": "call_a"},
        {"name": "read", "arguments": '{"path": "x"'},  # raw, even broken, JSON passes through
    ]), Reply(text="done"))
    tools = [{"type": "function", "function": {"name": "search", "parameters": {
        "type": "object", "properties": {"q": {"type": "string"}}}}}]
    response = call(litellm, srv, tools=tools)
    message = response.choices[0].message
    assert response.choices[0].finish_reason == "tool_calls"
    assert message.content is None
    first, second = message.tool_calls
    assert (first.id, first.type, first.function.name) == ("call_a", "function", "search")
    assert json.loads(first.function.arguments) == {"q": "orch"}
    assert second.function.arguments == '{"path": "x"' and second.id

    follow_up = [*MESSAGES, message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": "call_a", "content": "found"}]
    assert call(litellm, srv, tools=tools, messages=follow_up).choices[0].message.content == "done"
    sent = srv.requests_for("m")[1].body
    assert sent["tools"] == tools
    assert sent["messages"][1]["tool_calls"][0]["id"] == "call_a"
    assert sent["messages"][2] == {"role": "tool", "tool_call_id": "call_a", "content": "found"}


def test_server_error(litellm, srv):
    srv.script("m", Reply(status=500, error_message="boom"))
    with pytest.raises(litellm.InternalServerError, match="boom"):
        call(litellm, srv)


def test_rate_limit_with_retry_after(litellm, srv):
    srv.script("m", Reply(status=429, retry_after=7))
    with pytest.raises(litellm.RateLimitError) as info:
        call(litellm, srv)
    assert info.value.response.headers["retry-after"] == "7"


def test_insufficient_quota(litellm, srv):
    srv.script("m", Reply(status=429, error_code="insufficient_quota"))
    with pytest.raises(litellm.RateLimitError, match="quota"):
        call(litellm, srv)


def test_auth_and_bad_request(litellm, srv):
    srv.script("m", Reply(status=401), Reply(status=400, error_message="bad param"))
    with pytest.raises(litellm.AuthenticationError):
        call(litellm, srv)
    with pytest.raises(litellm.BadRequestError, match="bad param"):
        call(litellm, srv)


def test_context_window(litellm, srv):
    srv.window("m", 100)
    assert call(litellm, srv, max_tokens=50).choices[0].message.content == "ok"
    with pytest.raises(litellm.ContextWindowExceededError, match="maximum context length is 100"):
        call(litellm, srv, max_tokens=95)
    long = [{"role": "user", "content": "word " * 200}]
    with pytest.raises(litellm.ContextWindowExceededError):
        call(litellm, srv, messages=long)
    assert [r.status for r in srv.requests_for("m")] == [200, 400, 400]


def test_max_in_flight(litellm, srv):
    srv.script("m", Reply(latency=0.3))
    srv.max_in_flight(2, retry_after=3)

    async def one():
        try:
            await litellm.acompletion(model="openai/m", api_base=srv.url, api_key="sk-test",
                                      messages=MESSAGES, timeout=10, max_retries=0)
            return "ok"
        except litellm.RateLimitError as exc:
            assert exc.response.headers["retry-after"] == "3"
            return "limited"

    async def burst():
        return await asyncio.gather(*(one() for _ in range(5)))

    results = asyncio.run(burst())
    assert sorted(results) == ["limited"] * 3 + ["ok"] * 2
    assert srv.peak_in_flight >= 3


def test_concurrent_burst_is_not_dropped(litellm, srv):
    """64 legs at once: a small listen backlog would drop SYNs and stall some for 1 s+ (the
    span then passes 2 latencies). A latency of 1 s lets a loaded client (2 busy cores: 64
    calls took over 0.5 s to send) still have all 64 in flight at once."""
    latency = 1.0
    srv.script("m", Reply(latency=latency))
    call(litellm, srv)  # litellm's first call pays ~1 s of lazy set-up; keep it out of the timing

    async def burst():
        return await asyncio.gather(*(
            litellm.acompletion(model="openai/m", api_base=srv.url, api_key="sk-test",
                                messages=[{"role": "user", "content": f"q{i}"}],
                                timeout=10, max_retries=0)
            for i in range(64)))

    t0 = time.monotonic()
    responses = asyncio.run(burst())
    elapsed = time.monotonic() - t0
    assert len(responses) == 64 and all(r.choices[0].message.content == "ok" for r in responses)
    served = srv.requests_for("m")[1:]
    assert len(served) == 64 and srv.peak_in_flight == 64
    # Server side, the burst took one latency; client side litellm adds ~5 ms of CPU per call.
    span = max(r.t_end for r in served) - min(r.t_start for r in served)
    assert span < 2 * latency, span
    assert elapsed < 5, elapsed


def test_drop_is_a_connection_error(litellm, srv):
    srv.script("m", Reply(drop=True))
    # litellm 1.110 wraps openai's APIConnectionError as a synthetic 500 InternalServerError.
    with pytest.raises((litellm.APIConnectionError, litellm.InternalServerError),
                       match="Connection error"):
        call(litellm, srv)
    assert srv.requests_for("m")[0].status is None


def test_hang_times_out_and_stop_releases_it(litellm):
    srv = ScriptedServer().start()
    srv.script("m", Reply(hang=True))
    t0 = time.monotonic()
    with pytest.raises(litellm.Timeout):
        call(litellm, srv, timeout=0.5)
    assert time.monotonic() - t0 < 3
    t0 = time.monotonic()
    srv.stop()
    assert time.monotonic() - t0 < 1


def test_streaming_with_usage(litellm, srv):
    srv.script("m", Reply(text="streamed words arrive", usage={"prompt_tokens": 11,
                                                              "completion_tokens": 4}))

    async def stream():
        response = await litellm.acompletion(
            model="openai/m", api_base=srv.url, api_key="sk-test", messages=MESSAGES,
            timeout=10, max_retries=0, stream=True, stream_options={"include_usage": True})
        return [chunk async for chunk in response]

    chunks = asyncio.run(stream())
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "streamed words arrive"
    usage = [c.usage for c in chunks if getattr(c, "usage", None)]
    assert usage and (usage[-1].prompt_tokens, usage[-1].completion_tokens) == (11, 4)


def test_health_models_and_stop_is_idempotent():
    srv = ScriptedServer().start()
    srv.script("alpha", "a")
    srv.window("beta", 1000)
    base = srv.url.removesuffix("/v1")
    with urllib.request.urlopen(f"{base}/health", timeout=5) as resp:
        assert json.load(resp) == {"status": "ok"}
    with urllib.request.urlopen(f"{srv.url}/models", timeout=5) as resp:
        assert [m["id"] for m in json.load(resp)["data"]] == ["alpha", "beta"]
    assert srv.count() == 0 and len(srv.requests) == 2
    srv.stop()
    srv.stop()


def test_cli_prints_url_and_serves_script(tmp_path):
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"m": [{"text": "from file"}]}))
    proc = subprocess.Popen(
        [sys.executable, "-m", "orchestrator.testing.scripted_server", "--port", "0",
         "--latency-ms", "10", "--script", str(script)],
        stdout=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        req = urllib.request.Request(
            f"{url}/chat/completions", data=json.dumps({"model": "m", "messages": []}).encode(),
            headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=5) as resp:
            assert json.load(resp)["choices"][0]["message"]["content"] == "from file"
    finally:
        proc.terminate()
        assert proc.wait(timeout=5) == 0
