"""Provider replies are checked, not trusted: malformed answers are ``bad_response`` with no
traceback text, and every request that went on the wire counts in the leg's ``requests``."""

from __future__ import annotations

import pytest

from orchestrator.testing.scripted_server import Reply

MALFORMED = {
    "no choices": {"choices": []},
    "a null choice": {"choices": [None]},
    "a null message": {"id": "x", "object": "chat.completion",
                       "choices": [{"index": 0, "message": None, "finish_reason": "stop"}]},
    "no choices key": {"foo": 1},
    "a list": [],
    "garbage": "<html>502 from a proxy</html>",
}


@pytest.mark.parametrize("body", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_reply_is_bad_response_without_a_traceback(orch, scripted_server, body):
    scripted_server.script("bad", Reply(body=body))
    scripted_server.script("good", Reply(text="fine"))
    run = orch.run_wave(["bad", "good"])
    bad, good = run.legs
    assert good["status"] == "complete"
    assert bad["status"] == "error" and bad["reason"].startswith("bad_response: "), bad["reason"]
    assert "Traceback" not in bad["reason"] and "File \"" not in bad["reason"]
    assert bad["requests"] == 1 == scripted_server.count("bad")
    assert run.doc["exit_code"] == 2


def test_gate_retries_count_as_requests_sent(orch, scripted_server):
    """The issue's case: a leg the rate gate retried 6 times said requests=1 while the server
    got 7. Every request on the wire counts."""
    orch.provider()
    scripted_server.script("m", *[Reply(status=429, retry_after=0.01)] * 6, Reply(text="ok"))
    run = orch.run_leg("m")
    assert run.leg["status"] == "complete"
    assert scripted_server.count("m") == 7
    assert run.leg["requests"] == 7 == run.doc["server"]["requests"]
