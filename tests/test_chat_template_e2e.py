"""The chat template the server applies, on the real SGLang 0.5.23 CPU server: started on the
tiny pair whose target's tokenizer carries a template, with another given by
`--chat-template FILE`, served a chat completion (rendered with that template by SGLang's
own TemplateManager) and a plain request. The scheduler records the source and hash as
server settings (`spectrace.setting.chat_template`, `..._hash`), the report's header shows
them, and the hash is the one `spectrace doctor` prints for the same file. vLLM's engine
does not hold its API server's --chat-template (tests/test_server_settings_real.py reads
the tokenizer's from vLLM's own config objects)."""
from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import urllib.request

import pytest

from spectrace.chat_template import read_template, short_hash
from tests.e2e import settle, sglang_totals
from tests.test_server_settings_real import TEMPLATE, models_with_template

pytestmark = pytest.mark.sglang


def chat(url: str, text: str) -> dict:
    body = {"model": "default", "messages": [{"role": "user", "content": text}],
            "max_tokens": 8, "temperature": 0}
    req = urllib.request.Request(url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as resp:
        return json.loads(resp.read())


def test_sglang_records_the_chat_template_it_applies(tiny_models, sglang_server, tmp_path):
    models = models_with_template(tiny_models("partial"), tmp_path / "m")
    served = tmp_path / "served.jinja"
    served.write_text(TEMPLATE.replace("<|im_end|>", "<|eot_id|>"))
    run = sglang_server(models, env={"SPECTRACE_METRIC_INTERVAL": "0.5"},
                        extra_args=["--chat-template", str(served)])
    answer = chat(run.server.url, "the quick brown fox")
    assert answer["choices"][0]["message"]["content"] is not None
    assert f"Loading chat template from argument: {served}" in run.server.log()
    verify, _, _ = sglang_totals([run.server.generate([3, 7, 11], 16)])
    proc = settle(run, verify)
    want = {"chat_template": "argument served.jinja", "chat_template_hash": short_hash(
        served.read_text())}
    assert {k: proc["settings"].get(k) for k in want} == want, proc["settings"]
    # not the tokenizer's (which the doctor reads from the target folder)
    assert read_template(os.path.join(models, "target")).hash != want["chat_template_hash"]
    resources = [json.load(open(p))["attributes"]
                 for p in glob.glob(os.path.join(run.data_dir, "*", "resource.json"))]
    assert resources and all(r["spectrace.setting.chat_template_hash"] ==
                             want["chat_template_hash"] for r in resources)
    text = subprocess.run([sys.executable, "-m", "spectrace.cli", "report", str(run.data_dir)],
                          capture_output=True, text=True, timeout=60).stdout
    header = next(line for line in text.splitlines() if line.startswith("server settings:"))
    assert (f"chat template argument served.jinja, chat template sha256 "
            f"{want['chat_template_hash']}") in header, header
