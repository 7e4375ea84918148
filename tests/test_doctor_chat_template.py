"""The doctor's chat-template comparison: the template the draft was trained with, where
its folder records one (a tokenizer saved with it; speculators' verifier), against the
target's (`chat_template.jinja` before `tokenizer_config.json`, as transformers loads
them). On drafts the trainers' own code writes (harness/trainer_drafts.py, whose target
carries a Llama-3-style template in tokenizer_config.json): what each records, a mismatch
planted in the target's template, and matching pairs that get no finding."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from spectrace.chat_template import ChatTemplate, TemplateError, applied, read_template
from spectrace.doctor.judge.chat_templates import Trained, check_chat_template, differences

LLAMA = ("{%- set default_system_message = 'You are a helpful assistant.' %}\n"
         "{{- '<|start_header_id|>system<|end_header_id|>\\n\\n' + default_system_message }}\n"
         "{%- for m in messages %}{{- '<|start_header_id|>' + m['role'] + "
         "'<|end_header_id|>\\n\\n' + m['content'] + '<|eot_id|>' }}{%- endfor %}\n")
CHATML = ("{%- for m in messages %}{{- '<|im_start|>' + m['role'] + '\\n' + m['content'] + "
          "'<|im_end|>\\n' }}{%- endfor %}\n")


# -- the comparison itself (no files) ------------------------------------------------------
def test_differences_name_the_line_the_markers_and_the_system_prompt():
    d = differences(CHATML, LLAMA)
    assert d["first_line"] == 1
    assert d["trained_line"].startswith("{%- for m in messages %}")
    assert d["target_line"].startswith("{%- set default_system_message")
    assert d["markers_only_trained"] == ["<|im_end|>", "<|im_start|>"]
    assert d["markers_only_target"] == ["<|end_header_id|>", "<|eot_id|>",
                                        "<|start_header_id|>"]
    assert d["system_prompt_trained"] is None
    assert d["system_prompt_target"] == "You are a helpful assistant."
    # the same markers, another default system prompt: only the prompt and its line differ
    other = LLAMA.replace("a helpful assistant.", "a pirate.")
    d = differences(LLAMA, other)
    assert d["first_line"] == 1 and not d["markers_only_trained"] and \
        not d["markers_only_target"]
    assert (d["system_prompt_trained"], d["system_prompt_target"]) == (
        "You are a helpful assistant.", "You are a pirate.")


def test_states_of_the_check():
    llama, chatml = ChatTemplate(LLAMA, "a"), ChatTemplate(CHATML, "b")
    same = check_chat_template(Trained(ChatTemplate(LLAMA + "\n", "x"), "the draft's"), llama)
    assert same.findings == [] and same.facts["state"] == "same"
    (f,) = check_chat_template(Trained(chatml, "the draft's"), llama).findings
    assert (f.code, f.severity) == ("chat_template.mismatch", "warning")
    assert f.details["trained"]["sha256_12"] == chatml.hash != llama.hash
    assert "first difference at line 1" in f.message and "default system prompt: trained " \
        "(none), target 'You are a helpful assistant.'" in f.message
    assert "Fix: serve with the template the draft was trained with" in f.message
    unrecorded = check_chat_template(Trained(None, why="nothing here."), llama)
    assert unrecorded.findings == [] and unrecorded.facts["state"] == "not recorded"
    assert unrecorded.note.startswith("cannot be checked: nothing here. The target's: a (sha256 ")
    none = check_chat_template(Trained(chatml, "the draft's"), None)
    assert none.findings == [] and "start the server with --chat-template" in none.note


def test_reading_follows_transformers(tmp_path):
    """chat_template.jinja before tokenizer_config.json; a list of named templates ("default"
    unless another is named, as SGLang's --hf-chat-template-name); none; bad JSON."""
    d = tmp_path / "m"
    d.mkdir()
    assert read_template(d) is None
    (d / "tokenizer_config.json").write_text(json.dumps({"chat_template": [
        {"name": "default", "template": LLAMA}, {"name": "tool_use", "template": CHATML}]}))
    assert read_template(d).text == LLAMA
    t = read_template(d, "tool_use")
    assert t.text == CHATML and t.where == "tokenizer_config.json chat_template ['tool_use']"
    (d / "chat_template.jinja").write_text(CHATML)
    assert read_template(d) == ChatTemplate(CHATML, "chat_template.jinja")
    (d / "tokenizer_config.json").write_text("{")
    (d / "chat_template.jinja").unlink()
    with pytest.raises(TemplateError, match="tokenizer_config.json is not valid JSON"):
        read_template(d)


def test_the_template_a_server_applies(tmp_path):
    d = tmp_path / "m"
    d.mkdir()
    assert applied(None, str(d)) == {"chat_template": "none"}
    (d / "tokenizer_config.json").write_text(json.dumps({"chat_template": LLAMA}))
    assert applied(None, str(d)) == {"chat_template": "tokenizer",
                                     "chat_template_hash": ChatTemplate(LLAMA, "").hash}
    f = tmp_path / "chatml.jinja"
    f.write_text(CHATML)
    assert applied(str(f), str(d)) == {"chat_template": "argument chatml.jinja",
                                       "chat_template_hash": ChatTemplate(CHATML, "").hash}
    assert applied("chatml", str(d)) == {"chat_template": "argument chatml"}  # a name
    assert applied(None, "meta-llama/Llama-3.1-8B-Instruct") == {}  # not a folder here


# -- on checkpoints (torch writes the safetensors) -----------------------------------------------
@pytest.mark.torch
def test_doctor_on_a_planted_mismatch_and_a_matching_pair(tmp_path):
    """A draft folder that carries its training tokenizer's template against a target whose
    tokenizer_config.json has another (a warning, exit 0), the same template (nothing but
    the report's line), and the text and --json output."""
    from tests.test_doctor import cli
    from tests.test_doctor_formats import write
    draft, target = write(tmp_path, "specforge")
    (draft / "tokenizer_config.json").write_text(json.dumps({"chat_template": CHATML}))
    (target / "tokenizer_config.json").write_text(json.dumps({"chat_template": LLAMA}))
    r = cli(str(draft), "--target", str(target), "--runtime", "sglang==0.5.23", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    (f,) = [f for f in out["findings"] if f["code"] == "chat_template.mismatch"]
    assert f["severity"] == "warning" and f["details"]["markers_only_trained"] == [
        "<|im_end|>", "<|im_start|>"]
    assert out["chat_template"]["state"] == "differs"
    (target / "chat_template.jinja").write_text(CHATML + "\n")  # transformers reads it first
    text = cli(str(draft), "--target", str(target), "--runtime", "sglang==0.5.23").stdout
    assert "chat_template.mismatch" not in text
    assert ("  chat template: the draft folder's tokenizer_config.json chat_template is the "
            "target's chat_template.jinja (sha256 ") in text, text


@pytest.mark.torch
def test_a_recorded_verifier_whose_template_is_unreadable_is_said_not_fatal(tmp_path):
    """A speculators draft's verifier folder is no input of the run: a broken
    tokenizer_config.json there is named in the report's line, not unusable input."""
    from spectrace.doctor import check_checkpoint
    from tests.test_doctor_formats import write
    draft, target = write(tmp_path, "speculators")
    verifier = tmp_path / "verifier"
    verifier.mkdir()
    (verifier / "tokenizer_config.json").write_text("{")
    cfg = json.loads((draft / "config.json").read_text())
    cfg["speculators_config"]["verifier"]["name_or_path"] = str(verifier)
    (draft / "config.json").write_text(json.dumps(cfg))
    r = check_checkpoint(draft, target, "vllm==0.33.0")
    assert r.chat_template["state"] == "not recorded"
    assert "its template cannot be read (" in r.chat_template["note"]
    assert "tokenizer_config.json is not valid JSON" in r.chat_template["note"]


# -- on what the trainers' own code writes ---------------------------------------------------
SG = "sglang==0.5.23"


def template_findings(report) -> list:
    return [f for f in report.findings if f.code.startswith("chat_template")]


@pytest.mark.trainers
@pytest.mark.parametrize("name,says", [
    ("specforge", "its exporter (export_to_sglang) writes config.json and the weights only"),
    ("modelopt-1", "Model Optimizer's export (export_speculative_decoding) writes"),
    ("modelopt-2", "Model Optimizer's export (export_speculative_decoding) writes")])
def test_what_the_trainers_record(trainer_drafts, name, says):
    """SpecForge and Model Optimizer write nothing of the template next to the draft: the
    report says it cannot be checked and which template the target has (no finding)."""
    from spectrace.doctor import check_checkpoint
    r = check_checkpoint(trainer_drafts[name], trainer_drafts["target"], SG)
    assert template_findings(r) == []
    assert r.chat_template["state"] == "not recorded", r.chat_template
    assert says in r.chat_template["note"]
    assert r.chat_template["target"]["from"] == "tokenizer_config.json chat_template"


@pytest.mark.trainers
@pytest.mark.parametrize("name", ["speculators", "specforge-converted"])
def test_speculators_records_its_verifier(trainer_drafts, tmp_path, name):
    """speculators writes the verifier's path (here: the target folder; `speculators
    convert` its base_model) into speculators_config.verifier.name_or_path: its template is
    the training template. The same target: same, no finding; a target copy with another
    default system prompt planted in its tokenizer_config.json: chat_template.mismatch
    naming it."""
    from spectrace.doctor import check_checkpoint
    draft, target = trainer_drafts[name], trainer_drafts["target"]
    cfg = json.loads((draft / "config.json").read_text())
    assert cfg["speculators_config"]["verifier"]["name_or_path"] == str(target)
    r = check_checkpoint(draft, target, "vllm==0.33.0")
    assert template_findings(r) == [] and r.chat_template["state"] == "same"
    planted = tmp_path / "target"
    shutil.copytree(target, planted)
    tc = json.loads((planted / "tokenizer_config.json").read_text())
    tc["chat_template"] = tc["chat_template"].replace("a helpful assistant.", "a pirate.")
    (planted / "tokenizer_config.json").write_text(json.dumps(tc))
    (f,) = template_findings(check_checkpoint(draft, planted, "vllm==0.33.0"))
    assert (f.code, f.severity) == ("chat_template.mismatch", "warning")
    assert f.details["first_line"] == 2
    assert f.details["system_prompt_trained"] == "You are a helpful assistant."
    assert f.details["system_prompt_target"] == "You are a pirate."
    assert f"of the verifier it was trained for ({target})" in f.message


@pytest.mark.trainers
@pytest.mark.parametrize("name", ["specforge", "modelopt-1"])
def test_a_tokenizer_saved_with_the_draft_is_compared(trainer_drafts, tmp_path, name):
    """The training tokenizer saved next to the draft (as a training run writes it, here the
    target's own files copied in): the same template, no finding; a target whose template
    lost its default system prompt: the mismatch."""
    from spectrace.doctor import check_checkpoint
    draft, target = tmp_path / name, trainer_drafts["target"]
    shutil.copytree(trainer_drafts[name], draft)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(target / f, draft / f)
    r = check_checkpoint(draft, target, SG)
    assert template_findings(r) == [] and r.chat_template["state"] == "same"
    planted = tmp_path / "target"
    shutil.copytree(target, planted)
    tc = json.loads((planted / "tokenizer_config.json").read_text())
    tc["chat_template"] = tc["chat_template"].replace(
        "{%- set default_system_message = 'You are a helpful assistant.' %}\n", "")
    (planted / "tokenizer_config.json").write_text(json.dumps(tc))
    (f,) = template_findings(check_checkpoint(draft, planted, SG))
    assert f.severity == "warning" and f.details["system_prompt_target"] is None
    assert "the draft folder's tokenizer_config.json chat_template" in f.message


def write_specforge_01_state(draft: Path, target_model_path: str) -> None:
    """The `training_state.pt` SpecForge 0.1.x writes beside each saved draft
    (scripts/train_eagle3.py `save_checkpoints`: epoch, global_step, the argparse args, the
    optimizer's state). A stand-in: that code is a script's function, not importable from
    the installed SpecForge 0.2.0, so the same dict is written here with torch.save."""
    import argparse

    import torch
    ns = argparse.Namespace(target_model_path=target_model_path, chat_template="llama3",
                            max_length=2048, learning_rate=1e-4)
    torch.save({"epoch": 0, "global_step": 10, "args": ns,
                "optimizer_state_dict": {"state": {0: {"exp_avg": torch.zeros(4)}}}},
               draft / "training_state.pt")


@pytest.mark.trainers
def test_specforge_01_training_state_names_the_target_it_rendered_with(trainer_drafts,
                                                                        tmp_path):
    """SpecForge's export with SpecForge 0.1.x's training state beside it: the template of
    its `target_model_path` is the training template (the same target: no finding; a
    planted system prompt: the mismatch); a path that is no folder here: not recorded,
    the registry template named; a pickle the restricted loader refuses: not read."""
    import datetime

    import torch

    from spectrace.doctor import check_checkpoint
    target, draft = trainer_drafts["target"], tmp_path / "specforge"
    shutil.copytree(trainer_drafts["specforge"], draft)
    write_specforge_01_state(draft, str(target))
    r = check_checkpoint(draft, target, SG)
    assert template_findings(r) == [] and r.chat_template["state"] == "same", r.chat_template
    planted = tmp_path / "target"
    shutil.copytree(target, planted)
    tc = json.loads((planted / "tokenizer_config.json").read_text())
    tc["chat_template"] = tc["chat_template"].replace("a helpful assistant.", "a pirate.")
    (planted / "tokenizer_config.json").write_text(json.dumps(tc))
    (f,) = template_findings(check_checkpoint(draft, planted, SG))
    assert f.severity == "warning" and "--chat-template 'llama3'" in f.message
    assert f.details["system_prompt_target"] == "You are a pirate."
    write_specforge_01_state(draft, "meta-llama/Llama-3.1-8B-Instruct")
    r = check_checkpoint(draft, target, SG)
    assert r.chat_template["state"] == "not recorded" and "registry template" in \
        r.chat_template["note"] and "'llama3'" in r.chat_template["note"]
    torch.save({"args": datetime.datetime(2025, 1, 1)}, draft / "training_state.pt")
    r = check_checkpoint(draft, target, SG)
    assert r.chat_template["state"] == "not recorded"
    assert "restricted loader" in r.chat_template["note"], r.chat_template["note"]
