"""The environment variables a model's calls read, known without importing litellm.

A declared provider's key is its ``api_key_env``. A litellm provider's are litellm's own
names: :data:`LITELLM_KEYS` (what litellm reads for it), :data:`LITELLM_CHECK` (what its
``validate_environment`` requires: all of the names, or any one of them) and
:data:`LITELLM_PROVIDERS` (the providers litellm knows). tests/test_key_names.py holds all
three to litellm's own answers, so a litellm upgrade that changes them fails there, not at a
user's run. The variables are handed to litellm as call arguments (:data:`KWARGS`), never
through the process's environment: a run prepared in one process (a client) and run in
another (``orch serve``) sends exactly these. Standard library only (the daemon's client).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

# litellm provider -> every variable litellm reads for it (its keys and the settings its
# validate_environment asks for).
LITELLM_KEYS: dict[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",), "text-completion-openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",), "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    "mistral": ("MISTRAL_API_KEY",), "codestral": ("CODESTRAL_API_KEY",),
    "groq": ("GROQ_API_KEY",), "together_ai": ("TOGETHERAI_API_KEY", "TOGETHER_API_KEY",
                                               "TOGETHER_AI_TOKEN"),
    "openrouter": ("OPENROUTER_API_KEY", "OR_API_KEY"), "deepseek": ("DEEPSEEK_API_KEY",),
    "xai": ("XAI_API_KEY",), "cohere": ("COHERE_API_KEY",), "cohere_chat": ("COHERE_API_KEY",),
    "fireworks_ai": ("FIREWORKS_AI_API_KEY", "FIREWORKS_API_KEY", "FIREWORKSAI_API_KEY"),
    "perplexity": ("PERPLEXITYAI_API_KEY", "PERPLEXITY_API_KEY"),
    "cerebras": ("CEREBRAS_API_KEY",), "deepinfra": ("DEEPINFRA_API_KEY",),
    "azure": ("AZURE_API_KEY", "AZURE_OPENAI_API_KEY", "AZURE_AD_TOKEN", "AZURE_API_BASE",
              "AZURE_API_VERSION"),
    "azure_ai": ("AZURE_AI_API_KEY", "AZURE_API_KEY"),
    "huggingface": ("HUGGINGFACE_API_KEY", "HF_TOKEN"),
    "replicate": ("REPLICATE_API_KEY", "REPLICATE_API_TOKEN"),
    "bedrock": ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                "AWS_REGION_NAME"),
    "sagemaker": ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                  "AWS_REGION_NAME"),
    "vertex_ai": ("VERTEXAI_CREDENTIALS", "GOOGLE_APPLICATION_CREDENTIALS", "VERTEXAI_PROJECT",
                  "VERTEXAI_LOCATION"),
    "nvidia_nim": ("NVIDIA_NIM_API_KEY",),
    "cloudflare": ("CLOUDFLARE_API_KEY", "CLOUDFLARE_API_BASE"),
    "ai21": ("AI21_API_KEY",), "nlp_cloud": ("NLP_CLOUD_API_KEY",),
    "voyage": ("VOYAGE_API_KEY",), "sambanova": ("SAMBANOVA_API_KEY",),
    "moonshot": ("MOONSHOT_API_KEY",), "dashscope": ("DASHSCOPE_API_KEY",),
    "novita": ("NOVITA_API_KEY",), "hyperbolic": ("HYPERBOLIC_API_KEY",),
    "nebius": ("NEBIUS_API_KEY",), "featherless_ai": ("FEATHERLESS_AI_API_KEY",),
    "github": ("GITHUB_API_KEY",), "watsonx": ("WATSONX_APIKEY", "WATSONX_API_KEY",
                                               "WATSONX_TOKEN"),
}

# litellm provider -> what its validate_environment requires before a call: ("all", names)
# or ("any", names, what it names as missing). A provider not here requires nothing.
LITELLM_CHECK: dict[str, tuple] = {
    "openai": ("all", ("OPENAI_API_KEY",)), "anthropic": ("all", ("ANTHROPIC_API_KEY",)),
    "gemini": ("any", ("GOOGLE_API_KEY", "GEMINI_API_KEY"), ("GOOGLE_API_KEY",
                                                              "GEMINI_API_KEY")),
    "mistral": ("all", ("MISTRAL_API_KEY",)), "codestral": ("all", ("CODESTRAL_API_KEY",)),
    "groq": ("all", ("GROQ_API_KEY",)), "together_ai": ("all", ("TOGETHERAI_API_KEY",)),
    "openrouter": ("all", ("OPENROUTER_API_KEY",)), "deepseek": ("all", ("DEEPSEEK_API_KEY",)),
    "xai": ("all", ("XAI_API_KEY",)), "cohere": ("all", ("COHERE_API_KEY",)),
    "fireworks_ai": ("any", ("FIREWORKS_AI_API_KEY", "FIREWORKS_API_KEY",
                             "FIREWORKSAI_API_KEY"), ("FIREWORKS_AI_API_KEY",)),
    "perplexity": ("all", ("PERPLEXITYAI_API_KEY",)), "cerebras": ("all", ("CEREBRAS_API_KEY",)),
    "deepinfra": ("all", ("DEEPINFRA_API_KEY",)),
    "azure": ("all", ("AZURE_API_BASE", "AZURE_API_VERSION", "AZURE_API_KEY")),
    "huggingface": ("all", ("HUGGINGFACE_API_KEY",)),
    "replicate": ("all", ("REPLICATE_API_KEY",)),
    "bedrock": ("all", ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")),
    "sagemaker": ("all", ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")),
    "vertex_ai": ("all", ("VERTEXAI_PROJECT", "VERTEXAI_LOCATION")),
    "nvidia_nim": ("all", ("NVIDIA_NIM_API_KEY",)),
    "cloudflare": ("all", ("CLOUDFLARE_API_KEY", "CLOUDFLARE_API_BASE")),
    "ai21": ("all", ("AI21_API_KEY",)), "nlp_cloud": ("all", ("NLP_CLOUD_API_KEY",)),
    "voyage": ("all", ("VOYAGE_API_KEY",)), "moonshot": ("all", ("MOONSHOT_API_KEY",)),
    "dashscope": ("all", ("DASHSCOPE_API_KEY",)), "novita": ("all", ("NOVITA_API_KEY",)),
    "nebius": ("all", ("NEBIUS_API_KEY",)),
    "featherless_ai": ("all", ("FEATHERLESS_AI_API_KEY",)),
}

# a variable -> the litellm call argument that carries it (the first set one of a provider's
# LITELLM_KEYS wins an argument several could fill).
KWARGS: dict[str, str] = {
    "AWS_ACCESS_KEY_ID": "aws_access_key_id", "AWS_SECRET_ACCESS_KEY": "aws_secret_access_key",
    "AWS_SESSION_TOKEN": "aws_session_token", "AWS_REGION_NAME": "aws_region_name",
    "AZURE_API_BASE": "api_base", "AZURE_API_VERSION": "api_version",
    "AZURE_AD_TOKEN": "azure_ad_token", "CLOUDFLARE_API_BASE": "api_base",
    "VERTEXAI_CREDENTIALS": "vertex_credentials",
    "GOOGLE_APPLICATION_CREDENTIALS": "vertex_credentials",
    "VERTEXAI_PROJECT": "vertex_project", "VERTEXAI_LOCATION": "vertex_location",
}  # every other name of LITELLM_KEYS is the provider's key: ``api_key``

# every provider litellm knows (``litellm.provider_list``)
LITELLM_PROVIDERS: frozenset[str] = frozenset((
    "a2a", "a2a_agent", "abliteration", "ai21", "ai21_chat", "aiand", "aiml", "aiohttp_openai",
    "amazon_nova", "anthropic", "anthropic_text", "apertis", "assemblyai", "auto_router",
    "aws_polly", "aws_textract", "azure", "azure_ai", "azure_speech", "azure_text", "baseten",
    "bedrock", "bedrock_mantle", "bespoke", "bigmodel", "black_forest_labs", "bytez",
    "cerebras", "charity_engine", "chatgpt", "chutes", "clarifai", "clf_ai_gateway",
    "cloudflare", "codestral", "cognition", "cohere", "cohere_chat", "cometapi", "compactifai",
    "coralbricks", "cortecs", "cursor", "custom", "custom_openai", "darkbloom", "dashscope",
    "databricks", "databricks_agent", "datarobot", "deepgram", "deepinfra", "deepseek",
    "docker_model_runner", "dotprompt", "edenai", "elevenlabs", "empiriolabs", "empower",
    "eu_jev", "fal_ai", "featherless_ai", "fireworks_ai", "friendliai", "galadriel", "gdc",
    "gemini", "gigachat", "github", "github_copilot", "gradient_ai", "groq", "helicone",
    "heroku", "hosted_vllm", "hostinger_router", "huggingface", "humanloop", "hyperbolic",
    "inception", "inferenceapis", "infinity", "jina_ai", "kyma", "lambda_ai", "langflow",
    "langfuse", "langgraph", "laya", "lemonade", "libertai", "litellm_agent", "litellm_proxy",
    "llamafile", "lm_studio", "manus", "maritalk", "meta", "meta_llama",
    "microsoft_365_copilot", "milvus", "minimax", "mistral", "modelscope", "mongodb",
    "moonshot", "morph", "nace", "nadir", "nano-gpt", "nebius", "neosantara", "nlp_cloud",
    "novita", "nscale", "nvidia_nim", "nvidia_riva", "oci", "ollama", "ollama_chat",
    "oobabooga", "openai", "openai_like", "opencode_go", "openinfer", "openrouter",
    "opensearch", "ovhcloud", "parallel_ai", "parasail", "perplexity", "petals", "pg_vector",
    "pinstripes", "poe", "predibase", "prism", "publicai", "qwen_ai_platform", "qwencloud",
    "ragflow", "recraft", "reducto", "refuseless", "reka", "replicate", "runwayml",
    "s3_vectors", "sagemaker", "sagemaker_chat", "sagemaker_nova", "sail", "sambanova", "sap",
    "scaledown", "scaleway", "scx-ai", "snowflake", "soniox", "stability", "strands_decider",
    "streamlake", "synthetic", "tencent", "tensormesh", "text-completion-codestral",
    "text-completion-inception", "text-completion-openai", "together_ai", "topaz",
    "transcribe", "triton", "typesafe", "v0", "valkey", "vercel_ai_gateway", "vertex_ai",
    "vertex_ai_beta", "vllm", "volcengine", "voyage", "wally", "wandb", "watsonx",
    "watsonx_text", "xai", "xiaomi_mimo", "xinference", "zai", "zerogpu",
))


def model_names(model) -> tuple[str, ...]:
    """The variables calls to ``model`` (a ResolvedModel) read: a declared provider's
    ``api_key_env``, a litellm provider's names; none for a keyless endpoint."""
    if model.declared or model.api_base:
        return (model.api_key_env,) if model.api_key_env else ()
    return LITELLM_KEYS.get(model.provider, ())


def known_to_litellm(provider: str) -> bool:
    return provider in LITELLM_PROVIDERS


def tabled(provider: str) -> bool:
    """Whether orch knows what litellm reads for ``provider`` (else litellm reads variables
    of its own from the process's environment, which a daemon cannot hand it)."""
    return provider in LITELLM_KEYS


def missing(provider: str, environ: Mapping[str, str]) -> list[str]:
    """What litellm's validate_environment would say is missing for ``provider`` given
    ``environ`` (names only are read): [] when nothing is."""
    mode, names, *said = LITELLM_CHECK.get(provider, ("all", ()))
    unset = [n for n in names if not environ.get(n)]
    if mode == "any":
        return list(said[0]) if len(unset) == len(names) else []
    return list(names) if unset else []


def call_kwargs(provider: str, values: Mapping[str, str]) -> dict[str, str]:
    """litellm's call arguments for ``provider`` from the variables' ``values``."""
    out: dict[str, str] = {}
    for name in LITELLM_KEYS.get(provider, ()):
        value = values.get(name)
        if value:
            out.setdefault(KWARGS.get(name, "api_key"), value)
    return out


_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def valid_name(name: object) -> bool:
    """A name an environment variable can have (a plugin's declared key variable)."""
    return isinstance(name, str) and bool(_NAME.match(name)) and len(name) <= 200
