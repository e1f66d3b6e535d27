"""The `--cost-model-updates "off online"` part of bench/schedules_real.py: every schedule ran
the same batches from the same calibration twice, planned with the calibration only (`off`) and
with the online refit of the measured action times (`online`). This compares their measured
speed and what the plans chose, read from the plans each traced run saved (DIR/trace/plans,
docs/tracing.md) and from the per-iteration metrics."""

import collections
import json
import os

import bench_common as bc


def plan_path(run, iteration, replica):
    return os.path.join(run["dir"], "trace", "plans",
                        f"iter-{iteration:08d}-replica{replica}.json")


def plan_facts(plan):
    """What a plan decided: its chunks, pipelines (EPP's grouping), the slices of the sequences
    it cut, the layers it recomputes, and a key that is equal for two plans exactly when they
    run the same chunks in the same pipelines with the same actions and recompute."""
    lengths = plan["seq_lengths"]
    slices_of = collections.Counter(s[0] for c in plan["chunks"] for s in c["slices"])
    cut = sum(n for n in slices_of.values() if n > 1)
    recompute = sum(x[3] for rank in plan["actions"] for x in rank if x[0] == "F")
    decisions = [[c["slices"] for c in plan["chunks"]], plan["pipeline_of_chunk"],
                 [[x[:4] for x in rank] for rank in plan["actions"]]]
    return {"chunks": len(plan["chunks"]), "pipelines": max(plan["pipeline_of_chunk"]) + 1,
            "cut_slices": cut, "cut_sequences": sum(1 for n in slices_of.values() if n > 1),
            "sequences": len(lengths), "recompute": recompute,
            "predicted_s": plan["predicted_step_time"], "key": json.dumps(decisions)}


def measured_plans(a, run):
    """(iteration, replica) -> plan facts of one run's measured iterations (after warm-up)."""
    out = {}
    for it in range(a.warmup + 1, a.iters + 1):
        for rep in range(a.dp):
            path = plan_path(run, it, rep)
            if os.path.exists(path):
                with open(path) as f:
                    out[(it, rep)] = plan_facts(json.load(f))
    return out


def rank0_metrics(a, run):
    return {m["iteration"]: m for m in run["ranks"][0]["metrics"] if m["iteration"] > a.warmup}


def fastest_seconds(a, runs):
    """iteration -> the fastest round's seconds (rank 0; the same batch in every round)."""
    best = {}
    for run in runs:
        for it, m in rank0_metrics(a, run).items():
            best[it] = min(best.get(it, m["seconds"]), m["seconds"])
    return best


def knob_counts(a, runs):
    counts = collections.Counter(m["plan_knobs"] for run in runs
                                 for m in rank0_metrics(a, run).values())
    return "; ".join(f"{k} ({n})" for k, n in counts.most_common())


def mean(xs):
    return sum(xs) / len(xs) if xs else float("nan")


def describe(f):
    return (f"{f['chunks']} chunks, {f['pipelines']} pipeline(s), {f['cut_sequences']} "
            f"sequence(s) cut into {f['cut_slices']} slices, {f['recompute']} layers recomputed, "
            f"predicted {f['predicted_s']:.2f} s")


def compare_report(a, runs, summaries, schedules):
    """Markdown: speed per mode, EPP's speed-up in each, and how the online plans differ."""
    ok = [s for s in schedules if summaries.get((s, "off")) and summaries.get((s, "online"))]
    if not ok:
        return "No schedule ran in both modes: nothing to compare."
    out = ["### Planning with the calibration only (off) against the online refit (online)", ""]
    rows = []
    epp = {u: summaries.get(("epp", u)) for u in ("off", "online")}
    for s in ok:
        off, onl = summaries[(s, "off")], summaries[(s, "online")]
        t_off, t_onl = fastest_seconds(a, runs[(s, "off")]), fastest_seconds(a, runs[(s, "online")])
        ratios = [t_off[it] / t_onl[it] for it in sorted(t_off) if it in t_onl]
        speed = {u: f"{epp[u]['tok_s'] / summaries[(s, u)]['tok_s']:.2f}x" if epp[u] else "–"
                 for u in ("off", "online")}
        rows.append([s, f"{off['tok_s']:.0f}", f"{onl['tok_s']:.0f}",
                     f"{onl['tok_s'] / off['tok_s']:.2f}x",
                     f"{bc.median(ratios):.2f}x ({min(ratios):.2f}–{max(ratios):.2f})"
                     if ratios else "–", speed["off"], speed["online"]])
    out.append(bc.md_table(
        ["schedule", "tokens/s off", "tokens/s online", "online / off", "per iteration: off s / "
         "online s, median (range)", "EPP speed-up off", "EPP speed-up online"], rows,
        "lrrrrrr"))
    out += ["", f"Per iteration the same batch ran in both modes; its fastest round counts, "
            f"iterations {a.warmup + 1}..{a.iters}.", ""]
    rows, changes = [], []
    for s in ok:
        off_plans = [measured_plans(a, r) for r in runs[(s, "off")]]
        # The calibration's plans are deterministic: every off round must agree.
        ref = off_plans[0]
        off_agree = all(p.keys() == ref.keys() and all(p[k]["key"] == ref[k]["key"] for k in p)
                        for p in off_plans[1:])
        for u in ("off", "online"):
            plans = off_plans if u == "off" else [measured_plans(a, r) for r in runs[(s, u)]]
            facts = [f for p in plans for f in p.values()]
            unlike = sum(1 for p in plans for k, f in p.items()
                         if k in ref and f["key"] != ref[k]["key"])
            errors = [(m["predicted_step_seconds"] - m["seconds"]) / m["seconds"]
                      for r in runs[(s, u)] for m in rank0_metrics(a, r).values()
                      if m["seconds"] > 0]
            rows.append([s, u, f"{unlike} of {len(facts)}" +
                         ("" if u == "online" or off_agree else " (CHECK: off rounds differ)"),
                         knob_counts(a, runs[(s, u)]),
                         f"{mean([f['chunks'] for f in facts]):.1f}",
                         f"{mean([f['pipelines'] for f in facts]):.1f}",
                         f"{mean([f['cut_slices'] for f in facts]):.1f}",
                         f"{mean([f['recompute'] for f in facts]):.1f}",
                         f"{100 * bc.median(errors):+.1f}%" if errors else "–"])
            if u == "online" and plans:
                # The first round's plans, each with the seconds that round measured for it.
                secs = {m: rank0_metrics(a, runs[(s, m)][0]) for m in ("off", "online")}
                for (it, rep), f in sorted(plans[0].items()):
                    if (it, rep) in ref and f["key"] != ref[(it, rep)]["key"]:
                        changes.append(
                            f"- {s}, iteration {it}, replica {rep}: off {describe(ref[(it, rep)])}, "
                            f"measured {secs['off'][it]['seconds']:.2f} s; online {describe(f)}, "
                            f"measured {secs['online'][it]['seconds']:.2f} s")
    out.append(bc.md_table(
        ["schedule", "mode", "plans unlike off's", "plan knobs (iterations)", "chunks",
         "pipelines", "slices of cut sequences", "recompute layers", "step prediction error "
         "(median)"], rows, "lllrrrrrr"))
    out += ["", "Plans per measured iteration and replica of every round (means over them); "
            "\"unlike off's\": chunks, grouping, action order or recompute differ from the plan "
            "the calibration alone gave the same batch; the prediction error is the plan's "
            "predicted step against the measured iteration (rank 0).", ""]
    out.append("Online plans of the first round unlike the calibration's:" if changes else
               "Every online plan of the first round equals the calibration's.")
    out += changes
    return "\n".join(out)
