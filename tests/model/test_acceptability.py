"""The acceptability gate (csem.model.acceptability): its examples and formula (pure), and a real MiniLM
student whose gate puts degenerate candidates below the real ones, through save/load and scoring."""

from __future__ import annotations

import json

import pytest
import torch

from csem.model.acceptability import EXCLUDED_FEATURES, REJECT, AcceptabilityGate, gate_examples, gate_mask, gate_size
from csem.model.features import CANDIDATE_FEATURES, CONTEXT_FEATURES
from csem.model.module import bounded

SOURCE = ("The city council approved the new budget on Monday after a long debate. Property taxes will rise by "
          "two percent next year. Schools and parks receive most of the new money, the mayor said.")


def _col(pred, aspect):
    """The scores of ``aspect`` (column ``metric.<name>.<aspect>``) of a prediction, in input order."""
    return pred.scores[next(c for c in pred.columns if c.endswith("." + aspect))]


def _by_id(pred, aspect):
    """``{record id: score of aspect}`` of a prediction."""
    return dict(zip(pred.ids, _col(pred, aspect)))


def _records():
    return [{"id": "a", "doc_id": "d1", "source": SOURCE, "reference": "Council passes budget; taxes up 2%.",
             "candidate": "The council approved the budget on Monday. Taxes will rise by two percent."},
            {"id": "b", "doc_id": "d2", "source": "A storm closed the coastal highway for two days. Crews cleared "
             "fallen trees and reopened it on Friday.", "candidate": "A storm closed the highway until crews reopened it."}]


def test_gate_examples_are_degenerate_texts_of_the_records_and_deterministic():
    accepted, rejected = gate_examples(_records(), ["coherence", "relevance"], seed=3)
    texts = {r["candidate"] for r in accepted}
    assert _records()[0]["candidate"] in texts and "Council passes budget; taxes up 2%." in texts  # the reference
    kinds = {r["degenerate"] for r in rejected["coherence"]}
    assert kinds == {"few_tokens", "repeated_token", "truncated", "words_shuffled", "other_source"}
    copies = [r for r in rejected["relevance"] if r["degenerate"] == "source_copy"]
    assert copies and all(r["candidate"].startswith("The city council") or r["candidate"].startswith("A storm")
                          for r in copies)
    assert not any(r["degenerate"] == "source_copy" for r in rejected["coherence"])
    other = [r for r in rejected["coherence"] if r["degenerate"] == "other_source" and r["id"] == "a"]
    assert other and other[0]["candidate"] == _records()[1]["candidate"]  # a candidate of the other source
    again = gate_examples(_records(), ["coherence", "relevance"], seed=3)
    assert again == (accepted, rejected)
    assert all(r["candidate"] != _records()[0]["candidate"] for r in rejected["coherence"] if r["id"] == "a")


def test_gate_scores_keep_accepted_texts_and_push_rejected_ones_below_the_scale():
    gate = AcceptabilityGate(gate_size("ref-free"), ["quality"])
    out = torch.tensor([[[0.7]], [[0.2]], [[-0.3]]])
    feats = torch.zeros(3, gate_size("ref-free"))
    assert torch.equal(gate.gate_scores(out, feats), out)  # identity until fitted
    gate.fitted.fill_(1.0)
    gate.threshold.fill_(0.5)
    with torch.no_grad():  # p = sigmoid(bias) per row: force accepted (p = 1) and rejected (p ~ 0)
        for layer in gate.nets["quality"]:
            if isinstance(layer, torch.nn.Linear):
                layer.weight.zero_()
        gate.nets["quality"][-1].bias.fill_(20.0)
    assert torch.allclose(gate.gate_scores(out, feats), out)
    gate.nets["quality"][-1].bias.data.fill_(-20.0)
    with torch.no_grad():
        low = gate.gate_scores(out, feats)
    assert torch.allclose(low, torch.full_like(out, REJECT), atol=1e-4)
    # after the scale map, a rejected text lies below a real one the regressor put far under the scale
    assert float(bounded(low[0, 0])) < float(bounded(torch.tensor([-2.0])))


def test_gate_reads_no_excluded_feature_and_old_gates_read_all():
    n = gate_size("ref-free")  # one context block (the source), then the candidate's own features
    names = list(CONTEXT_FEATURES) + list(CANDIDATE_FEATURES)
    mask = gate_mask(n)
    assert [names[i] for i in range(n) if mask[i] == 0] == [x for x in names if x in EXCLUDED_FEATURES]
    assert int(mask.sum()) == n - len(EXCLUDED_FEATURES)
    with pytest.raises(ValueError):
        gate_mask(n + 1)
    gate = AcceptabilityGate(n, ["quality"])
    torch.manual_seed(0)
    x = torch.randn(4, n)
    moved = x.clone()
    moved[:, names.index("order_inversions")] += 5.0
    moved[:, names.index("pronoun_first")] -= 5.0
    assert torch.equal(gate.probabilities(x), gate.probabilities(moved))
    moved[:, names.index("log_words")] += 5.0  # a feature the gate reads
    assert not torch.equal(gate.probabilities(x), gate.probabilities(moved))
    # a gate saved before the mask existed was fitted on every feature: it loads reading all of them
    state = {k: v for k, v in gate.state_dict().items() if k != "mask"}
    old = AcceptabilityGate(n, ["quality"])
    old.load_state_dict(state)
    assert torch.equal(old.mask, torch.ones(n))


def test_fit_gate_learns_on_the_features_scoring_reads():
    """The classifier is fitted on masked features, so its threshold is the lower of the 1% quantile of the
    accepted texts' and the 99% quantile of the rejected texts' very probabilities scoring computes (a fit on
    unmasked features would put it elsewhere)."""
    from csem.model.acceptability import contexts_of, fit_gate
    from csem.model.features import pair_features

    recs = _records() + [dict(r, id=r["id"] + "2", candidate=r["candidate"].replace(".", " today.")) for r in _records()]
    gate = AcceptabilityGate(gate_size("ref-free"), ["coherence"])
    report = fit_gate(gate, recs, "ref-free", seed=1)
    assert report["excluded_features"] == list(EXCLUDED_FEATURES)
    accepted, rejected = gate_examples(recs, ["coherence"], seed=1)
    feats = lambda rows: torch.tensor([pair_features("lexical", r["candidate"], contexts_of(r, "ref-free"))  # noqa: E731
                                       for r in rows])
    with torch.no_grad():
        theta = torch.minimum(torch.quantile(gate.probabilities(feats(accepted))[:, 0], report["quantile"]),
                              torch.quantile(gate.probabilities(feats(rejected["coherence"]))[:, 0],
                                             report["rejected_quantile"]))
    assert float(gate.threshold[0]) == pytest.approx(float(theta), rel=1e-5, abs=1e-7)


@pytest.fixture(scope="module")
def gated_student(shared_data, tmp_path_factory, small_model):
    """A MiniLM student (top layer trained, overlap features, the gate on: csem train's defaults but one
    layer and one epoch) on real SummEval system summaries with their expert ratings as labels."""
    from synthetic_records import summeval_system_records

    from csem.model import ModelConfig, TrainConfig, fit

    recs = summeval_system_records(shared_data, range(0, 12))
    out = tmp_path_factory.mktemp("gated") / "student"
    model = fit(recs, "human.coherence", "ref-free", out_dir=out, config=ModelConfig(name="g", **small_model),
                train_config=TrainConfig(max_epochs=1, train_layers=1, seed=4, contrast_per_record=0),
                label_range=(1, 5))
    return model, out, summeval_system_records(shared_data, range(40, 52))


@pytest.mark.slow
def test_gate_ranks_degenerate_candidates_below_real_ones_after_save_and_load(gated_student):
    from csem.data.contrasts import sanity_cases
    from csem.model import EvaluationModel

    model, folder, test = gated_student
    card = json.loads((folder / "metric_card.json").read_text())
    acc = card["acceptability"]
    assert acc["accepted"] >= 100 and acc["rejected"]["coherence"] > 3 * acc["accepted"]
    assert acc["train_accuracy"]["coherence"] > 0.9 and 0 < acc["threshold"]["coherence"] < 1
    assert acc["excluded_features"] == list(EXCLUDED_FEATURES)
    loaded = EvaluationModel.load(folder)
    assert loaded.module.gate is not None and loaded.module.gate.is_fitted
    real = _by_id(loaded.predict(test, precision="fp32"), "coherence")
    assert real == pytest.approx(_by_id(model.predict(test, precision="fp32"), "coherence"), abs=1e-5)
    assert all(1.0 <= v <= 5.0 for v in real.values())
    by_doc: dict[str, list[dict]] = {}
    for r in test:
        by_doc.setdefault(r["doc_id"], []).append(r)
    ungated = EvaluationModel.load(folder)
    ungated.module.gate = None  # the regressor alone, for comparison
    raw = _by_id(ungated.predict(test, precision="fp32"), "coherence")
    kinds = ("repeated_token", "truncated", "words_shuffled", "one_token")
    below, below_raw = dict.fromkeys(kinds, 0), dict.fromkeys(kinds, 0)
    for d, rows in by_doc.items():
        cases = sanity_cases(rows[0]["candidate"], source=rows[0]["source"], seed=0, key=d)
        deg = [{"id": f"{d}~{c}", "source": rows[0]["source"], "candidate": cases[c]} for c in kinds if c in cases]
        for m, real_, count in ((loaded, real, below), (ungated, raw, below_raw)):
            for rid, score in _by_id(m.predict(deg, precision="fp32"), "coherence").items():
                count[rid.split("~")[1]] += score < min(real_[r["id"]] for r in rows)
    n = len(by_doc)
    assert sum(below.values()) >= sum(below_raw.values()) + n, (below, below_raw)  # the gate does it
    assert below["repeated_token"] == n and below["one_token"] >= n - 1
    assert below["truncated"] >= n - 2 and below["words_shuffled"] >= n - 2, below
    # the gate leaves most real candidates' scores exactly as the regressor gave them
    same = sum(abs(raw[k] - real[k]) < 1e-6 for k in raw)
    assert same >= 0.8 * len(raw)


@pytest.mark.slow
def test_folders_saved_before_the_gate_load_without_it(gated_student, tmp_path):
    import shutil

    from csem.model import EvaluationModel

    _, folder, test = gated_student
    old = tmp_path / "old"
    shutil.copytree(folder, old)
    cfg = json.loads((old / "config.json").read_text())
    cfg.pop("acceptability_gate")
    (old / "config.json").write_text(json.dumps(cfg))
    from safetensors.torch import load_file, save_file

    state = {k: v for k, v in load_file(str(old / "model.safetensors")).items() if not k.startswith("gate.")}
    save_file(state, str(old / "model.safetensors"))
    loaded = EvaluationModel.load(old)
    assert loaded.module.gate is None
    assert len(loaded.predict(test[:3], precision="fp32").ids) == 3
