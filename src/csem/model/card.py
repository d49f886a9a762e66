"""Metric card of a trained evaluation model (``metric_card.json`` + ``metric_card.md``).

After model cards (Mitchell et al. 2019) and bert_score's reproducibility hash: what the metric
was distilled from (judge, rubric), on which data (sha256 of the training records and their size),
how well it agreed with the dev labels and human scores, the csem version, and its intended use
and limits.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping, Sequence

from csem.data.jsonio import json_safe, write_json
from csem.data.records import references_of
from csem.model.config import ModelConfig, TrainConfig


def data_hash(records: Sequence[Mapping[str, Any]], label_cols: Sequence[str]) -> str:
    """sha256 (hex, 64 chars) of the training records' texts and labels, independent of record order.

    Hashed per record: id, source, candidate, references and the label columns, as canonical JSON
    lines sorted by their own text.
    """
    lines = sorted(json.dumps([str(r.get("id")), r.get("source"), r.get("candidate"), references_of(r),
                               [r.get(c) for c in label_cols]], ensure_ascii=False, sort_keys=True)
                   for r in records)
    h = hashlib.sha256()
    for line in lines:
        h.update(line.encode("utf-8") + b"\n")
    return h.hexdigest()


def settings_hash(model: Any, aspects: Sequence[str] | None = None, *, precision: str = "auto") -> str:
    """What produced a set of scores, in one line (after bert_score's reproducibility hash, Zhang et
    al. 2020, ``bert_score.utils.get_hash``): the metric's name and aspects, its mode, the sha256
    prefix of its weights and config (`csem.model.scoring.model_fingerprint`), the precision
    it ran at, and the csem, torch and transformers versions, e.g.
    ``csem(coherence)_ref-free_model=3f2a9c1b7d4e_fp32_version=0.1.0(torch=2.13.0,transformers=5.0.0)``.

    Equal hashes mean the same model, settings and library versions, so the same scores up to the
    hardware's floating-point kernels (see the reproducibility guide).

    Args:
        model: a loaded [`csem.model.EvaluationModel`][].
        aspects: the aspects scored (default: every output aspect). precision: as given to scoring;
            ``auto`` is resolved for the model's device.
    """
    import torch
    import transformers

    import csem
    from csem.model.inference import resolve_precision
    from csem.model.scoring import model_fingerprint, output_aspects

    names = list(aspects) if aspects else list(output_aspects(model))
    try:
        device = next(model.module.parameters()).device
    except StopIteration:  # pragma: no cover - a model without parameters
        device = torch.device("cpu")
    dtype = resolve_precision(precision, device)
    prec = {None: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}.get(dtype, str(dtype))
    return (f"{model.config.name}({'+'.join(names)})_{model.config.mode}_model={model_fingerprint(model)[:12]}"
            f"_{prec}_version={csem.__version__}(torch={torch.__version__},transformers={transformers.__version__})")


def build_card(
    config: ModelConfig,
    train_config: TrainConfig,
    *,
    train_records: Sequence[Mapping[str, Any]],
    dev_records: Sequence[Mapping[str, Any]] | None,
    validation: Mapping[str, Any] | None,
    history: Sequence[Mapping[str, Any]] = (),
    judge: str | None = None,
    rubric: str | None = None,
    notes: str | None = None,
    label_range_declared: bool = True,
    epochs_run: int | None = None,
) -> dict:
    """The card as a JSON-ready dict (NaN correlations become null)."""
    import csem

    from csem.model.validation import describe_label_counts, label_counts

    cols = [s.column for s in config.labels]
    counts = label_counts(train_records, cols)
    docs = {r.get("doc_id") for r in train_records if r.get("doc_id") is not None}
    needs = {"ref-free": "source and candidate", "ref-based": "source, candidate and reference(s)",
             "fluency": "candidate only", "fluency-ref": "candidate and reference(s)"}[config.mode]
    limits = [
        f"Scores imitate the labels in {', '.join(cols)}"
        + (f" (judge: {judge})" if judge else "") + "; they inherit that judge's biases and errors.",
        "Trained on the data hashed below; expect lower agreement on other domains, languages or text "
        "lengths (texts are truncated to max_length tokens).",
        "Scores are on the label scale but not clipped: values slightly outside it can occur."
        if config.loss != "pairwise" else
        "Trained with a pairwise ranking loss: scores order candidates (higher is better) but are not "
        "on the label scale.",
    ]
    if not label_range_declared:
        limits.append("The label range was inferred from the training labels, not declared.")
    return json_safe({
        "name": config.name,
        "csem_version": csem.__version__,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "distilled_from": {"judge": judge, "rubric": rubric, "label_columns": cols},
        "aspects": [s.model_dump() for s in config.labels],
        "inputs": needs,
        "model": config.model_dump(),
        "training": {
            "config": train_config.model_dump(),
            "data_sha256": data_hash(train_records, cols),
            "n_records": len(train_records),
            # rows with and without a label (none at all: trained from preference pairs instead)
            "labels": {**counts, "summary": describe_label_counts(counts)} if any(counts["labelled"].values())
            else None,
            "n_documents": len(docs) or None,
            "n_dev_records": len(dev_records) if dev_records else 0,
            "epochs_run": epochs_run if epochs_run is not None else (len(history) or None),
        },
        "validation": dict(validation) if validation else None,
        "validation_history": list(history),
        "intended_use": (f"Fast, reference-{'based' if config.mode in ('ref-based', 'fluency-ref') else 'free'} "
                         f"scoring of generated text ({needs}) on the aspects "
                         f"{', '.join(config.aspects)}, as a stand-in for the LLM judge it was distilled from: "
                         "ranking N-best lists, rewards for MRT, and large evaluations."),
        "limits": limits,
        "notes": notes,
    })


def render_markdown(card: Mapping[str, Any]) -> str:
    """Markdown rendering of `build_card`'s dict."""
    t = card["training"]
    lines = [f"# Metric card: {card['name']}", "",
             f"csem {card['csem_version']}, created {card['created']}.", "", *_trust_lines(card),
             "## Distilled from", "",
             f"- judge: {card['distilled_from']['judge'] or 'not recorded'}",
             f"- rubric: {card['distilled_from']['rubric'] or 'not recorded'}",
             f"- label columns: {', '.join(card['distilled_from']['label_columns'])}", "",
             "## Model", "",
             f"- encoder: `{card['model']['encoder']}`, pooling `{card['model']['pooling']}`, "
             f"mode `{card['model']['mode']}` (inputs: {card['inputs']}), loss `{card['model']['loss']}`",
             "- aspects: " + ", ".join(f"{a['aspect']} [{a['min']:g}, {a['max']:g}]" for a in card["aspects"]), "",
             "## Training data", "",
             f"- sha256: `{t['data_sha256']}`",
             f"- {t['n_records']} records" + (f" over {t['n_documents']} documents" if t["n_documents"] else "")
             + f"; {t['n_dev_records']} dev records; epochs run: {t['epochs_run']}"]
    if t.get("labels"):
        lines.append(f"- labels: {t['labels']['summary']}")
    lines.append("")
    val = card.get("validation")
    lines += ["## Validation (best epoch)", ""]
    if val:
        lines += [f"Level: {val['level']}, epoch {val.get('epoch')}.", "",
                  "| aspect | vs | Kendall tau-b | Spearman | Pearson |", "| --- | --- | --- | --- | --- |"]
        fmt = lambda v: "n/a" if v is None else f"{v:.3f}"  # noqa: E731
        for aspect, entry in val["aspects"].items():
            for target in ("label", "human"):
                if entry.get(target):
                    e = entry[target]
                    lines.append(f"| {aspect} | {target} | {fmt(e['kendall'])} | {fmt(e['spearman'])} | {fmt(e['pearson'])} |")
    else:
        lines.append("No dev set was given: no validation figures.")
    gate = card.get("acceptability")
    if gate:
        lines += ["", "## Acceptability gate", "",
                  f"Learned from {gate['accepted']} training candidates and references (accepted) and rule-made "
                  "degenerate texts (rejected: a few words, one word x 100, cut mid-sentence, words shuffled, another "
                  "source's candidate; for relevance also the source copied); a text it rejects scores below the real "
                  "candidates (csem.model.acceptability).", "",
                  "| aspect | rejected texts | threshold | training accuracy |", "| --- | --- | --- | --- |"]
        lines += [f"| {a} | {n} | {gate['threshold'][a]:.3f} | {gate['train_accuracy'][a]:.3f} |"
                  for a, n in gate["rejected"].items()]
    lines += ["", "## Intended use", "", card["intended_use"], "", "## Limits", ""]
    lines += [f"- {x}" for x in card["limits"]]
    if card.get("notes"):
        lines += ["", "## Notes", "", card["notes"]]
    return "\n".join(lines) + "\n"


def _trust_lines(card: Mapping[str, Any]) -> list[str]:
    """The card's opening sections when a run measured them: the verdict ([`csem.report.verdict`][]) and
    the judge's repeatability ([`csem.judge.repeat`][])."""
    lines: list[str] = []
    v = card.get("verdict")
    if v:
        lines += ["## Verdict", "", f"**{v['headline']}**", "", v["text"], "", f"({v.get('source', '')})", ""]
    rep = card.get("judge_repeatability")
    if rep:
        lines += ["## The judge's repeatability", "",
                  f"The judge scored {rep['candidates']} candidates of {rep['sources']} sources a second time "
                  f"({rep['rendering']}); summary-level Spearman of the two scores (r) and the attenuation bound "
                  "sqrt(r), the most a student can agree with the judge:", "",
                  "| label | r | 95% CI | sqrt(r) | dataset-level r |", "| --- | --- | --- | --- | --- |"]
        fmt = lambda x: "n/a" if x is None else f"{x:.3f}"  # noqa: E731
        for col, f in rep["columns"].items():
            s, d = f["summary"], f["dataset"]
            ci = "n/a" if not s.get("ci") else f"{s['ci'][0]:.3f} to {s['ci'][1]:.3f}"
            lines.append(f"| {col} | {fmt(s['r'])} | {ci} | {fmt(s.get('sqrt_r'))} | {fmt(d['r'])} |")
        lines.append("")
    return lines


def write_card(folder: Path, card: Mapping[str, Any]) -> None:
    """Write ``metric_card.json`` and ``metric_card.md`` into ``folder``."""
    folder = Path(folder)
    write_json(folder / "metric_card.json", card)
    (folder / "metric_card.md").write_text(render_markdown(card), encoding="utf-8")
