"""Issue 20, apply side: no weight, request or reused file turns into a silent success.

Rerank weights (NaN/inf, short or missing weights files), the TRL reward's arguments, MRT's reward
cache keyed by the student's content, a pipeline name that would leave ``runs/``, transformers
never asked to run a model folder's code, and the CLI help. Fast tier: score columns already in the
file, the tiny random encoder and generator.
"""

from __future__ import annotations

import json
import shutil

import pytest
from typer.testing import CliRunner

from csem.cli import _load_commands, app
from csem.data.records import write_records

_load_commands()


@pytest.fixture()
def nbest_file(nbest_test, tmp_path):
    path = tmp_path / "nbest.jsonl"
    write_records(nbest_test, path)
    return path


def _rerank(nbest_file, tmp_path, weights):
    return CliRunner().invoke(app, ["rerank", "--data", str(nbest_file), "--metric", "judge.quality,judge.fluency",
                                    "--out", str(tmp_path / "chosen.jsonl"), "--weights", weights])


@pytest.mark.parametrize("weights", ["nan,1", "1,inf", "judge.quality=nan", "-inf,1"])
def test_rerank_non_finite_weight_is_bad_input(nbest_file, tmp_path, weights):
    res = _rerank(nbest_file, tmp_path, weights)
    assert res.exit_code == 2, res.output
    assert "finite" in res.output and not (tmp_path / "chosen.jsonl").exists()


def test_rerank_weights_file_faults(nbest_file, tmp_path):
    ok = _rerank(nbest_file, tmp_path, "1,0")
    assert ok.exit_code == 0, ok.output
    missing = _rerank(nbest_file, tmp_path, str(tmp_path / "missing.json"))
    assert missing.exit_code == 2 and "no such weights file" in missing.output
    assert "could not convert" not in missing.output
    nan = tmp_path / "nan.json"
    nan.write_text('{"columns": ["judge.quality", "judge.fluency"], "weights": [NaN, 1.0]}')
    res = _rerank(nbest_file, tmp_path, str(nan))
    assert res.exit_code == 2 and "finite" in res.output and "nan.json" in res.output, res.output
    short = tmp_path / "short.json"  # tuned for one column, reranking two: the other would get weight 0
    short.write_text(json.dumps({"columns": ["judge.quality"], "weights": [1.0]}))
    res = _rerank(nbest_file, tmp_path, str(short))
    assert res.exit_code == 2 and "no weight for score column(s) ['judge.fluency']" in res.output, res.output
    uneven = tmp_path / "uneven.json"
    uneven.write_text(json.dumps({"columns": ["judge.quality", "judge.fluency"], "weights": [1.0]}))
    res = _rerank(nbest_file, tmp_path, str(uneven))
    assert res.exit_code == 2 and "1 weight(s) for 2 column(s)" in res.output, res.output
    extra = tmp_path / "extra.json"  # a column the metrics do not write
    extra.write_text(json.dumps({"columns": ["judge.quality", "judge.fluency", "metric.x"], "weights": [1, 1, 1]}))
    res = _rerank(nbest_file, tmp_path, str(extra))
    assert res.exit_code == 2 and "metric.x" in res.output, res.output


def test_weights_file_must_cover_every_column():
    """The check csem rerank and the pipeline's rerank stage run on a weights file."""
    from csem.apply.tune import check_weights_cover

    check_weights_cover("w.json", {"a": 1.0, "b": 0.0}, ["a", "b"])
    with pytest.raises(ValueError, match=r"w.json: no weight for score column\(s\) \['b'\]"):
        check_weights_cover("w.json", {"a": 1.0}, ["a", "b"])


def test_parse_weights_refuses_non_finite():
    from csem.apply.reranking import parse_weights

    with pytest.raises(ValueError, match="'b' has weight nan"):
        parse_weights({"a": 1, "b": float("nan")}, ["a", "b"])
    with pytest.raises(ValueError, match="finite"):
        parse_weights([float("inf")], ["a"])


# ----------------------------------------------------------------------------- the TRL reward

def test_trl_reward_argument_faults(multi_judge, nbest_test):
    from csem.apply.reward import trl_reward

    reward = trl_reward(multi_judge)
    src, cand = nbest_test[0]["source"], nbest_test[0]["candidate"]
    with pytest.raises(ValueError, match="2 prompts for 3 completions"):
        reward(prompts=[src, src], completions=[cand] * 3)
    with pytest.raises(ValueError, match="3 prompts for 1 completions"):
        reward(prompts=[src] * 3, completions=[cand])
    with pytest.raises(ValueError, match="1 source for 2 completions"):
        reward(prompts=[src, src], completions=[cand, cand], source=[src])
    with pytest.raises(ValueError, match="reads the source: pass prompts or a 'source' column"):
        reward(prompts=None, completions=[cand])
    assert len(reward(completions=[cand], source=[src])) == 1  # the source column alone is enough
    with pytest.raises(ValueError, match="finite"):
        trl_reward(multi_judge, weights=[float("nan"), 1.0])
    with pytest.raises(ValueError, match="finite"):
        trl_reward(multi_judge, weights={"quality": float("inf")})


def test_trl_reward_without_prompts_for_a_source_free_student(nbest_train, tiny_encoder, tmp_path, nbest_test):
    from csem.apply.reward import trl_reward
    from csem.model import ModelConfig, TrainConfig, fit

    fit(nbest_train[:16], "judge.fluency", "fluency", out_dir=tmp_path / "fl",
        config=ModelConfig(name="fl", encoder=str(tiny_encoder), max_length=24, hidden_sizes=[8],
                           overlap_features=False),
        train_config=TrainConfig(max_epochs=1, frozen_epochs=1, batch_size=16, seed=0), label_range=(1, 5))
    reward = trl_reward(tmp_path / "fl")
    got = reward(completions=[nbest_test[0]["candidate"], ""])
    assert len(got) == 2 and got[1] == reward.floor == 1.0


# ----------------------------------------------------------------------------- MRT's reward cache

def _retrain(nbest_train, tiny_encoder, out, seed):
    from csem.model import ModelConfig, TrainConfig, fit

    shutil.rmtree(out, ignore_errors=True)
    fit(nbest_train[:16], "judge.quality", "ref-free", out_dir=out,
        config=ModelConfig(name="same-name", encoder=str(tiny_encoder), max_length=24, hidden_sizes=[8]),
        train_config=TrainConfig(max_epochs=1, frozen_epochs=1, head_lr=1e-2, batch_size=8, seed=seed),
        label_range=(1, 5))


def test_mrt_reward_cache_is_keyed_by_the_students_content(nbest_train, tiny_encoder, tmp_path):
    """A resumed MRT run in a used folder must not reuse the rewards of an earlier student that was
    saved under the same name and path (the old key)."""
    from tiny_generator import tiny_generator

    from csem.apply.metrics import load_metric
    from csem.apply.mrt import MRTConfig, reward_identity, train_mrt

    student, run = tmp_path / "student", tmp_path / "run"
    sources = [{"id": f"s{i}", "source": f"Story {i}: the council met on Monday and voted to close the bridge.",
                "reference": f"Council {i} closes the bridge."} for i in range(2)]
    cfg = MRTConfig(max_steps=1, batch_size=2, num_samples=2, max_new_tokens=3, max_source_tokens=16,
                    checkpoint_every=100, threads=1, seed=0)
    _retrain(nbest_train, tiny_encoder, student, seed=0)
    first = load_metric(str(student))
    copy = tmp_path / "copy"
    shutil.copytree(student, copy)
    assert reward_identity(load_metric(str(copy))) == reward_identity(first)  # content, not path
    res = train_mrt(tiny_generator(), sources, first, run, cfg)
    assert res.reward_misses > 0
    shutil.rmtree(run / "lightning")  # "killed" before its first checkpoint: a resume starts over, keeps rewards
    res = train_mrt(tiny_generator(), sources, load_metric(str(student)), run, cfg)
    assert res.reward_hits > 0 and res.reward_misses == 0  # same student: its rewards are reused
    shutil.rmtree(run / "lightning")
    _retrain(nbest_train, tiny_encoder, student, seed=1)  # another student, same name and path
    second = load_metric(str(student))
    assert reward_identity(second) != reward_identity(first)
    res = train_mrt(tiny_generator(), sources, second, run, cfg)
    assert res.reward_hits == 0 and res.reward_misses > 0


# ----------------------------------------------------------------------------- pipeline name

@pytest.mark.parametrize("name", ["../../x", "a/b", "..", "/abs", "x\\y", ""])
def test_pipeline_name_cannot_leave_runs(name, tmp_path):
    import yaml

    from csem.pipeline.config import load_pipeline

    base = yaml.safe_load(open(_example()).read())
    base["name"] = name
    p = tmp_path / "p.yaml"
    p.write_text(yaml.safe_dump(base))
    with pytest.raises(ValueError, match="not a plain folder name"):
        load_pipeline(p)
    res = CliRunner().invoke(app, ["run", str(p)])
    assert res.exit_code == 2 and "name" in res.output and "not a plain folder name" in res.output
    assert res.output.count("\n") <= 2  # one line
    assert not (tmp_path / "x").exists()


def _example():
    from csem.pipeline.config import EXAMPLES_DIR

    return EXAMPLES_DIR / "summarization.yaml"


def test_pipeline_plain_names_still_load(tmp_path):
    import yaml

    from csem.pipeline.config import load_pipeline

    base = yaml.safe_load(open(_example()).read())
    base["name"] = "my-run_2.v1"
    p = tmp_path / "p.yaml"
    p.write_text(yaml.safe_dump(base))
    assert load_pipeline(p)[0].name == "my-run_2.v1"


# ----------------------------------------------------------------------------- transformers remote code

def test_csem_never_lets_a_model_folder_run_its_code(tiny_encoder, tmp_path):
    """A folder whose config asks for custom code (auto_map) is refused, never run and never prompted
    for: csem passes trust_remote_code=False to every from_pretrained."""
    from csem.model.encoder import HFEncoder

    folder = tmp_path / "remote"
    shutil.copytree(tiny_encoder, folder)
    cfg = json.loads((folder / "config.json").read_text())
    cfg["model_type"] = "evilbert"  # no built-in class: only the folder's code could load it
    cfg["auto_map"] = {"AutoConfig": "evil.EvilConfig", "AutoModel": "evil.EvilModel"}
    (folder / "config.json").write_text(json.dumps(cfg))
    (folder / "evil.py").write_text("raise SystemExit('remote code ran')\n")
    with pytest.raises(Exception) as info:
        HFEncoder(str(folder))
    assert "remote code ran" not in str(info.value)
    assert not isinstance(info.value, SystemExit)


def test_every_from_pretrained_in_csem_passes_trust_remote_code_false():
    import re
    from pathlib import Path

    import csem

    root = Path(csem.__file__).parent
    calls = []
    for path in root.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        for m in re.finditer(r"\.from_pretrained\(", text):
            depth, i = 1, m.end()
            while depth and i < len(text):
                depth += {"(": 1, ")": -1}.get(text[i], 0)
                i += 1
            calls.append((path.name, text[m.start():i]))
    assert calls
    bad = [(f, c) for f, c in calls if "trust_remote_code=False" not in c]
    assert not bad, bad


def test_diverse_beam_search_is_opt_in(tiny_generator_dir):
    import asyncio

    from csem.llm.config import GenerateConfig
    from csem.llm.providers.hf import HFBackend

    backend = HFBackend(str(tiny_generator_dir))
    cfg = GenerateConfig(max_tokens=2, n=2, num_beams=2, num_beam_groups=2, diversity_penalty=0.5)
    with pytest.raises(ValueError, match="trust_remote_code=true"):
        asyncio.run(backend.generate([{"role": "user", "content": "hi"}], cfg))


# ----------------------------------------------------------------------------- CLI help

def test_help_never_cuts_option_names():
    for cmd in ("train", "score", "rerank", "serve", "mrt"):
        res = CliRunner().invoke(app, [cmd, "--help"], env={"COLUMNS": "80", "TERMINAL_WIDTH": ""}, terminal_width=80)
        assert res.exit_code == 0
        assert "…" not in "".join(line.split("│")[1][:40] for line in res.output.splitlines() if "│ " in line
                                   and "--" in line), res.output
    # csem train keeps the common options; every other setting is a config field (--config, --set)
    train = CliRunner().invoke(app, ["train", "--help"], env={"COLUMNS": "100", "TERMINAL_WIDTH": ""},
                               terminal_width=100).output
    assert "--config" in train and "--set" in train and "--print-config" in train
    assert len(train.splitlines()) <= 60, (len(train.splitlines()), train)


def test_help_shows_boolean_flags_without_a_value_type():
    train = CliRunner().invoke(app, ["train", "--help"], terminal_width=100).output
    judge = CliRunner().invoke(app, ["judge", "--help"], terminal_width=100).output
    assert "<bool>" not in train + judge, train + judge
    assert "--print-config" in train and "--no-progress" in judge and "<path>" in train  # other types still shown
    assert "Eq. 9" not in train


def test_score_and_precision_help_say_what_they_do():
    out = " ".join(CliRunner().invoke(app, ["score", "--help"], terminal_width=80).output.split())
    out = out.replace("│", "").replace("  ", " ")
    assert "lies inside its label scale" in out and "pairwise loss alone" in out
    assert "auto picks" in " ".join(out.split()) and "CPU" in out
    # training's precision is a TrainConfig field (--set train.precision=...), documented there
    from csem.model import TrainConfig

    assert "bf16 mixed precision on a GPU" in " ".join(TrainConfig.__doc__.split())


def test_train_prints_its_timing_without_progress(nbest_train, tiny_encoder, tmp_path):
    import re

    data = write_records(nbest_train[:24], tmp_path / "train.jsonl")
    res = CliRunner().invoke(app, ["train", "--data", str(data), "--label-col", "judge.quality", "--out",
                                   str(tmp_path / "m"), "--encoder", str(tiny_encoder), "--epochs", "2",
                                   "--set", "train.frozen_epochs=2", "--set", "model.hidden_sizes=[8]", "--set",
                                   "model.max_length=24",
                                   "--label-range", "1,5", "--set", "train.num_threads=1"])
    assert res.exit_code == 0, res.output
    epochs = re.findall(r"^epoch (\d+): .* ([\d.]+) s, ", res.output, flags=re.M)
    assert [e for e, _ in epochs] == ["0", "1"], res.output
    assert re.search(r"trained in [\d.]+ s, [\d.]+ s per epoch", res.output), res.output


def test_mrt_nan_reward_weight_is_bad_input_before_any_work(tmp_path):
    src = tmp_path / "s.jsonl"
    src.write_text('{"id": "a", "source": "The council met.", "reference": "Council met."}\n')
    res = CliRunner().invoke(app, ["mrt", "--generator", "smollm2", "--sources", str(src), "--metric", "chrf",
                                   "--weights", "metric.chrf=nan", "--out", str(tmp_path / "run")])
    assert res.exit_code == 2 and "finite" in res.output, res.output
    assert not (tmp_path / "run" / "final").exists()
