"""Rate limits read from headers and body: the providers' documented error bodies, table-driven.

Each fixture copies the shape a provider documents (the sources are cited per provider in
orchestrator/models/ratelimit.py); the values are illustrative. Every row is checked twice: by the
pure classifier, and end to end - the body served with its status by the scripted server,
through litellm, into the shared server's failure naming and the rate gate.
"""

from __future__ import annotations

import pytest

from orchestrator.models import gate as gate_mod
from orchestrator.models.ratelimit import OVERLOADED, QUOTA, RATE_LIMITED, classify, duration
from orchestrator.testing.scripted_server import Reply

NOW = 1_700_000_000.0

# OpenAI, https://platform.openai.com/docs/guides/error-codes (429 rows)
OPENAI_RATE = {"error": {
    "message": "Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): "
               "Limit 30000, Used 25000, Requested 8000. Please try again in 6.4s. Visit "
               "https://platform.openai.com/account/rate-limits to learn more.",
    "type": "tokens", "param": None, "code": "rate_limit_exceeded"}}
OPENAI_RATE_MS = {"error": {
    "message": "Rate limit reached for gpt-4o-mini in organization org-abc on requests per min "
               "(RPM): Limit 500, Used 500, Requested 1. Please try again in 120ms.",
    "type": "requests", "param": None, "code": "rate_limit_exceeded"}}
OPENAI_QUOTA = {"error": {
    "message": "You exceeded your current quota, please check your plan and billing details. "
               "For more information on this error, read the docs: "
               "https://platform.openai.com/docs/guides/error-codes/api-errors.",
    "type": "insufficient_quota", "param": None, "code": "insufficient_quota"}}
OPENAI_SPEND_CAP = {"error": {
    "message": "You exceeded your current quota, please check your plan and billing details.",
    "type": "insufficient_quota", "param": None, "code": "project_spend_limit_exceeded"}}
# Anthropic, https://docs.anthropic.com/en/api/errors and /en/api/rate-limits
ANTHROPIC_RATE = {"type": "error", "error": {
    "type": "rate_limit_error",
    "message": "This request would exceed the rate limit for your organization of 50,000 input "
               "tokens per minute. For details, refer to: "
               "https://docs.claude.com/en/api/rate-limits."},
    "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy"}
ANTHROPIC_OVERLOADED = {"type": "error", "error": {"type": "overloaded_error",
                                                   "message": "Overloaded"},
                        "request_id": "req_011CSHoEeqs5C35K2UUqR7Fz"}
ANTHROPIC_SPEND_CAP = {"type": "error", "error": {
    "type": "rate_limit_error",
    "message": "You have reached your specified API usage limits. You will regain access on "
               "2026-12-01 at 00:00 UTC.",
    "details": {"error_code": "enforced_spend_limit_reached"}}}
ANTHROPIC_CREDIT = {"type": "error", "error": {
    "type": "invalid_request_error",
    "message": "Your credit balance is too low to access the Anthropic API. Please go to Plans "
               "& Billing to upgrade or purchase credits."}}
# Gemini, https://ai.google.dev/gemini-api/docs/troubleshooting and /rate-limits
GEMINI_PER_MINUTE = [{"error": {
    "code": 429,
    "message": "You exceeded your current quota, please check your plan and billing details. "
               "For more information on this error, head to: "
               "https://ai.google.dev/gemini-api/docs/rate-limits.\n* Quota exceeded for "
               "metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, "
               "limit: 5, model: gemini-2.0-flash\nPlease retry in 1.5s.",
    "status": "RESOURCE_EXHAUSTED",
    "details": [
        {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{
            "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
            "quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
            "quotaDimensions": {"location": "global", "model": "gemini-2.0-flash"},
            "quotaValue": "5"}]},
        {"@type": "type.googleapis.com/google.rpc.Help", "links": [{
            "description": "Learn more about Gemini API quotas",
            "url": "https://ai.google.dev/gemini-api/docs/rate-limits"}]},
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1s"}]}}]
GEMINI_PER_DAY = [{"error": {
    "code": 429,
    "message": "You exceeded your current quota, please check your plan and billing details.\n"
               "* Quota exceeded for metric: generativelanguage.googleapis.com/"
               "generate_content_free_tier_requests, limit: 20, model: gemini-2.5-flash",
    "status": "RESOURCE_EXHAUSTED",
    "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo",
                 "retryDelay": "35640s"}]}}]
# Groq, https://console.groq.com/docs/errors and https://console.groq.com/docs/rate-limits
GROQ_RATE = {"error": {
    "message": "Rate limit reached for model `llama-3.3-70b-versatile` in organization "
               "`org_01abc` service tier `on_demand` on tokens per minute (TPM): Limit 12000, "
               "Used 11972, Requested 4351. Please try again in 1.289s. Visit "
               "https://console.groq.com/docs/rate-limits for more information.",
    "type": "tokens", "code": "rate_limit_exceeded"}}
GROQ_PER_DAY = {"error": {
    "message": "Rate limit reached for model `llama-3.3-70b-versatile` in organization "
               "`org_01abc` service tier `on_demand` on tokens per day (TPD): Limit 100000, "
               "Used 97050, Requested 3619. Please try again in 9m38.016s. Need more tokens? "
               "Upgrade to Dev Tier today at https://console.groq.com/settings/billing",
    "type": "tokens", "code": "rate_limit_exceeded"}}
# OpenRouter, https://openrouter.ai/docs/api-reference/errors and /api-reference/limits
OPENROUTER_RATE = {"error": {
    "code": 429, "message": "Rate limit exceeded: free-models-per-min.",
    "metadata": {"headers": {"X-RateLimit-Limit": "20", "X-RateLimit-Remaining": "0",
                             "X-RateLimit-Reset": str(int((NOW + 2) * 1000))}}}}
OPENROUTER_CREDITS = {"error": {
    "code": 402, "message": "Insufficient credits. Add more using "
                            "https://openrouter.ai/settings/credits",
    "metadata": {"limit_source": "openrouter_credits"}}}
# A LiteLLM proxy (docs/team.md): a deployment's rpm limit, as litellm 1.110.2's proxy sent it
# in tests/test_gateway.py (the wait is in ``llm_provider-retry-after``).
LITELLM_PROXY_RPM = {"error": {
    "message": "litellm.RateLimitError: Model rate limit exceeded. RPM limit=4, current "
               "usage=5\n\nLiteLLM: model group 'fast' failed with the error above. No "
               "fallback was attempted.",
    "type": "throttling_error", "param": None, "code": "429"}}

# (id, status, headers, body, reason, retry_after)
TABLE = [
    ("openai-rate", 429, {}, OPENAI_RATE, RATE_LIMITED, 6.4),
    ("openai-rate-ms", 429, {}, OPENAI_RATE_MS, RATE_LIMITED, 0.12),
    ("openai-rate-header", 429, {"retry-after": "2"}, OPENAI_RATE, RATE_LIMITED, 2.0),
    ("openai-quota", 429, {}, OPENAI_QUOTA, QUOTA, None),
    ("openai-spend-cap", 429, {}, OPENAI_SPEND_CAP, QUOTA, None),
    ("anthropic-rate", 429, {"retry-after": "3"}, ANTHROPIC_RATE, RATE_LIMITED, 3.0),
    ("anthropic-rate-no-header", 429, {}, ANTHROPIC_RATE, RATE_LIMITED, None),
    ("anthropic-overloaded", 529, {}, ANTHROPIC_OVERLOADED, OVERLOADED, None),
    ("anthropic-spend-cap", 429, {}, ANTHROPIC_SPEND_CAP, QUOTA, None),
    ("anthropic-credit", 400, {}, ANTHROPIC_CREDIT, QUOTA, None),
    ("gemini-per-minute", 429, {}, GEMINI_PER_MINUTE, RATE_LIMITED, 1.0),
    ("gemini-per-day", 429, {}, GEMINI_PER_DAY, RATE_LIMITED, 35640.0),
    ("groq-rate", 429, {"retry-after": "2"}, GROQ_RATE, RATE_LIMITED, 2.0),
    ("groq-rate-body-only", 429, {}, GROQ_RATE, RATE_LIMITED, 1.289),
    ("groq-per-day", 429, {}, GROQ_PER_DAY, RATE_LIMITED, 578.016),
    ("openrouter-rate", 429, {}, OPENROUTER_RATE, RATE_LIMITED, 2.0),
    ("openrouter-credits", 402, {}, OPENROUTER_CREDITS, QUOTA, None),
    ("litellm-proxy-rpm", 429, {"llm_provider-retry-after": "60"}, LITELLM_PROXY_RPM,
     RATE_LIMITED, 60.0),
    # generic gateways: a retry_after field in the body, retry-after-ms, an HTTP date
    ("body-retry_after", 429, {}, {"error": {"message": "Too many requests", "retry_after": 7}},
     RATE_LIMITED, 7.0),
    ("header-ms", 429, {"retry-after-ms": "1500"}, None, RATE_LIMITED, 1.5),
    ("header-http-date", 429, {"retry-after": "Tue, 14 Nov 2023 22:13:30 GMT"}, None,
     RATE_LIMITED, 10.0),
    ("words-try-again", 429, {}, {"error": {"message": "Slow down; try again in 20s"}},
     RATE_LIMITED, 20.0),
]


@pytest.mark.parametrize(("status", "headers", "body", "reason", "wait"),
                         [row[1:] for row in TABLE], ids=[row[0] for row in TABLE])
def test_the_classifier_reads_each_documented_body(status, headers, body, reason, wait):
    limit = classify(status, headers, body, now=NOW)
    assert limit is not None and limit.reason == reason
    if wait is None:
        assert limit.retry_after is None
    else:
        assert limit.retry_after == pytest.approx(wait, abs=1e-6)


@pytest.mark.parametrize(("text", "seconds"), [
    ("46s", 46.0), ("1.5s", 1.5), ("9m38.016s", 578.016), ("120ms", 0.12),
    ("10h17m5.5s", 37025.5), ("7", 7.0), ("soon", None), ("-3", None), ("5 parsecs", None)])
def test_durations(text, seconds):
    assert duration(text) == (None if seconds is None else pytest.approx(seconds))


def test_an_ordinary_failure_is_no_limit():
    assert classify(500, {}, {"error": {"message": "boom", "type": "server_error"}}) is None
    assert classify(400, {}, {"error": {"message": "bad"}}) is None
    assert classify(429, {}, "not json") == classify(429, {}, None)  # a bare 429: backoff


@pytest.fixture
def fresh_gates():
    gate_mod.reset()
    yield
    gate_mod.reset()


QUICK = [row for row in TABLE if row[4] in (RATE_LIMITED, OVERLOADED)
         and (row[5] is None or row[5] <= 6.5)]


@pytest.mark.parametrize("row", [r for r in QUICK if r[0] in (
    "gemini-per-minute", "groq-rate-body-only", "openrouter-rate", "anthropic-overloaded")],
    ids=lambda r: r[0])
def test_a_wait_in_the_body_is_honoured_end_to_end(orch, scripted_server, fresh_gates, row):
    import time

    _, status, headers, body, reason, wait = row
    reset_at = None
    if row[0] == "openrouter-rate":  # its reset is an absolute time: make it 1 s from now
        import copy

        body = copy.deepcopy(body)
        reset_at = int((time.time() + 1) * 1000)
        body["error"]["metadata"]["headers"]["X-RateLimit-Reset"] = str(reset_at)
        wait = None  # measured against the clock below, not against the first reply
    orch.provider()
    scripted_server.script("m", Reply(status=status, error_body=body, headers=headers),
                           Reply(text="done"))
    run = orch.run_leg("m")
    assert run.leg["status"] == "complete" and run.leg["answer"] == "done"
    first, second = scripted_server.requests_for("m")
    assert first.status == status and second.status == 200
    if wait is not None:  # the retry waited at least what the body asked for
        assert second.t_start - first.t_end >= wait * 0.9
    if reset_at is not None:  # the retry went out no earlier than the absolute reset
        wall_minus_monotonic = time.time() - time.monotonic()
        assert second.t_start + wall_minus_monotonic >= reset_at / 1000 - 0.05
    held = next(iter(run.doc["server"]["rate_gate"].values()))
    assert held["retries"] == 1


@pytest.mark.parametrize("row", [r for r in TABLE if r[4] == QUOTA], ids=lambda r: r[0])
def test_hard_exhaustion_is_not_retried_end_to_end(orch, scripted_server, fresh_gates, row):
    _, status, headers, body, _, _ = row
    orch.provider()
    scripted_server.script("m", Reply(status=status, error_body=body, headers=headers))
    run = orch.run_leg("m")
    assert scripted_server.count("m") == 1  # no retry
    assert run.leg["status"] == "error" and run.leg["reason"].startswith("quota: ")


def test_a_per_day_wait_is_not_waited_out(orch, scripted_server, fresh_gates):
    orch.provider()
    scripted_server.script("m", Reply(status=429, error_body=GEMINI_PER_DAY))
    run = orch.run_leg("m")
    assert scripted_server.count("m") == 1
    assert run.leg["reason"].startswith("rate_limited: ")
    assert "(the provider asked to wait 35640 s: over the 120 s orch waits)" in run.leg["reason"]
