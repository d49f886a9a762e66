"""Stage ``limits``: what limits a text-only student on the standard split (knowing the system,
telling the system from the text, the learning curves extrapolated to the system prior)."""

from __future__ import annotations

import statistics

from harness import ASPECTS, log

from .common import PRIOR, Bench, log_fit, row_of, system_prior


SYS_EXPERT = "system means of the EXPERT ratings on the training documents (what knowing the system alone gives)"
SYS_TEXT = "system prior through a text classifier of the system (lexical features; no system id at test time)"


def stage_limits(b: Bench, train, test) -> None:
    """What limits a text-only student on the standard split (see the module docstring): writes
    ``limits`` (classifier accuracy, curve fits) and two diagnostic rows in ``limits.correlations``."""
    import numpy as np
    import torch

    from csem.model.features import lexical_features

    lim = b.data["limits"] = {"correlations": {}}
    rows = lim["correlations"]
    # 1. knowing the system: each test summary scored by its system's mean expert rating on the training docs
    te = [dict(r) for r in test]
    system_prior(train, te, "metric.sysexp", label="human")
    rows[SYS_EXPERT] = row_of(te, "metric.sysexp")
    # 2. telling the system from the text: multinomial logistic regression (L2, L-BFGS) on the
    # standardised lexical features of (summary, article), fitted on the training documents only
    systems = sorted({r["system_id"] for r in train})
    x_tr = np.array([lexical_features(r["candidate"], [r["source"]]) for r in train])
    x_te = np.array([lexical_features(r["candidate"], [r["source"]]) for r in test])
    mu, sd = x_tr.mean(0), x_tr.std(0) + 1e-6
    xt, xe = (torch.tensor((x - mu) / sd, dtype=torch.float64) for x in (x_tr, x_te))
    y = torch.tensor([systems.index(r["system_id"]) for r in train])
    lin = torch.nn.Linear(xt.shape[1], len(systems)).double()
    torch.nn.init.zeros_(lin.weight)  # a fixed start: the objective is strictly convex, the result reproducible
    torch.nn.init.zeros_(lin.bias)
    opt = torch.optim.LBFGS(lin.parameters(), max_iter=5000, tolerance_grad=1e-9, tolerance_change=1e-12,
                            line_search_fn="strong_wolfe")
    l2 = 1e-2

    def closure():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(lin(xt), y) + l2 * lin.weight.pow(2).sum()
        loss.backward()
        return loss

    for _ in range(20):  # restarts of L-BFGS's history until the loss stops moving
        before = float(closure())
        if abs(before - float(opt.step(closure))) < 1e-12 and _:
            break
    with torch.no_grad():
        prob = torch.softmax(lin(xe), 1).numpy()
    truth = np.array([systems.index(r["system_id"]) if r["system_id"] in systems else -1 for r in test])
    acc = float((prob.argmax(1) == truth).mean())
    te2 = [dict(r) for r in test]
    for a in ASPECTS:
        means = np.array([statistics.fmean(float(r[f"judge.{a}"]) for r in train
                                           if r["system_id"] == s and r.get(f"judge.{a}") is not None)
                          for s in systems])
        for r, p in zip(te2, prob @ means):  # the prior's expectation under the classifier's posterior
            r[f"metric.systext.{a}"] = float(p)
    rows[SYS_TEXT] = row_of(te2, "metric.systext")
    lim["system_classifier"] = {"accuracy": acc, "chance": 1 / len(systems), "systems": len(systems),
                                "features": int(xt.shape[1]), "l2": l2, "test_rows": len(test)}
    log(f"limits: system from text, accuracy {acc:.3f}; prior through it "
        f"{rows[SYS_TEXT]['average']['spearman']:.3f}; expert system means {rows[SYS_EXPERT]['average']['spearman']:.3f}")
    # 3. the learning curves extrapolated: Spearman = a + b ln(docs), docs at which it would reach the prior
    prior = (b.data["correlations"].get(PRIOR) or {}).get("average", {}).get("spearman")
    fits = {}
    for name in dict.fromkeys(e.get("recipe") for e in b.data.get("learning_curve", [])):
        pts = [(e["docs"], e["spearman"]) for e in b.data["learning_curve"] if e.get("recipe") == name]
        if len(pts) < 3 or prior is None:
            continue
        f = log_fit(pts, prior)
        fits[name] = {"intercept": f["intercept"], "slope_per_ln_doc": f["slope_per_ln_doc"], "points": pts,
                      "docs_to_reach_prior": f["docs_to_target"]}
    lim["curve_fits"] = fits
    b.save()
