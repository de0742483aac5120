"""Name the wave and the leg on every provider request, for a gateway's logs.

Off by default. With ``plugin_config.wire_tags.headers: true`` each request carries
``X-Orch-Wave: <wave_id>`` and ``X-Orch-Leg: <leg_id>`` (litellm's ``extra_headers``), so a
team's proxy can tie its own log lines to orch's runs. Headers a plugin or variant already set
are kept; these two are added beside them.
"""

from __future__ import annotations

from orchestrator.hookspecs import hookimpl

NAME = "wire_tags"
CONFIG_SCHEMA = {"type": "object", "properties": {"headers": {"type": "boolean"}}}


def enabled(leg) -> bool:
    value = leg.plugin_config(NAME).get("headers", False)
    if not isinstance(value, bool):
        from orchestrator.errors import OrchError

        raise OrchError(f"plugin_config.{NAME}.headers is {value!r}; set it to true or false "
                        "in config.json")
    return value


@hookimpl(trylast=True)
def leg_start(leg):
    enabled(leg)  # a bad setting ends the leg before anything is spent


@hookimpl(trylast=True)
def before_request(leg, request):
    if not enabled(leg):
        return None
    headers = dict(request.params.get("extra_headers") or {})
    headers.update({"X-Orch-Wave": leg.wave_id, "X-Orch-Leg": leg.leg_id})
    return request.evolve(params={**request.params, "extra_headers": headers})
