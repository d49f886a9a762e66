"""How much of the teacher's order can any student learn from what a bi-encoder sees? (issue 23)

The teacher-scale benchmark (``bench_teacher_scale.py``) finds the student at the level of the
candidate's length. This script asks whether that is the student's limit or the teacher's: it fits
models far cheaper than the student on richer hand-made views of each (source, candidate) pair and
measures them the same way (summary-level Spearman / Kendall with the teacher on the same held-out test
pool, the same training pool):

* features: the student's five overlap features (:func:`csem.model.features.overlap_features`), word
  count, sentence count, ROUGE-1/2/L precision, recall and F1 of the candidate against the source
  (``rouge-score``), and the cosine between the all-MiniLM-L6-v2 mean-pooled embeddings of source and
  candidate (the student's own encoder, frozen);
* models: least squares on all features; scikit-learn's ``HistGradientBoostingRegressor`` on the
  teacher's score; the same on the score centred per source (summary-level correlation only sees
  within-source order). Gradient boosting runs without early stopping and is deterministic;
* the student's own view, frozen: ridge regression (scikit-learn) on the per-source centred score from
  the candidate's frozen MiniLM embedding (384 numbers) plus the five overlap features, and the same with
  COMET's pair features of source and candidate embeddings (source, candidate, product, absolute
  difference; Rei et al. 2020); the ridge penalty is chosen by 3-fold cross-validation grouped by source
  on the TRAINING pool (summary-level Spearman), never on the test pool. ``--encoders minilm,mpnet``
  adds the same two ridges on the frozen all-mpnet-base-v2 (768 numbers): does a larger encoder's view
  hold more of the teacher's order? (its cross-validation figure is reported beside the test figure).

``--extended --extension-form hf-bf16`` uses the training pool of ``bench_teacher_scale.py --extended``
(the pool's judged candidates followed by the rule-made extension, labelled by the GPU run's form); the
cross-validation then scores only the real candidates of each held-out fold, as the test pool holds only
real ones.

If these reach well above length, the teacher's order is learnable from such views and the student
falls short; if they stay near it, more labels will not lift the student either.

Run:  python benchmarks/bench_teacher_ceiling.py [--threads 2] [--encoders minilm,mpnet]
      [--extended --extension-form hf-bf16 --out results/teacher_ceiling_extended]
      [--provenance teacher_scale_full_extension]  (the pool of that result: all 16,960 labels)
Out:  benchmarks/results/teacher_ceiling.{json,md}
"""

from __future__ import annotations

import json
import time
from collections import defaultdict

from harness import RESULTS, fmt, log, machine, markdown_table, now, parser, setup, write_results

from bench_teacher_scale import correlations, load

VIEWS = ("novel unigram share", "novel bigram share", "novel trigram share", "trigram repetition", "log length",
         "words", "sentences", *(f"rouge{k} {m}" for k in ("1", "2", "L") for m in ("precision", "recall", "f1")),
         "MiniLM cosine(source, candidate)")


#: display names of the frozen encoders (``csem.assets.resolve_encoder`` names)
ENCODER_NAMES = {"minilm": "MiniLM", "mpnet": "mpnet"}


def embed(texts: list[str], threads: int, encoder: str = "minilm"):
    """Mean-pooled, L2-normalised embeddings (N, D) of the first 256 tokens of each text by a frozen
    encoder (``minilm``: all-MiniLM-L6-v2, D = 384; ``mpnet``: all-mpnet-base-v2, D = 768), in the order
    of ``texts``. Texts are batched by length (a batch pads to its longest text; mixing the 256-token
    sources into batches of short candidates made every batch pay for 256 tokens)."""
    import numpy as np
    import torch
    from transformers import AutoModel, AutoTokenizer

    from csem.assets import resolve_encoder

    torch.set_num_threads(threads)
    path = resolve_encoder(encoder)
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModel.from_pretrained(path, trust_remote_code=False).eval()
    order = sorted(range(len(texts)), key=lambda k: len(texts[k]))
    out = []
    with torch.inference_mode():
        for i in range(0, len(order), 32):
            batch = tok([texts[k] for k in order[i:i + 32]], padding=True, truncation=True, max_length=256,
                        return_tensors="pt")
            h = model(**batch).last_hidden_state
            m = batch["attention_mask"].unsqueeze(-1).float()
            v = (h * m).sum(1) / m.sum(1)
            out.append(torch.nn.functional.normalize(v, dim=-1))
    vecs = torch.cat(out).numpy() if out else np.zeros((0, model.config.hidden_size), dtype=np.float32)
    restored = np.empty_like(vecs)
    restored[order] = vecs
    return restored


def centre(y, groups: list[str]):
    """``y`` (N,) or (N, D) minus the mean of its source's rows (summary-level correlation sees only this)."""
    import numpy as np

    y = np.array(y, dtype=float)
    by_src = defaultdict(list)
    for i, g in enumerate(groups):
        by_src[g].append(i)
    for idx in by_src.values():
        y[idx] -= y[idx].mean(axis=0)
    return y


def summary_spearman(pred, y, groups: list[str]) -> float:
    """Summary-level Spearman of ``pred`` with ``y`` (within each source, averaged over sources; sources
    where a side is constant are skipped) through csem's evaluator: the selection criterion of
    :func:`ridge_cv`."""
    from csem.meta.correlation import column_correlations

    rows = [{"doc_id": g, "metric.p": float(p), "target": float(t)} for g, p, t in zip(groups, pred, y)]
    return column_correlations(rows, "metric.p", "target", levels=("summary",), methods=("spearman",))[
        ("summary", "spearman")].value


def ridge_cv(x_tr, y, groups: list[str], x_te, alphas=(0.1, 1.0, 10.0, 100.0), folds: int = 3, scored=None):
    """Ridge on the per-source centred score, its penalty chosen by ``folds``-fold cross-validation
    grouped by source on the training rows only (``scored``: a boolean mask (N,) of the rows a held-out
    fold is scored on; default all); returns ``(test predictions, chosen alpha, cv scores)``."""
    import numpy as np
    from sklearn.linear_model import Ridge
    from sklearn.model_selection import GroupKFold

    xc, yc = centre(x_tr, groups), centre(y, groups)
    g = np.asarray(groups)
    cv = {}
    for a in alphas:
        vals = []
        for tr, ho in GroupKFold(n_splits=folds).split(xc, yc, g):
            if scored is not None:
                ho = ho[np.asarray(scored)[ho]]
            pred = Ridge(alpha=a).fit(xc[tr], yc[tr]).predict(xc[ho])
            vals.append(summary_spearman(pred, yc[ho], list(g[ho])))
        cv[a] = float(np.mean(vals))
    best = max(cv, key=cv.get)
    return Ridge(alpha=best).fit(xc, yc).predict(x_te), best, cv


def featurise(records: list[dict], emb_cache: dict, threads: int):
    """(N, len(VIEWS)) array of the views above."""
    import numpy as np
    from rouge_score import rouge_scorer

    from csem.data.contrasts import split_sentences
    from csem.model.features import overlap_features

    texts = sorted({t for r in records for t in (r["source"], r["candidate"]) if t not in emb_cache})
    if texts:
        for t, v in zip(texts, embed(texts, threads)):
            emb_cache[t] = v
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
    rows = []
    for r in records:
        x = list(overlap_features(r["candidate"], [r["source"]]))
        x += [len(r["candidate"].split()), len(split_sentences(r["candidate"]))]
        sc = scorer.score(r["source"], r["candidate"])
        for k in ("rouge1", "rouge2", "rougeL"):
            x += [sc[k].precision, sc[k].recall, sc[k].fmeasure]
        x.append(float(emb_cache[r["source"]] @ emb_cache[r["candidate"]]))
        rows.append(x)
    return np.asarray(rows, dtype=float)


def provenance(name: str, extended: bool, extension_form: str | None) -> dict:
    """The teacher-scale result ``results/<name>.json`` whose largest pool and students the rows stand beside.

    Raises:
        ValueError: the file is missing or is not a teacher-scale result, or its students trained on another
            pool (``--extended`` / ``--extension-form``) than the one asked for.
    """
    path = RESULTS / f"{name}.json"
    try:
        prov = json.loads(path.read_text())
        meta, column = prov["meta"], prov["teacher"]["column"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{path} is not a teacher-scale result ({e!r})") from None
    pool = (bool(meta.get("extended")), meta.get("extension_form"))
    if pool != (bool(extended), extension_form):
        raise ValueError(f"its students trained on the pool of --extended {pool[0]}, --extension-form {pool[1]}; "
                         f"this call asks for --extended {bool(extended)}, --extension-form {extension_form}")
    return prov


def main() -> None:
    ap = parser(__doc__.split("\n")[0], out="teacher_ceiling", threads=2, seed=None)
    ap.add_argument("--encoders", default="minilm",
                    help=f"frozen encoders of the ridge rows, comma-separated ({', '.join(ENCODER_NAMES)})")
    ap.add_argument("--extended", action="store_true",
                    help="the training pool of bench_teacher_scale.py --extended (with the rule-made extension)")
    ap.add_argument("--extension-form", default=None, help="with --extended: the extension's labels (e.g. hf-bf16)")
    ap.add_argument("--provenance", default=None,
                    help="the teacher-scale result (in results/, without .json) whose largest pool and students the "
                         "rows stand beside; default teacher_scale, or teacher_scale_extended with --extended")
    args = ap.parse_args()
    encoders = [e for e in args.encoders.split(",") if e]
    unknown = [e for e in encoders if e not in ENCODER_NAMES]
    if unknown:
        ap.error(f"--encoders: unknown {', '.join(unknown)} (known: {', '.join(ENCODER_NAMES)})")
    from csem.assets import AssetError, resolve_encoder

    for enc in encoders:  # before minutes of featurising: a missing encoder package is a one-line error
        try:
            resolve_encoder(enc)
        except AssetError as e:
            ap.error(f"--encoders {enc}: {e}")
    name = args.provenance or f"teacher_scale{'_extended' if args.extended else ''}"
    try:
        prov = provenance(name, args.extended, args.extension_form)
    except ValueError as e:
        ap.error(f"--provenance {name}: {e}")
    setup(args)
    import numpy as np
    from sklearn.ensemble import HistGradientBoostingRegressor

    t0 = time.perf_counter()
    col = prov["teacher"]["column"]
    test, train, _ = load(col, extended=args.extended, extension_form=args.extension_form)
    largest = max((c["labels"] for c in prov.get("curve", [])), default=len(train))
    if largest > len(train):
        ap.error(f"--provenance {name}: its students trained on {largest} labels; this pool holds {len(train)}")
    train = train[:largest]  # the student's largest pool (nested pools: the first N judged training candidates)
    real = [not r["id"].startswith("ext/") for r in train]
    log(f"{len(train)} training, {len(test)} test candidates; featurising")
    cache: dict = {}
    x_tr, x_te = featurise(train, cache, args.threads), featurise(test, cache, args.threads)
    y = np.array([r[col] for r in train])
    centred = centre(y, [r["doc_id"] for r in train])
    preds = {}
    a = np.c_[x_tr, np.ones(len(train))]
    w, *_ = np.linalg.lstsq(a, y, rcond=None)
    preds["least squares, all views"] = np.c_[x_te, np.ones(len(test))] @ w
    for name, target in (("gradient boosting on the score", y), ("gradient boosting on the per-source centred score", centred)):
        gb = HistGradientBoostingRegressor(max_iter=300, learning_rate=0.05, max_leaf_nodes=15, early_stopping=False,
                                           random_state=0)
        preds[name] = gb.fit(x_tr, target).predict(x_te)
    # the student's view, frozen: candidate (and source) embeddings with the overlap features
    groups = [r["doc_id"] for r in train]
    ridge = {}
    for enc in encoders:
        vecs = cache
        if enc != "minilm":  # featurise embedded every text with MiniLM
            t_enc = time.perf_counter()
            texts = sorted({t for r in train + test for t in (r["source"], r["candidate"])})
            vecs = dict(zip(texts, embed(texts, args.threads, enc)))
            log(f"{enc}: {len(texts)} texts embedded in {time.perf_counter() - t_enc:.0f} s")
        emb = {}
        for part, recs, x in (("train", train, x_tr), ("test", test, x_te)):
            c = np.array([vecs[r["candidate"]] for r in recs])
            s = np.array([vecs[r["source"]] for r in recs])
            emb[part] = {"candidate": np.c_[c, x[:, :5]], "pair": np.c_[s, c, s * c, np.abs(s - c), x[:, :5]]}
        label = ENCODER_NAMES[enc]
        for key, name in (("candidate", f"ridge, frozen {label} candidate embedding + overlap features"),
                          ("pair", f"ridge, frozen {label} pair features (source, candidate, product, absolute "
                                   "difference) + overlap features")):
            preds[name], alpha, cv = ridge_cv(emb["train"][key], y, groups, emb["test"][key],
                                              scored=real if args.extended else None)
            ridge[name] = {"alpha": alpha, "cv_summary_spearman": cv}
            log(f"{name}: alpha {alpha} (cv {cv})")
    for k, view in enumerate(VIEWS):
        preds[f"view alone: {view}"] = x_te[:, k]
    res = {"meta": {"date": now(), "machine": machine(), "threads": args.threads, "train": len(train),
                    "test": len(test), "teacher": prov["teacher"], "views": list(VIEWS), "encoders": encoders,
                    "extended": args.extended, "extension_form": args.extension_form,
                    "rule_made": len(train) - sum(real)}, "models": {}}
    for name, p in preds.items():
        rows = [dict(r, **{"metric.x": float(v)}) for r, v in zip(test, p)]
        res["models"][name] = correlations(rows, "metric.x", col)
    curve = {c["labels"]: c for c in prov.get("curve", [])}
    second = {c["labels"]: c for c in prov.get("contrast_curve", [])}
    res["student"] = {"labels": max(curve) if curve else None,
                      "default": curve[max(curve)] if curve else None,
                      "second": second.get(max(curve)) if curve else None}
    res["ridge"] = ridge
    res["meta"]["seconds"] = time.perf_counter() - t0
    md = ["# What can be learnt of the teacher's order from simple views (issue 23)", "",
          f"Teacher `{prov['teacher']['judge']}` ({prov['teacher']['rubric']}); {len(train)} training labels, "
          f"{len(test)} held-out test candidates (the teacher-scale pools). {res['meta']['date']}, {machine()}.", ""]
    if args.extended:
        md += [f"Training pool: the pool's {sum(real)} judged candidates and {len(train) - sum(real)} rule-made ones "
               f"(labels of form `{args.extension_form or 'the pool'}`); the ridges' cross-validation scores only "
               "the real candidates of each held-out fold.", ""]
    table = [[n, fmt(v["summary"]["spearman"]), fmt(v["summary"]["kendall"]), fmt(v["dataset"]["spearman"])]
             for n, v in res["models"].items() if not n.startswith("view alone")]
    st = res["student"]
    if st["default"]:
        table.append([f"student, csem train defaults ({st['labels']} labels, mean of {st['default']['seeds']} seeds)",
                      fmt(st["default"]["spearman"]), fmt(st["default"]["summary_kendall"]),
                      fmt(st["default"]["dataset_spearman"])])
    if st["second"]:
        recipe = (prov.get("contrast_recipe") or {}).get("name", "the second recipe")
        table.append([f"student, {recipe} ({st['labels']} labels)", fmt(st["second"]["spearman"]),
                      fmt(st["second"]["summary_kendall"]), fmt(st["second"]["dataset_spearman"])])
    md += [markdown_table(table, ["model", "summary Spearman", "summary Kendall", "dataset Spearman"]), "",
           "Each view alone (signed):", ""]
    md += [markdown_table([[n.split(": ", 1)[1], fmt(v["summary"]["spearman"]), fmt(v["dataset"]["spearman"])]
                           for n, v in res["models"].items() if n.startswith("view alone")],
                          ["view", "summary Spearman", "dataset Spearman"]),
           "", "Ridge penalty chosen by 3-fold cross-validation grouped by source on the training pool "
           "(summary Spearman at each penalty; never the test pool):", "",
           markdown_table([[n, r["alpha"], fmt(r["cv_summary_spearman"][r["alpha"]]),
                            ", ".join(f"{a}: {fmt(v)}" for a, v in r["cv_summary_spearman"].items()),
                            fmt(res["models"][n]["summary"]["spearman"])] for n, r in ridge.items()],
                          ["model", "penalty", "CV at the penalty", "CV per penalty", "test"]),
           "", f"Total {res['meta']['seconds'] / 60:.1f} min."]
    write_results(args.out, res, md)
    log(f"wrote {args.out}.json/.md; " + "; ".join(f"{n} {fmt(v['summary']['spearman'])}" for n, v in res["models"].items()
                                                   if not n.startswith("view alone")))


if __name__ == "__main__":
    main()
