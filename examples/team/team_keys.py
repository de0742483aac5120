"""Per-user keys for a LiteLLM proxy run without a database (proxy.yaml's ``custom_auth``).

Each user gets a key of their own, with the models it may use and its spend caps; the proxy
enforces them and refuses with ``key_model_access_denied`` or ``budget_exceeded``. The keys
live in the JSON file named by ``TEAM_KEYS_FILE`` (keep it mode 600), read again on every
change, so adding a user needs no restart::

    {"sk-alice-...": {"user_id": "alice"},
     "sk-bob-...": {"user_id": "bob", "models": ["deep"]},
     "sk-carol-...": {"user_id": "carol",
                      "model_max_budget": {"deep": {"budget_limit": 5.0, "time_period": "7d"}}}}

A team with a database uses the proxy's own virtual keys (``/key/generate`` with ``models``
and ``max_budget``) instead; orch is a client of either in the same way.
"""

from __future__ import annotations

import hmac
import json
import os

from fastapi import Request
from litellm.proxy._types import LitellmUserRoles, ProxyException, UserAPIKeyAuth

_cache: dict[str, object] = {"mtime": None, "keys": {}}


def _keys() -> dict[str, dict]:
    path = os.environ.get("TEAM_KEYS_FILE", "keys.json")
    mtime = os.stat(path).st_mtime_ns
    if _cache["mtime"] != mtime:
        with open(path, encoding="utf-8") as f:
            _cache["keys"], _cache["mtime"] = json.load(f), mtime
    return _cache["keys"]  # type: ignore[return-value]


async def user_api_key_auth(request: Request, api_key: str) -> UserAPIKeyAuth:
    master = os.environ.get("LITELLM_MASTER_KEY", "")
    if master and hmac.compare_digest(api_key.encode(), master.encode()):
        return UserAPIKeyAuth(api_key=api_key, user_role=LitellmUserRoles.PROXY_ADMIN)
    for key, grant in _keys().items():
        if hmac.compare_digest(api_key.encode(), key.encode()):
            return UserAPIKeyAuth(api_key=api_key, **grant)
    raise ProxyException(message="Authentication Error: unknown key", type="auth_error",
                         param="api_key", code=401)
