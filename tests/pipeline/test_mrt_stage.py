"""`csem run` with an ``mrt:`` section: after training, a generator is fine-tuned with MRT + MLE (Eq. 12)
through the apply layer's ``train_mrt``, the pipeline's own student as the reward, on the training
sources; the stage writes a loadable transformers folder whose weights moved, its figures come from
``train_mrt``'s log, a re-run skips it, a killed one resumes from its Lightning checkpoint, changing only
its settings re-runs only it (from scratch) and the report, and bad settings give one-line errors.
Fast tier: the FAKE backend generates and judges, the tiny random encoder is the student, a tiny random
Llama (SmolLM2's tokenizer) is the generator."""

from __future__ import annotations

import csv
import json
import shutil

import pytest
import torch
import yaml
from typer.testing import CliRunner

from csem.cli import _load_commands, app
from csem.data.records import read_records
from csem.pipeline.config import load_pipeline
from csem.pipeline.runner import Pipeline

from test_compare_stage import _with
from test_pipeline import _pipeline_file

_load_commands()

STAGES_BEFORE = ("collect", "annotate", "train", "score", "meta_eval")
MRT = {"generator": "hf:gen", "max_steps": 2, "batch_size": 2, "num_samples": 2, "max_new_tokens": 4,
       "max_source_tokens": 24, "lr": 0.01, "options": {"threads": 1, "checkpoint_every": 1}}


def _weights(folder):
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def _variant(path, name, **sections):
    """A copy of the pipeline file beside it (so relative paths still resolve) with ``sections`` changed."""
    new = path.with_name(f"{name}.yaml")
    shutil.copy(path, new)
    return _with(new, **sections)


def _copy(p, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(p.run_dir, run)
    return run


def _state(run):
    return json.loads((run / "state.json").read_text())


@pytest.fixture(scope="module")
def tuned(fake_llm, tiny_encoder, tiny_generator_dir, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mrt_fake")
    shutil.copytree(tiny_generator_dir, tmp / "gen")  # hf:gen, relative to the pipeline file
    path = _with(_pipeline_file(tmp, (fake_llm, tiny_encoder)), mrt=MRT)
    p = Pipeline.from_file(path, tmp / "run", progress=False)
    p.run()
    return tmp, path, p


def test_mrt_stage_fine_tunes_the_generator_with_the_student_as_reward(tuned):
    from transformers import AutoModelForCausalLM

    from csem.apply.mrt import load_generator

    tmp, path, p = tuned
    rd = p.run_dir
    final = rd / "mrt" / "final"
    net = AutoModelForCausalLM.from_pretrained(final)  # a loadable transformers folder
    assert net.config.num_hidden_layers == 2
    load_generator(f"hf:{final}")  # and as the apply layer loads a generator URI
    base, tuned_w = _weights(tmp / "gen"), _weights(final)
    assert base.keys() == tuned_w.keys()
    moved = [k for k in base if not torch.equal(base[k], tuned_w[k])]
    assert moved, "the fine-tuned weights equal the base generator's"

    s = _state(rd)["mrt"]["summary"]
    rows = list(csv.DictReader(open(rd / "mrt" / "train_log.csv")))
    assert s["steps"] == 2 and s["logged_steps"] == 2 and [int(r["step"]) for r in rows] == [0, 1]
    # two logged steps: a quarter is one step, so first/last are rows 0 and 1 of train_mrt's log
    assert s["quarter"] == 1
    assert s["reward_first"] == pytest.approx(float(rows[0]["reward_mean"]))
    assert s["reward_last"] == pytest.approx(float(rows[1]["reward_mean"]))
    assert s["mle_first"] == pytest.approx(float(rows[0]["mle_loss"])) and s["mle_first"] > 0
    assert s["mle_last"] == pytest.approx(float(rows[1]["mle_loss"]))
    # the reward is the pipeline's own student (every head: the score stage's columns), on the training sources
    scored = read_records(rd / "scored.jsonl")
    student_cols = sorted(k for k in scored[0] if k.startswith("metric."))
    assert s["reward_columns"] == student_cols and s["metric"] == "student"
    train_docs = {r["doc_id"] for r in scored if r["split"] == "train"}
    assert s["sources"] == len(train_docs) == s["references"] >= 2  # the example sources all have references
    assert s["rewards_computed"] == len((rd / "mrt" / "rewards.jsonl").read_text().splitlines()) > 0
    assert s["resumed_from"] is None and s["folder"] == "mrt/final"
    assert s["settings"]["num_samples"] == 2 and s["settings"]["lam"] == 0.7 and s["settings"]["alpha"] == 5e-3
    cfg = json.loads((rd / "mrt" / "mrt_config.json").read_text())
    assert cfg["max_steps"] == 2 and cfg["lr"] == 0.01 and cfg["task"] == "summarize"

    report = (rd / "report.md").read_text()
    assert "## Generator fine-tuning (mrt stage)" in report
    assert f"mean reward of the samples {s['reward_first']:.3f} over the first 1 step(s), {s['reward_last']:.3f}" in report
    assert f"MLE loss {s['mle_first']:.3f} -> {s['mle_last']:.3f}" in report
    assert "for 2 steps" in report and "`mrt/final`" in report
    assert "Generator fine-tuning (mrt stage)" in (rd / "report.html").read_text()


def test_rerun_skips_the_mrt_stage_and_a_killed_one_resumes_from_its_checkpoint(tuned, tmp_path):
    tmp, path, p = tuned
    run = _copy(p, tmp_path)
    before = _state(run)
    Pipeline.from_file(path, run, progress=False).run()
    assert _state(run) == before, "nothing re-ran"

    # "a kill" after the last checkpoint, before the stage was recorded: the stage resumes from it
    state = _state(run)
    state.pop("mrt")
    (run / "state.json").write_text(json.dumps(state))
    shutil.rmtree(run / "mrt" / "final")
    first = _weights(p.run_dir / "mrt" / "final")
    Pipeline.from_file(path, run, progress=False).run()
    after = _state(run)
    for stage in STAGES_BEFORE:
        assert after[stage] == before[stage], f"{stage} re-ran"
    s = after["mrt"]["summary"]
    assert s["resumed_from"] == "mrt/lightning/last.ckpt" and s["steps"] == 2
    assert after["mrt"]["fingerprint"] == before["mrt"]["fingerprint"]
    assert [int(r["step"]) for r in csv.DictReader(open(run / "mrt" / "train_log.csv"))] == [0, 1]
    again = _weights(run / "mrt" / "final")
    assert all(torch.equal(first[k], again[k]) for k in first), "a resumed finished run trains no further"


def test_changed_mrt_settings_rerun_only_it_from_scratch_and_the_report(tuned, tmp_path):
    tmp, path, p = tuned
    run = _copy(p, tmp_path)
    before = _state(run)
    changed = _variant(path, "lam", mrt={"lam": 0.5, "max_steps": 3})
    Pipeline.from_file(changed, run, progress=False).run()
    after = _state(run)
    for stage in STAGES_BEFORE:
        assert after[stage] == before[stage], f"{stage} re-ran"
    assert after["mrt"]["fingerprint"] != before["mrt"]["fingerprint"]
    assert after["report"]["fingerprint"] != before["report"]["fingerprint"]
    s = after["mrt"]["summary"]
    assert s["resumed_from"] is None and s["steps"] == 3 and s["settings"]["lam"] == 0.5, "started over"
    rows = list(csv.DictReader(open(run / "mrt" / "train_log.csv")))
    assert [int(r["step"]) for r in rows] == [0, 1, 2]
    for r in rows:  # Eq. 12 with the new lambda
        assert float(r["loss"]) == pytest.approx(0.5 * float(r["mrt_loss"]) + 0.5 * float(r["mle_loss"]), rel=1e-4)
    assert not (run / "mrt" / "checkpoint-1").exists(), "the earlier run's checkpoints were cleared"
    assert "lambda 0.5" in (run / "report.md").read_text()


def test_no_mrt_section_no_stage_and_no_report_section(tuned, tmp_path):
    tmp, path, p = tuned
    run = _copy(p, tmp_path)
    cfg = yaml.safe_load(path.read_text())
    cfg.pop("mrt")
    plain = path.with_name("plain.yaml")
    plain.write_text(yaml.safe_dump(cfg))
    Pipeline.from_file(plain, run, progress=False).run()
    assert "mrt stage" not in (run / "report.md").read_text()


@pytest.mark.parametrize("mrt, message", [
    ({"max_steps": 0}, r"mrt\.max_steps: Input should be greater than or equal to 1"),
    ({"num_samples": 0}, r"mrt\.num_samples: Input should be greater than or equal to 1"),
    ({"batch_size": 0}, r"mrt\.batch_size: Input should be greater than or equal to 1"),
    ({"lam": 1.5}, r"mrt\.lam: Input should be less than or equal to 1"),
    ({"alpha": 0}, r"mrt\.alpha: Input should be greater than 0"),
    ({"lr": -1}, r"mrt\.lr: Input should be greater than 0"),
    ({"max_source_tokens": 2}, r"mrt\.max_source_tokens: Input should be greater than or equal to 8"),
    ({"metric": "chrf"}, r"mrt\.metric 'chrf': write student"),
    ({"metric": "student#"}, r"mrt\.metric 'student#': write student"),
    ({"sources": "test"}, r"mrt\.sources: Input should be 'train', 'train\+dev' or 'all'"),
    ({"steps": 3}, r"mrt\.steps: Extra inputs are not permitted"),
    ({"options": {"max_steps": 3}}, r"mrt\.options\.max_steps: set it as mrt\.max_steps"),
    ({"options": {"top_k": 0}}, r"mrt\.options\.top_k: Input should be greater than or equal to 1"),
    ({"options": {"colour": 1}}, r"mrt\.options\.colour: Extra inputs are not permitted"),
    ({"generator": None}, r"mrt\.generator: Input should be a valid string"),
])
def test_bad_mrt_settings_are_explained(tmp_path, mrt, message):
    path = _with(_pipeline_file(tmp_path), mrt={**MRT, **mrt})
    with pytest.raises(ValueError, match=message):
        load_pipeline(path)
    res = CliRunner().invoke(app, ["run", str(path), "--run-dir", str(tmp_path / "run")])
    assert res.exit_code == 2 and res.output.count("csem: error:") == 1, res.output
    assert "Traceback" not in res.output and "\n" not in res.output.strip()


def test_missing_generator_is_required(tmp_path):
    path = _with(_pipeline_file(tmp_path), mrt={"max_steps": 2})
    with pytest.raises(ValueError, match=r"mrt\.generator: Field required"):
        load_pipeline(path)


def test_unknown_generator_fails_before_any_stage(fake_llm, tiny_encoder, tmp_path):
    path = _with(_pipeline_file(tmp_path, (fake_llm, tiny_encoder)), mrt={**MRT, "generator": "hf:no-such-model"})
    res = CliRunner().invoke(app, ["run", str(path), "--run-dir", str(tmp_path / "run")])
    assert res.exit_code == 2 and res.output.count("csem: error:") == 1, res.output
    assert "csem: error: mrt.generator 'hf:no-such-model': no such file or folder" in res.output
    assert not (tmp_path / "run" / "state.json").exists(), "a stage ran"


def test_bad_mrt_input_fails_the_stage_with_one_line(tuned, tmp_path):
    tmp, path, p = tuned
    run = _copy(p, tmp_path)
    (tmp / "not-a-model").mkdir(exist_ok=True)
    for name, mrt, message in (
            ("fluency", {"metric": "student#fluency"},
             "mrt.metric 'student#fluency': the student has no head for ['fluency']; it has ['coherence']"),
            ("notmodel", {"generator": "hf:not-a-model"}, "mrt.generator 'hf:not-a-model': ")):
        res = CliRunner().invoke(app, ["run", str(_variant(path, name, mrt=mrt)), "--run-dir", str(run)])
        assert res.exit_code == 2 and f"csem: error: {message}" in res.output, res.output
        assert res.output.count("csem: error:") == 1 and "Traceback" not in res.output
    assert _state(run)["mrt"] == _state(p.run_dir)["mrt"], "a failed stage is not recorded"


def test_cli_run_prints_the_mrt_summary(tuned, tmp_path):
    tmp, path, p = tuned
    run = _copy(p, tmp_path)
    res = CliRunner().invoke(app, ["run", str(path), "--run-dir", str(run)])
    s = _state(run)["mrt"]["summary"]
    assert res.exit_code == 0, res.output
    out = " ".join(res.output.split())
    assert f"mrt: 2 steps; mean reward {s['reward_first']:.3f} (first quarter) -> {s['reward_last']:.3f} (last)" in out


@pytest.mark.slow
def test_mrt_stage_fine_tunes_the_packaged_smollm2(fake_llm, tiny_encoder, smollm2_path, tmp_path):
    """The real SmolLM2-135M-Instruct (fp32, CPU) as the generator: one step, its folder loads."""
    from transformers import AutoModelForCausalLM

    path = _with(_pipeline_file(tmp_path, (fake_llm, tiny_encoder)),
                 mrt={**MRT, "generator": "smollm2", "max_steps": 1, "lr": 1e-5, "options": {"threads": 2}})
    p = Pipeline.from_file(path, tmp_path / "run", progress=False)
    p.run()
    s = _state(p.run_dir)["mrt"]["summary"]
    assert s["steps"] == 1 and s["reward_first"] is not None and s["mle_first"] > 0
    assert AutoModelForCausalLM.from_pretrained(p.run_dir / "mrt" / "final").num_parameters() > 100_000_000
