"""``None`` content is empty text, never the text "None": in the TRL reward (a chat message whose
``content`` is ``None``), in ``csem rerank``'s N-best reader (a null candidate: a generator that wrote
nothing) and in the scoring server's reader (a null candidate is refused like an empty one). Fast tier:
a student on the tiny RANDOM encoder (what is tested is how texts are read, not what the model knows)."""

from __future__ import annotations

import pytest
import torch
from typer.testing import CliRunner

from csem.cli import _load_commands, app
from csem.data.records import read_records, write_records

_load_commands()
torch.set_num_threads(1)

SOURCES = ["The river flooded the old mill on Monday. Nobody was hurt, but the bridge is closed.",
           "A new bakery opened on Main Street. It sells bread, cakes and coffee from 7 am.",
           "The council approved the budget after a long debate. Taxes will rise by two percent."]


def _rows() -> list[dict]:
    out = []
    for i, src in enumerate(SOURCES):
        words = src.split()
        for j, (cand, q) in enumerate([(" ".join(words[:9]), 5.0), (" ".join(words[::-1][:9]), 2.0),
                                       (" ".join(words[3:7]), 3.0)]):
            out.append({"id": f"d{i}-{j}", "doc_id": f"d{i}", "system_id": f"s{j}", "source": src, "candidate": cand,
                        "judge.quality": q})
    return out


@pytest.fixture(scope="module")
def student_dir(tiny_encoder, tmp_path_factory):
    from csem.model import ModelConfig, TrainConfig, fit

    out = tmp_path_factory.mktemp("none") / "student"
    fit(_rows() * 2, "judge.quality", "ref-free", out_dir=out,
        config=ModelConfig(name="tiny", encoder=str(tiny_encoder), max_length=32, hidden_sizes=[16]),
        train_config=TrainConfig(max_epochs=1, batch_size=8, seed=0, contrast_per_record=0), label_range=(1, 5))
    return out


def test_trl_reward_reads_none_content_as_empty_text(student_dir):
    from csem.apply.reward import trl_reward

    reward = trl_reward(student_dir)
    prompt = [{"role": "user", "content": SOURCES[0]}]
    none, empty, word = reward(prompts=[prompt] * 3, completions=[[{"role": "assistant", "content": None}],
                                                                  [{"role": "assistant", "content": ""}],
                                                                  [{"role": "assistant", "content": "None"}]])
    assert none == pytest.approx(empty) == pytest.approx(reward.floor)  # the scale minimum given to empty text
    parts = reward(prompts=[prompt], completions=[[{"role": "assistant",
                                                    "content": [{"type": "text", "text": "None"}]}]])
    assert parts == pytest.approx([word])  # a list of parts is read as its text


def test_rerank_reads_a_null_candidate_as_empty_text(student_dir, tmp_path):
    rows = [{k: v for k, v in r.items() if not k.startswith("judge.")} for r in _rows()]
    rows[1]["candidate"] = None  # d0's second candidate: nothing generated
    data = write_records(rows, tmp_path / "nbest.jsonl")
    res = CliRunner().invoke(app, ["rerank", "--data", str(data), "--metric", str(student_dir),
                                   "--out", str(tmp_path / "chosen.jsonl"), "--scores", str(tmp_path / "all.jsonl")])
    assert res.exit_code == 0, res.output
    scored = {r["id"]: r for r in read_records(tmp_path / "all.jsonl", required=())}
    col = next(c for c in scored["d0-0"] if c.startswith("metric.tiny."))
    assert scored["d0-1"]["candidate"] in ("", None)
    assert scored["d0-1"][col] == pytest.approx(min(r[col] for r in scored.values()))  # at the floor
    chosen = {r["doc_id"]: r["id"] for r in read_records(tmp_path / "chosen.jsonl", required=())}
    assert chosen["d0"] != "d0-1"


def test_server_reader_refuses_a_null_candidate_as_empty_text(student_dir):
    from csem.apply.metrics import load_metric
    from csem.apply.server import RequestError, check_records

    metric = load_metric(str(student_dir))
    msgs = {}
    for value in (None, ""):
        with pytest.raises(RequestError) as info:
            check_records({"records": [{"source": SOURCES[0], "candidate": value}]}, metric)
        msgs[value] = str(info.value)
    assert msgs[None] == msgs[""] and "'candidate' is empty" in msgs[None]
