"""Partial fine-tuning (top layers over cached lower-layer states), the unified cross-encoder,
source length, grouped cross-validation and multi-process (DDP over gloo) training.

Fast tier: the tiny RANDOM 2-layer encoder (what is tested is plumbing and exactness, not what the
encoder knows), except the DDP test, which starts two real training processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from csem.model import ModelConfig, TrainConfig, fit
from csem.model.cv import Recipe, cross_validate, grouped_folds
from csem.model.encoder import build_encoder

SMALL = dict(max_length=40, hidden_sizes=[32], dropout=0.0)


def _col(pred, aspect):
    """The scores of ``aspect`` (column ``metric.<name>.<aspect>``) of a prediction, in input order."""
    return pred.scores[next(c for c in pred.columns if c.endswith("." + aspect))]


def _by_id(pred, aspect):
    """``{record id: score of aspect}`` of a prediction."""
    return dict(zip(pred.ids, _col(pred, aspect)))


def test_split_forward_equals_full_forward(tiny_encoder):
    enc = build_encoder("hf", str(tiny_encoder), "mean").eval()
    ids = enc.tokenize(["The cat sat on the mat.", "A much longer sentence about the market falling today."], 32)
    b = enc.pad(ids)
    with torch.no_grad():
        full = enc(b["input_ids"], b["attention_mask"])
        for k in range(enc.n_layers + 1):
            split = enc.upper(enc.lower(b["input_ids"], b["attention_mask"], k), b["attention_mask"], k)
            assert torch.allclose(full, split, atol=1e-6), k


def test_joint_input_keeps_every_segment(tiny_encoder):
    enc = build_encoder("hf", str(tiny_encoder), "cls")
    long_source = "the source article goes on " * 100
    [ids] = enc.tokenize_joint([["a short summary", "the reference", long_source]], 64)
    text = enc.tokenizer.decode(ids)
    assert len(ids) == 64
    assert text.startswith("[CLS] a short summary [SEP] the reference [SEP] the source article")
    assert ids[-1] == enc.tokenizer.sep_token_id
    [ids] = enc.tokenize_joint([["a short summary", "tiny source"]], 64)
    assert enc.tokenizer.decode(ids) == "[CLS] a short summary [SEP] tiny source [SEP]"


def test_train_layers_leaves_lower_layers_untouched(tiny_encoder, train_records):
    cfg = ModelConfig(name="t", encoder=str(tiny_encoder), **SMALL)
    tc = TrainConfig(max_epochs=2, frozen_epochs=0, lr=1e-2, head_lr=1e-2, batch_size=16, train_layers=1, seed=1)
    before = build_encoder("hf", str(tiny_encoder), "mean").model.state_dict()
    model = fit(train_records, "judge.quality", "ref-free", config=cfg, train_config=tc, label_range=(1, 5))
    after = model.module.encoder.model.state_dict()
    lower = [k for k in after if k.startswith("embeddings.") or ".layer.0." in k]
    upper = [k for k in after if ".layer.1." in k]
    assert lower and upper
    assert all(torch.equal(before[k], after[k]) for k in lower)
    assert any(not torch.equal(before[k], after[k]) for k in upper)
    assert model.module.split_layer == 0  # the whole encoder runs again after training
    # no run state is parked on the module (the token-state cache and the rows live in the run's state)
    assert not {"_lower_cache", "dev_records", "preferences", "contrast_batches", "history"} & set(vars(model.module))
    assert all(p.requires_grad for p in model.module.encoder.parameters())
    assert model.card["training"]["epochs_run"] == 2  # counted without a dev set too (no validation history)


def test_train_layers_out_of_range(tiny_encoder, train_records):
    cfg = ModelConfig(name="t", encoder=str(tiny_encoder), **SMALL)
    with pytest.raises(ValueError, match="train_layers"):
        fit(train_records, "judge.quality", "ref-free", config=cfg,
            train_config=TrainConfig(max_epochs=1, train_layers=5), label_range=(1, 5))


@pytest.mark.parametrize("mode", ["ref-free", "ref-based"])
def test_unified_cross_encoder_round_trip(tiny_encoder, train_records, test_records, tmp_path, mode):
    from csem.model import EvaluationModel

    cfg = ModelConfig(name="u", encoder=str(tiny_encoder), architecture="unified", **SMALL)
    tc = TrainConfig(max_epochs=2, frozen_epochs=0, lr=1e-3, head_lr=1e-3, batch_size=16, train_layers=1, seed=2)
    model = fit(train_records, "judge.quality", mode, out_dir=tmp_path / "u", config=cfg, train_config=tc,
                label_range=(1, 5))
    direct = _by_id(model.predict(test_records, precision="fp32"), "quality")
    loaded = EvaluationModel.load(tmp_path / "u")
    assert loaded.config.architecture == "unified"
    again = _by_id(loaded.predict(list(reversed(test_records)), precision="fp32"), "quality")
    assert direct.keys() == again.keys()
    assert max(abs(direct[k] - again[k]) for k in direct) < 1e-3
    assert len(set(round(v, 6) for v in direct.values())) > 1  # the candidates are told apart


def test_source_max_length_truncates_only_the_source(tiny_encoder):
    from csem.model.batching import BatchBuilder

    enc = build_encoder("hf", str(tiny_encoder), "mean")
    rec = {"id": "a", "source": "word " * 200, "candidate": "word " * 200}
    batch = BatchBuilder(enc, "ref-free", 100, source_max_length=20)([rec])
    sizes = sorted(int(m) for c in batch.chunks for m in c["attention_mask"].sum(1))
    assert sizes == [20, 100], sizes


def test_grouped_folds_partition_groups():
    recs = [{"doc_id": f"d{i // 3}"} for i in range(30)]
    folds = grouped_folds(recs, 4, seed=1)
    seen = []
    for trn, dev in folds:
        assert not set(trn) & set(dev)
        assert {recs[i]["doc_id"] for i in trn}.isdisjoint({recs[i]["doc_id"] for i in dev})
        seen += dev
    assert sorted(seen) == list(range(30))
    with pytest.raises(ValueError, match="groups"):
        grouped_folds(recs[:6], 3)


def test_cross_validate_reports_every_epoch(tiny_encoder, train_records):
    cfg = ModelConfig(name="cv", encoder=str(tiny_encoder), **SMALL)
    recipes = [Recipe("top1", cfg, TrainConfig(max_epochs=2, frozen_epochs=0, lr=1e-3, head_lr=1e-2, batch_size=16,
                                               train_layers=1, seed=0)),
               Recipe("top1-again", cfg, TrainConfig(max_epochs=2, frozen_epochs=0, lr=1e-3, head_lr=1e-2,
                                                     batch_size=16, train_layers=1, seed=0))]
    res = cross_validate(train_records, "judge.quality", recipes, folds=3, label_range=(1, 5))
    assert [r.name for r in res] == ["top1", "top1-again"]
    for r in res:
        assert sorted(r.per_epoch) == [1, 2] and r.best_epoch in (1, 2)
        assert -1.0 <= r.at()["label"]["spearman"] <= 1.0
        assert r.at()["human"] is not None  # the records carry human.quality
    # the shared lower-layer cache changes nothing but float rounding (states cached from chunks padded
    # differently): the same recipe twice gives the same rank correlations
    for e in (1, 2):
        for side in ("label", "human"):
            a, b = res[0].per_epoch[e][side], res[1].per_epoch[e][side]
            assert a["spearman"] == pytest.approx(b["spearman"]) and a["kendall"] == pytest.approx(b["kendall"])
            assert a["pearson"] == pytest.approx(b["pearson"], abs=0.01)


@pytest.mark.slow
def test_ddp_two_cpu_processes(tiny_encoder, train_records, test_records, tmp_path):
    """`csem train --strategy ddp --devices 2` on CPU: two real processes over gloo, one saved model that scores."""
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in train_records), encoding="utf-8")
    test = tmp_path / "test.jsonl"
    test.write_text("".join(json.dumps(r) + "\n" for r in test_records), encoding="utf-8")
    out = tmp_path / "ddp-model"
    env = dict(os.environ, CSEM_DEBUG="1", OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "csem", "train", "--data", str(data), "--label-col", "judge.quality",
           "--label-range", "1,5", "--out", str(out), "--encoder", str(tiny_encoder), "--set", "model.max_length=40",
           "--set", "model.hidden_sizes=[16]", "--epochs", "2", "--set", "train.frozen_epochs=0", "--set",
           "train.batch_size=8",
           "--set", "train.accelerator=cpu", "--set", "train.devices=2", "--set", "train.strategy=ddp", "--set",
           "train.num_threads=1"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("wrote ") == 1  # only rank 0 writes and reports
    assert (out / "model.safetensors").exists()
    scored = tmp_path / "scored.jsonl"
    proc = subprocess.run([sys.executable, "-m", "csem", "score", "--model", str(out), "--data", str(test),
                           "--out", str(scored)], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for line in scored.read_text().splitlines()]
    assert len(rows) == len(test_records)
    assert all(isinstance(r["metric.csem.quality"], float) for r in rows)


def test_bad_architecture_is_one_line_exit_2(tmp_path):
    """A setting pydantic refuses is one `csem: error:` line naming the setting, exit 2."""
    data = tmp_path / "t.jsonl"
    data.write_text('{"id": "a", "source": "s", "candidate": "c", "judge.q": 3}\n', encoding="utf-8")
    res = subprocess.run([sys.executable, "-m", "csem", "train", "--data", str(data), "--label-col", "judge.q",
                          "--out", str(tmp_path / "m"), "--set", "model.architecture=bogus"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 2
    assert [ln for ln in res.stderr.splitlines() if ln.strip()] == [
        "csem: error: --set 'model.architecture=bogus': model.architecture = 'bogus': "
        "Input should be 'bi-encoder' or 'unified'"]
    assert not (tmp_path / "m").exists()


def test_overlap_features_by_hand():
    from csem.model.features import overlap_features, overlap_size

    # candidate "the cat sat on the mat ." against "the cat sat on a mat today .": every unigram
    # occurs; bigrams on-the, the-mat, mat-. are novel (3/6); trigrams: 3 of 5 novel
    feats = overlap_features("The cat sat on the mat.", ["the cat sat on a mat today ."])
    assert feats[:3] == [0.0, 0.5, 0.6]
    assert feats[3] == 0.0  # no repeated trigram
    assert 0 < feats[4] < 1
    rep = overlap_features("a b c a b c", [])
    assert rep[0] == 1 - 3 / 4 and len(rep) == overlap_size("fluency") == 2
    assert overlap_size("ref-free") == 5 and overlap_size("ref-based") == 8
    assert overlap_features("", ["x"]) == [0.0, 0.0, 0.0, 0.0, 0.0]
    # the novelty set: the same features without the length (the last one)
    from csem.model.features import pair_features

    assert pair_features("novelty", "The cat sat on the mat.", ["the cat sat on a mat today ."]) == feats[:4]
    assert overlap_size("ref-free", "novelty") == 4 and overlap_size("ref-based", "novelty") == 7
    assert pair_features("novelty", "a b", []) == [0.0] and overlap_size("fluency", "novelty") == 1


def test_lexical_features_by_hand():
    from csem.model.features import (CANDIDATE_FEATURES, CONTEXT_FEATURES, extractive_fragments,
                                     lexical_features, overlap_size)

    # "the cat sat on the mat" in "x the cat sat y on the mat": fragments "the cat sat" at 1 and
    # "on the mat" at 5 (Grusky et al.'s greedy longest match)
    assert extractive_fragments("the cat sat on the mat".split(), "x the cat sat y on the mat".split()) == [(3, 1), (3, 5)]
    assert extractive_fragments("a b".split(), "c d".split()) == []
    assert overlap_size("ref-free", "lexical") == len(CONTEXT_FEATURES) + len(CANDIDATE_FEATURES) == 28
    assert overlap_size("ref-based", "lexical") == 2 * len(CONTEXT_FEATURES) + len(CANDIDATE_FEATURES)
    src = "The cat sat on the mat . The dog ran away . Then it rained ."
    f = dict(zip(CONTEXT_FEATURES + CANDIDATE_FEATURES, lexical_features("The cat sat on the mat .", [src])))
    assert f["novel_1"] == 0.0 and f["coverage"] == 1.0 and f["longest_fragment_share"] == 1.0
    assert f["first_position"] == 0.0 and f["lead_coverage"] == 1.0 and f["order_inversions"] == 0.0
    assert f["capitalised_sentences"] == 1.0 and f["spaced_punctuation"] > 0 and f["ends_with_punctuation"] == 1.0
    g = dict(zip(CONTEXT_FEATURES + CANDIDATE_FEATURES, lexical_features("then it rained. the cat sat", [src])))
    assert g["order_inversions"] == 1.0 and g["capitalised_words"] == 0.0 and g["pronoun_first"] == 0.0
    assert g["ends_with_punctuation"] == 0.0 and g["spaced_punctuation"] == 0.0 and g["mean_position"] > 0.2
    h = dict(zip(CONTEXT_FEATURES + CANDIDATE_FEATURES, lexical_features("it went -lrb- far -rrb- . it went far .", [src])))
    assert h["pronoun_first"] == 1.0 and h["bracket_tokens"] == 1.0 and h["max_sentence_overlap"] == 1.0
    assert len(lexical_features("", [])) == len(CANDIDATE_FEATURES)


def test_lexical_prefit_fits_the_features_and_is_saved(tiny_encoder, train_records, test_records, tmp_path):
    """The lexical set's MLP is pre-fitted on the standardised features alone (its training MSE falls
    below the labels' variance), the deep part starts at zero, and the means/deviations are saved."""
    from csem.model import EvaluationModel, LabelSpec
    from csem.model.batching import BatchBuilder
    from csem.model.module import EvaluationModule

    cfg = ModelConfig(name="o", encoder=str(tiny_encoder), feature_set="lexical",
                      labels=[LabelSpec(aspect="quality", column="judge.quality", min=1, max=5)], **SMALL)
    module = EvaluationModule(cfg, TrainConfig(feature_prefit_steps=200, seed=2)).eval()
    batch = BatchBuilder(module.encoder, "ref-free", 40, cfg.labels, overlap="lexical")(train_records)
    with torch.no_grad():  # the deep part starts at zero: the output is the feature MLP's alone
        start = module.head_outputs(module.embed(batch), batch)
        alone = module.overlap_heads["quality"]((batch.overlap - module.lex_mean) / module.lex_std)
    assert torch.allclose(start[:, 0], alone)
    module.init_overlap_heads(batch)
    assert torch.allclose(module.lex_mean, batch.overlap.mean(0))
    y = batch.labels[:, 0]
    with torch.no_grad():
        out = module.head_outputs(module.embed(batch), batch)[:, 0, 0]
    assert float(((out - y) ** 2).mean()) < 0.5 * float(y.var(unbiased=False))
    model = fit(train_records, "judge.quality", "ref-free", out_dir=tmp_path / "lex", config=cfg,
                train_config=TrainConfig(max_epochs=1, train_layers=1, seed=2), label_range=(1, 5))
    loaded = EvaluationModel.load(tmp_path / "lex")
    assert loaded.config.feature_set == "lexical" and not torch.all(loaded.module.lex_std == 1)
    a = _col(model.predict(test_records, precision="fp32"), "quality")
    b = _col(loaded.predict(test_records, precision="fp32"), "quality")
    assert max(abs(x - z) for x, z in zip(a, b)) < 1e-4


@pytest.mark.parametrize("mode", ["ref-free", "ref-based"])
@pytest.mark.parametrize("feature_set", ["overlap", "novelty", "lexical"])
def test_overlap_features_model_round_trip(tiny_encoder, train_records, test_records, tmp_path, mode, feature_set):
    """A student with lexical features saves, loads and scores the same; the features reach the head
    (other feature values, same embeddings: other outputs)."""
    import json

    from csem.model import EvaluationModel
    from csem.model.features import overlap_size

    cfg = ModelConfig(name="o", encoder=str(tiny_encoder), overlap_features=True, feature_set=feature_set, **SMALL)
    tc = TrainConfig(max_epochs=2, lr=1e-3, head_lr=1e-3, batch_size=16, train_layers=1, seed=2)
    model = fit(train_records, "judge.quality", mode, out_dir=tmp_path / "o", config=cfg, train_config=tc,
                label_range=(1, 5))
    direct = _by_id(model.predict(test_records, precision="fp32"), "quality")
    loaded = EvaluationModel.load(tmp_path / "o")
    assert loaded.config.overlap_features
    again = _by_id(loaded.predict(test_records, precision="fp32"), "quality")
    assert max(abs(direct[k] - again[k]) for k in direct) < 1e-3
    assert json.loads((tmp_path / "o" / "config.json").read_text())["overlap_features"] is True
    from csem.model.batching import BatchBuilder

    module = loaded.module.eval()
    batch = BatchBuilder(module.encoder, mode, 40, overlap=feature_set)(test_records[:6])
    assert batch.overlap.shape == (batch.cand_idx.shape[0], overlap_size(mode, feature_set))
    if feature_set == "overlap":
        assert overlap_size(mode) == (5 if mode == "ref-free" else 8)
    if feature_set == "novelty":  # no length: two candidates that differ only in length get the same features
        assert overlap_size(mode, feature_set) == (4 if mode == "ref-free" else 7)
        assert loaded.config.feature_set == "novelty" and loaded.module.overlap_heads["quality"].in_features == 4 + 3 * (mode == "ref-based")
    with torch.no_grad():
        emb = module.embed(batch)
        out = module.head_outputs(emb, batch)
        batch.overlap = 1 - batch.overlap
        assert not torch.allclose(out, module.head_outputs(emb, batch))


def test_folder_without_feature_set_loads_the_overlap_set(tiny_encoder, train_records, test_records, tmp_path):
    """Folders written before ``feature_set`` existed (overlap features, linear term) load as ``overlap``."""
    import json

    from csem.model import EvaluationModel

    cfg = ModelConfig(name="v1", encoder=str(tiny_encoder), feature_set="overlap", **SMALL)
    model = fit(train_records, "judge.quality", "ref-free", out_dir=tmp_path / "v1", config=cfg,
                train_config=TrainConfig(max_epochs=1, train_layers=1, seed=2), label_range=(1, 5))
    raw = json.loads((tmp_path / "v1" / "config.json").read_text())
    raw.pop("feature_set")
    raw.pop("feature_hidden")
    (tmp_path / "v1" / "config.json").write_text(json.dumps(raw))
    loaded = EvaluationModel.load(tmp_path / "v1")
    assert loaded.config.feature_set == "overlap"
    before = _col(model.predict(test_records[:6], precision="fp32"), "quality")
    after = _col(loaded.predict(test_records[:6], precision="fp32"), "quality")
    assert max(abs(a - b) for a, b in zip(before, after)) < 1e-4


def test_folder_without_overlap_field_loads_without_features(tiny_encoder, train_records, test_records, tmp_path):
    """Model folders written before overlap_features existed load with the features off and score
    as before."""
    import json

    from csem.model import EvaluationModel

    cfg = ModelConfig(name="old", encoder=str(tiny_encoder), overlap_features=False, **SMALL)
    model = fit(train_records, "judge.quality", "ref-free", out_dir=tmp_path / "old", config=cfg,
                train_config=TrainConfig(max_epochs=1, train_layers=1, seed=2), label_range=(1, 5))
    raw = json.loads((tmp_path / "old" / "config.json").read_text())
    raw.pop("overlap_features")
    (tmp_path / "old" / "config.json").write_text(json.dumps(raw))
    loaded = EvaluationModel.load(tmp_path / "old")
    assert loaded.config.overlap_features is False
    before = _col(model.predict(test_records[:6], precision="fp32"), "quality")
    after = _col(loaded.predict(test_records[:6], precision="fp32"), "quality")
    assert max(abs(a - b) for a, b in zip(before, after)) < 1e-4


def test_overlap_term_starts_at_least_squares(tiny_encoder, train_records):
    """The linear overlap term starts at the least-squares fit of the normalised labels (numpy's)."""
    import numpy as np

    from csem.model import LabelSpec
    from csem.model.batching import BatchBuilder
    from csem.model.module import EvaluationModule

    cfg = ModelConfig(name="o", encoder=str(tiny_encoder), feature_set="overlap",
                      labels=[LabelSpec(aspect="quality", column="judge.quality", min=1, max=5)], **SMALL)
    module = EvaluationModule(cfg)
    batch = BatchBuilder(module.encoder, "ref-free", 40, cfg.labels, overlap=True)(train_records)
    module.init_overlap_heads(batch, ridge=0.0)
    x = np.hstack([batch.overlap.numpy(), np.ones((len(train_records), 1))])
    y = np.array([(r["judge.quality"] - 1) / 4 for r in train_records])
    w, *_ = np.linalg.lstsq(x, y, rcond=None)
    lin = module.overlap_heads["quality"]
    assert np.allclose(lin.weight.detach().numpy()[0], w[:-1], atol=1e-4)
    assert abs(float(lin.bias.detach()) - w[-1]) < 1e-4


def test_lexical_features_read_bounded_prefixes():
    """A huge candidate or source is read up to the caps: the features equal those of the capped texts."""
    from csem.model.features import MAX_CANDIDATE_WORDS, MAX_CONTEXT_WORDS, lexical_features

    words = [f"w{i % 997}" for i in range(3 * MAX_CONTEXT_WORDS)]
    cand, src = " ".join(words[:3 * MAX_CANDIDATE_WORDS]), " ".join(reversed(words))
    capped = lexical_features(" ".join(words[:MAX_CANDIDATE_WORDS]), [" ".join(list(reversed(words))[:MAX_CONTEXT_WORDS])])
    full = lexical_features(cand, [src])
    assert full[:13] == capped[:13]  # the context block reads the same prefixes
    assert len(full) == len(capped)
