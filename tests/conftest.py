"""Every test runs offline, in a temporary ORCH_HOME (fixtures from orchestrator.testing)."""

import os

os.environ.update({
    "LITELLM_OFFLINE_MODE": "true",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_MODE": "PRODUCTION",
})

