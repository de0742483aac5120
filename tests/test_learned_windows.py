"""Windows learned from the provider where it says them (vLLM's max_model_len on /models,
llama.cpp's n_ctx from /props) go to catalog.json and arm the guards; the local plugin declares
its n_ctx; a budget with no known window gets one Note saying the guard cannot check."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from orchestrator.models.addressing import ResolvedModel
from orchestrator.models.catalog import model_info, windows_of


class FakeEndpoint:
    """Just /v1/models (and /props): what vLLM and llama.cpp's server say about windows."""

    def __init__(self, models: list[dict], props: dict | None = None) -> None:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):  # noqa: N802
                path = self.path.rstrip("/")
                if path == "/v1/models":
                    body = {"object": "list", "data": owner.models}
                elif path == "/props" and owner.props is not None:
                    body = owner.props
                else:
                    self.send_response(404)
                    self.end_headers()
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.models, self.props = models, props
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self):
        self.httpd.shutdown()


@pytest.fixture
def endpoint():
    made = []

    def make(models, props=None):
        made.append(FakeEndpoint(models, props))
        return made[-1]

    yield make
    for e in made:
        e.close()


def test_vllm_max_model_len_and_llamacpp_n_ctx_are_read(endpoint):
    vllm = endpoint([{"id": "qwen", "max_model_len": 8192}, {"id": "other"}])
    assert windows_of(vllm.url, vllm.models, None) == {"qwen": 8192}
    llama = endpoint([{"id": "gemma.gguf"}], {"default_generation_settings": {"n_ctx": 4096}})
    assert windows_of(llama.url, llama.models, None) == {"gemma.gguf": 4096}
    bare = endpoint([{"id": "x"}])
    assert windows_of(bare.url, bare.models, None) == {}


def test_a_learned_window_arms_the_guard(orch, scripted_server, orch_home, endpoint):
    from click.testing import CliRunner

    from orchestrator.cli import cli

    lab = endpoint([{"id": "qwen", "max_model_len": 2048}])
    orch.provider("lab", base_url=lab.url)
    assert CliRunner().invoke(cli, ["models", "--refresh", "--json"]).exit_code == 0
    learned = json.loads((orch_home / "catalog.json").read_text())["models"]
    assert learned["lab/qwen"]["context_window"] == 2048
    model = ResolvedModel(name="lab/qwen", provider="lab", litellm_model="openai/qwen",
                          declared=True)
    assert model_info(model).context_window == 2048


def test_the_local_plugin_declares_its_n_ctx(orch):
    from orchestrator.models.resolve import resolve_all
    from orchestrator.runtime import config, plugin_manager

    orch.config(local={"n_ctx": 3072})
    model = resolve_all(["local/gemma3-270m"], config(), plugin_manager())[0]
    assert model.context_window == 3072
    assert model_info(model).context_window == 3072


def test_a_budget_with_no_known_window_says_the_guard_cannot_check(orch, scripted_server):
    orch.provider()  # declares no context_window, and the scripted /models says none
    run = orch.run_leg("m", "hi", options={"output_budget": 500})
    notes = [n for n in run.leg["notes"] if n.startswith("context guard:")]
    assert notes == ["context guard: the context window of scripted/m is unknown (no "
                     "catalogue, provider list or config says it), so requests cannot be "
                     "checked against it; set providers.scripted.context_window in config.json"]
    quiet = orch.run_leg("m", "hi")  # no budget asked for: nothing to say
    assert not [n for n in quiet.leg["notes"] if n.startswith("context guard:")]
