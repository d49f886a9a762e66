"""The acceptability gate on a ref-based student: the gate's texts include each source's reference as an
accepted candidate, and a source with a single reference leaves that candidate without one. Feature rows
of two widths (source + reference: 41, source only: 28) once made ``torch.tensor`` fail in ``fit_gate``
(``expected sequence of length 41 at dim 1 (got 28)``), which ``csem run package:translation.yaml``
hit in its train stage. Fast tier: the tiny RANDOM encoder (what is tested is that training runs and the
gate is fitted on rows of one width, not what the encoder knows)."""

from __future__ import annotations

import torch

from csem.model import ModelConfig, TrainConfig, fit
from csem.model.acceptability import AcceptabilityGate, contexts_of, fit_gate, gate_examples, gate_size

torch.set_num_threads(1)

SOURCES = [
    "Der Stadtrat hat am Montag nach langer Debatte den neuen Haushalt beschlossen.",
    "Ein Sturm hat die Kuestenstrasse zwei Tage lang gesperrt, bevor sie am Freitag wieder aufging.",
    "Die neue Baeckerei in der Hauptstrasse verkauft ab sieben Uhr Brot, Kuchen und Kaffee.",
    "Der Fluss trat am Montag ueber die Ufer und ueberflutete die alte Muehle am Stadtrand.",
]
REFERENCES = [
    "The city council passed the new budget on Monday after a long debate.",
    "A storm closed the coastal road for two days before it reopened on Friday.",
    "The new bakery on Main Street sells bread, cakes and coffee from seven o'clock.",
    "The river burst its banks on Monday and flooded the old mill on the edge of town.",
]


def _records() -> list[dict]:
    """Three translations per source (good, word salad, another source's), one reference each."""
    out = []
    for i, (src, ref) in enumerate(zip(SOURCES, REFERENCES)):
        other = REFERENCES[(i + 1) % len(REFERENCES)]
        words = ref.split()
        for j, (cand, label) in enumerate([(ref.replace("the", "a", 1), 5.0), (" ".join(words[::-1]), 2.0),
                                           (other, 1.0)]):
            out.append({"id": f"d{i}-s{j}", "doc_id": f"d{i}", "system_id": f"s{j}", "source": src, "reference": ref,
                        "candidate": cand, "judge.quality": label})
    return out


def test_fit_gate_on_ref_based_rows_reads_one_feature_width():
    recs = _records()
    accepted, rejected = gate_examples(recs, ["quality"])
    widths = {len(contexts_of(r, "ref-based")) for r in accepted}
    assert widths == {1, 2}  # the references turned candidates have no reference of their own
    gate = AcceptabilityGate(gate_size("ref-based"), ["quality"])
    report = fit_gate(gate, recs, "ref-based", seed=0)
    assert gate.is_fitted and report["accepted"] == len(recs)  # every row with a reference, none without
    assert report["rejected"]["quality"] > 0


def test_ref_based_training_with_the_gate_on(tiny_encoder, tmp_path):
    """``csem train``'s default gate on a ref-based student trains, saves, loads and scores."""
    from csem.model import EvaluationModel

    recs = _records()
    cfg = ModelConfig(name="ref-gate", encoder=str(tiny_encoder), max_length=48, hidden_sizes=[16], dropout=0.0)
    assert cfg.acceptability_gate  # on by default
    model = fit(recs, "judge.quality", "ref-based", out_dir=tmp_path / "m", config=cfg,
                  train_config=TrainConfig(max_epochs=1, batch_size=8, seed=0, contrast_per_record=0),
                  label_range=(1, 5))
    card = (tmp_path / "m" / "card.json").read_text() if (tmp_path / "m" / "card.json").exists() else ""
    assert model.module.gate is not None and model.module.gate.is_fitted
    assert "acceptability" in card or card == ""
    loaded = EvaluationModel.load(tmp_path / "m")
    pred = loaded.predict(recs, precision="fp32")
    scores = next(iter(pred.scores.values()))
    assert len(scores) == len(recs) and all(1.0 <= s <= 5.0 for s in scores)
