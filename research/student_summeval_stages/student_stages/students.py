"""Stages ``students`` (the recipes trained on all training documents, scored on the test
documents), ``disjoint`` (the system-disjoint split) and ``curve`` (learning curve)."""

from __future__ import annotations

import time

from harness import ASPECTS, log

from .common import (RECIPES, TEACHER, Bench, configs, cv_epochs, disjoint_systems, lexical_baselines, row_of, split_docs,
                     student_name, train_student, update_verdict)


def stage_students(b: Bench, train, test) -> None:
    """Students on the standard split (``--students``, the ``--variants`` of the chosen recipe, ``--ceiling``)."""
    args = b.args
    names = [n for n in ([n.strip() for n in args.students.split(";") if n.strip()] if args.students else list(b.cv["recipes"]) or list(RECIPES))]
    for name in names:
        label = f"student {student_name(name)} (GPT-4 labels, {cv_epochs(b, name)} epochs from CV)"
        if args.resume and label in b.data["correlations"]:
            continue
        cfg, tc = configs(name, args, cv_epochs(b, name))
        model, secs = train_student(train, [f"judge.{a}" for a in ASPECTS], cfg, tc)
        t0 = time.perf_counter()
        scored = model.predict(test, name="s", batch_size=32).records
        b.data["correlations"][label] = row_of(scored, "metric.s")
        b.data["runs"][label] = {"train_s": secs, "score_s": time.perf_counter() - t0, "epochs": tc.max_epochs,
                                 "seconds_per_epoch": secs / tc.max_epochs}
        log(f"{label}: {b.data['correlations'][label]['average']} ({secs:.0f} s)")
        update_verdict(b)
        b.save()
    chosen = b.cv.get("chosen") or names[0]
    # the chosen recipe's hyper-parameters on other inputs / encoders (not cross-validated themselves)
    for variant in [v for v in args.variants.split(",") if v]:
        override = {"mode": "ref-based"} if variant == "ref-based" else {"encoder": variant}
        enc = "mpnet" if variant == "mpnet" else "MiniLM"
        label = (f"student {enc} {chosen}{', ref-based' if variant == 'ref-based' else ''} "
                 f"(GPT-4 labels, {cv_epochs(b, chosen)} epochs from CV; hyper-parameters of the MiniLM ref-free CV)")
        if args.resume and label in b.data["correlations"]:
            continue
        cfg, tc = configs(chosen, args, cv_epochs(b, chosen), **override)
        model, secs = train_student(train, [f"judge.{a}" for a in ASPECTS], cfg, tc)
        b.data["correlations"][label] = row_of(model.predict(test, name="s", batch_size=32).records, "metric.s")
        b.data["runs"][label] = {"train_s": secs, "epochs": tc.max_epochs, "seconds_per_epoch": secs / tc.max_epochs}
        log(f"{label}: {b.data['correlations'][label]['average']} ({secs:.0f} s)")
        update_verdict(b)
        b.save()
    label = f"student {student_name(chosen)} (expert labels: ceiling)"
    if args.ceiling and not (args.resume and label in b.data["correlations"]):
        cfg, tc = configs(chosen, args, cv_epochs(b, chosen))
        model, secs = train_student(train, [f"human.{a}" for a in ASPECTS], cfg, tc)
        b.data["correlations"][label] = row_of(model.predict(test, name="s").records, "metric.s")
        b.data["runs"][label] = {"train_s": secs, "epochs": tc.max_epochs}
        b.save()


def stage_disjoint(b: Bench, train, test) -> None:
    """6 systems (seeded) train, the other 6 test: baselines and students; ``b.data["disjoint"]``."""
    args = b.args
    a_sys, b_sys = disjoint_systems(train)
    tr = [r for r in train if r["system_id"] in a_sys]
    te = [dict(r) for r in test if r["system_id"] in b_sys]
    d = b.data["disjoint"]
    d["train_systems"], d["test_systems"] = a_sys, b_sys
    d["rows"] = {"train": len(tr), "test": len(te)}
    rows = d.setdefault("correlations", {})
    rows[f"{TEACHER}, system-disjoint"] = row_of(te, "judge")
    from csem.baselines import bertscore, rouge

    for r, v in zip(te, rouge(te, "rouge1")):
        r["metric.rouge1"] = v
    rows["ROUGE-1 F (11 refs, max), system-disjoint"] = row_of(te, lambda a: "metric.rouge1")
    for r, v in zip(te, bertscore(te)):
        r["metric.bertscore"] = v
    rows["BERTScore F (MiniLM-L6, 11 refs), system-disjoint"] = row_of(te, lambda a: "metric.bertscore")
    rows.update(lexical_baselines(tr, te, ", system-disjoint"))
    b.save()
    names = [n for n in ([n.strip() for n in args.students.split(";") if n.strip()] if args.students else [b.cv.get("chosen") or next(iter(RECIPES))])]
    for name in names:
        label = f"student {student_name(name)}, system-disjoint"
        if args.resume and label in rows:
            continue
        cfg, tc = configs(name, args, cv_epochs(b, name))
        model, secs = train_student(tr, [f"judge.{a}" for a in ASPECTS], cfg, tc)
        rows[label] = row_of(model.predict(te, name="s").records, "metric.s")
        log(f"{label}: {rows[label]['average']} ({secs:.0f} s)")
        b.save()


def stage_curve(b: Bench, train, test) -> None:
    """The chosen recipe trained on the first ``--curve`` training documents; ``b.data["learning_curve"]``."""
    args = b.args
    name = b.cv.get("chosen") or next(iter(RECIPES))
    docs = sorted({r["doc_id"] for r in train})
    if not args.resume:  # with --resume the curves of earlier chosen recipes stay beside this one's
        b.data["learning_curve"] = []
    done = {e["docs"] for e in b.data["learning_curve"] if e.get("recipe") == name}
    for n in [int(x) for x in args.curve.split(",") if x]:
        if n in done or n > len(docs):
            continue
        sub = split_docs(train, 0, n)
        cfg, tc = configs(name, args, cv_epochs(b, name))
        model, secs = train_student(sub, [f"judge.{a}" for a in ASPECTS], cfg, tc)
        avg = row_of(model.predict(test, name="s").records, "metric.s")["average"]
        b.data["learning_curve"].append({"recipe": name, "docs": n, "records": len(sub), **avg, "train_s": secs})
        log(f"curve {n} docs: {avg}")
        b.save()
