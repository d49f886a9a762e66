"""Training that learns (real MiniLM, slow), and the saved folder, scoring and training options on the
tiny random encoder (fast tier; real files either way)."""

from __future__ import annotations

import json
import math

import pytest
import torch

from csem.meta.correlation import correlate
from csem.model import EvaluationModel, ModelConfig, TrainConfig, fit
from csem.model.card import data_hash
from csem.model.module import EvaluationModule

SMALL = dict(max_length=40, hidden_sizes=[64], dropout=0.1)  # as in conftest.py


def _q(pred):
    """The one score column of a one-aspect prediction, in input order."""
    return pred.scores[pred.columns[0]]


def _kendall(pred, records):
    by_id = dict(zip(pred.ids, _q(pred)))
    return correlate([by_id[r["id"]] for r in records], [r["judge.quality"] for r in records], level="summary",
                     method="kendall", groups=[r["doc_id"] for r in records]).value


@pytest.mark.slow  # MiniLM: a random encoder cannot learn the order
def test_training_learns_the_quality_order(trained, test_records, train_records):
    model, _ = trained
    learned = _kendall(model.predict(test_records), test_records)
    torch.manual_seed(0)
    untrained = EvaluationModule(model.config)  # same encoder and head shape, random head
    baseline = _kendall(EvaluationModel(untrained).predict(test_records), test_records)
    print(f"held-out summary-level Kendall: trained {learned:.3f}, untrained {baseline:.3f}")
    assert learned >= 0.5, learned
    assert learned > baseline + 0.3, (learned, baseline)
    # scores come back on the label scale (1-5; not clipped), not normalised to [0, 1]
    scores = sorted(_q(model.predict(test_records)))
    assert 1.0 <= scores[len(scores) // 2] <= 5.0 and scores[-1] - scores[0] > 1.5


def test_saved_folder_has_no_pickle_and_round_trips(tiny_trained, test_records):
    model, folder = tiny_trained
    names = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
    assert {"model.safetensors", "config.json", "metric_card.json", "metric_card.md", "encoder/config.json"} <= names
    assert any(n.startswith("encoder/tokenizer") for n in names)
    for p in folder.rglob("*"):
        if p.is_file():
            assert p.suffix not in (".bin", ".pt", ".pth", ".pkl", ".ckpt"), p
            head = p.read_bytes()[:9]
            if p.suffix == ".safetensors":  # a little-endian u64 header length (any first byte), then JSON
                assert head[8:9] == b"{", f"{p} is no safetensors file"
            else:  # a pickle of protocol 2+ opens with PROTO (0x80) and its protocol number
                assert not (head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05")), \
                    f"{p} looks like a pickle"
    loaded = EvaluationModel.load(folder)
    a = model.predict(test_records, precision="fp32")
    b = loaded.predict(test_records, precision="fp32")
    assert a.ids == b.ids
    assert a.scores == b.scores  # bit-identical
    assert a.hash == b.hash
    # the public API's loader gives the same
    import csem

    assert csem.load_metric(folder).predict(test_records, precision="fp32").scores == a.scores


def test_order_and_batch_size_do_not_change_scores(tiny_trained, test_records):
    model, _ = tiny_trained
    first = model.predict(test_records, batch_size=64, precision="fp32")
    base = dict(zip(first.ids, _q(first)))
    rev = model.predict(list(reversed(test_records)), batch_size=64, precision="fp32")
    assert rev.ids == [r["id"] for r in reversed(test_records)]  # results follow the input order
    assert dict(zip(rev.ids, _q(rev))) == base  # exactly: the text pool is sorted
    small_pred = model.predict(test_records[3:] + test_records[:3], batch_size=3, precision="fp32")
    small = dict(zip(small_pred.ids, _q(small_pred)))
    assert small.keys() == base.keys()
    assert max(abs(small[k] - base[k]) for k in base) < 1e-4


def test_each_source_is_embedded_once(tiny_trained, test_records):
    """Count the rows the encoder actually embeds: shared scoring vs the naive scorer."""
    model, _ = tiny_trained
    seen: list[int] = []
    enc = model.module.encoder
    hook = enc.register_forward_hook(lambda mod, args, out: seen.append(out.shape[0]))
    try:
        model.predict(test_records)
        shared = sum(seen)
        seen.clear()
        model.predict(test_records, share_encodings=False)
        naive = sum(seen)
    finally:
        hook.remove()
    n_docs = len({r["doc_id"] for r in test_records})
    n_cands = len({r["candidate"] for r in test_records})
    assert shared == n_docs + n_cands  # 12 sources + 36 candidates
    assert naive == 2 * len(test_records)  # a source per candidate


def test_predict_records_add_columns_and_keep_the_rest(tiny_trained, test_records):
    model, _ = tiny_trained
    rows = model.predict(test_records[:4], mc_dropout=8).records
    for src, row in zip(test_records[:4], rows):
        score = row["metric.tiny.quality"]  # the mean of the MC-dropout samples
        assert isinstance(score, float) and math.isfinite(score)
        assert row["metric.tiny.quality.std"] > 0.0  # MC dropout spreads the samples
        assert row["human.quality"] == src["human.quality"] and row["id"] == src["id"]
    assert "metric.tiny.quality" not in test_records[0]  # inputs are not modified


def test_metric_card(tiny_trained, train_records):
    model, folder = tiny_trained
    card = json.loads((folder / "metric_card.json").read_text())
    assert card["distilled_from"] == {"judge": "synthetic order", "rubric": "quality", "label_columns": ["judge.quality"]}
    assert card["training"]["data_sha256"] == data_hash(train_records, ["judge.quality"])
    assert card["training"]["n_records"] == 72 and card["training"]["n_documents"] == 24
    val = card["validation"]
    assert val["level"] == "summary"
    assert set(val["aspects"]["quality"]) == {"label", "human"}
    assert -1.0 <= val["aspects"]["quality"]["human"]["kendall"] <= 1.0
    assert len(card["validation_history"]) == card["training"]["epochs_run"] >= 1
    import csem

    assert card["csem_version"] == csem.__version__
    md = (folder / "metric_card.md").read_text()
    for text in ("synthetic order", card["training"]["data_sha256"], "Intended use", "Limits", "Kendall tau-b"):
        assert text in md
    cfg = json.loads((folder / "config.json").read_text())
    assert cfg["labels"] == [{"aspect": "quality", "column": "judge.quality", "min": 1.0, "max": 5.0}]
    assert cfg["mode"] == "ref-free" and cfg["encoder"] == model.config.encoder


def _tiny_finetune(records, seed, encoder, **kw):
    return fit(records, "judge.quality", kw.pop("mode", "ref-free"),
               config=ModelConfig(**{**SMALL, "max_length": 24, "encoder": str(encoder), **kw}),
               train_config=TrainConfig(max_epochs=1, frozen_epochs=0, batch_size=8, seed=seed, num_threads=1),
               label_range=(1, 5))


def test_same_seed_same_weights_on_cpu(train_records, tiny_encoder):
    recs = train_records[:16]
    a = _tiny_finetune(recs, 5, tiny_encoder).module.state_dict()
    b = _tiny_finetune(recs, 5, tiny_encoder).module.state_dict()
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    # and the encoder was really fine-tuned (frozen_epochs=0)
    from csem.model.encoder import build_encoder

    fresh = build_encoder("hf", str(tiny_encoder), "mean").state_dict()
    assert any(not torch.equal(fresh[k], a["encoder." + k]) for k in fresh)


def test_several_references_max_aggregation(train_records, tiny_encoder):
    """ref-based with two references scores as the max over the two single-reference scores."""
    m = _tiny_finetune(train_records[:16], 1, tiny_encoder, mode="ref-based", ref_aggregation="max")
    recs = train_records[:4]
    both = _q(m.predict(recs, precision="fp32"))
    first = _q(m.predict([dict(r, reference=r["reference"][0]) for r in recs], precision="fp32"))
    second = _q(m.predict([dict(r, reference=r["reference"][1]) for r in recs], precision="fp32"))
    for b, f, s in zip(both, first, second):
        assert b == pytest.approx(max(f, s), abs=1e-5)


@pytest.mark.parametrize("loss,pooling", [("ce", "cls"), ("pairwise", "layerwise-mix")])
def test_other_losses_and_poolings_train_and_score(train_records, tiny_encoder, loss, pooling):
    m = _tiny_finetune(train_records[:16], 2, tiny_encoder, loss=loss, pooling=pooling)
    scores = _q(m.predict(train_records[:8]))
    assert len(scores) == 8 and all(s == s for s in scores)  # no NaN
    if loss == "ce":  # expected value over the 5 star classes stays inside the scale
        assert all(1.0 <= s <= 5.0 for s in scores)
        assert m.config.n_classes == 5


def test_mse_plus_pairwise_is_mse_plus_the_weighted_ranking_term(train_records, tiny_encoder):
    """``mse+pairwise`` with weight 0 trains exactly the ``mse`` model (deterministic CPU training);
    with weight 1 the ranking term changes the weights."""
    recs = train_records[:16]
    mse = _tiny_finetune(recs, 4, tiny_encoder, loss="mse").module.state_dict()
    zero = _tiny_finetune(recs, 4, tiny_encoder, loss="mse+pairwise", pairwise_weight=0.0).module.state_dict()
    one = _tiny_finetune(recs, 4, tiny_encoder, loss="mse+pairwise", pairwise_weight=1.0).module.state_dict()
    assert all(torch.equal(mse[k], zero[k]) for k in mse)
    assert any(not torch.equal(mse[k], one[k]) for k in mse)


def test_half_precision_checkpoint_trains_in_fp32(tmp_path, train_records, tiny_encoder):
    """A checkpoint saved in fp16 (common on model hubs) is loaded with fp32 weights, so fine-tuning
    does not turn the encoder into NaN (it did under transformers 5, which keeps the saved dtype)."""
    import shutil

    from safetensors.torch import load_file, save_file

    src = tiny_encoder  # same code path as an fp16 MiniLM, a fraction of the size
    for f in src.iterdir():
        if f.name != "model.safetensors":
            shutil.copy(f, tmp_path / f.name)
    save_file({k: v.half().contiguous() for k, v in load_file(str(src / "model.safetensors")).items()},
              str(tmp_path / "model.safetensors"))
    m = fit(train_records[:16], "judge.quality", "ref-free",
            config=ModelConfig(**{**SMALL, "encoder": str(tmp_path), "max_length": 24}),
            train_config=TrainConfig(max_epochs=1, frozen_epochs=0, batch_size=8, seed=3, num_threads=1),
            label_range=(1, 5))
    params = dict(m.module.named_parameters())
    assert all(p.dtype == torch.float32 for p in params.values())
    assert all(torch.isfinite(p).all() for p in params.values())
    assert all(s == s for s in _q(m.predict(train_records[:4])))


def test_one_precision_vocabulary_for_training_and_scoring():
    """``fp32``/``bf16``/``fp16`` mean the same in ``csem train`` and ``csem score``; Lightning's names work in both."""
    from csem.model.config import PRECISIONS
    from csem.model.inference import resolve_precision
    from csem.model.train import _precision

    cpu = torch.device("cpu")
    for short, lightning in PRECISIONS.items():
        assert _precision(TrainConfig(precision=short)) == lightning
        assert _precision(TrainConfig(precision=lightning)) == lightning
        assert resolve_precision(short, cpu) == resolve_precision(lightning, cpu)
    assert resolve_precision("bf16-mixed", cpu) is torch.bfloat16 and resolve_precision("32-true", cpu) is None
    with pytest.raises(ValueError, match="unknown precision"):
        resolve_precision("fp8", cpu)
