#!/usr/bin/env python3
"""Prediction error of the cost model in real training, in one invocation: the demo's layout
(pp 2 x dp 2, 4 ranks) and pp 2 x dp 1 (2 ranks), each trained with --cost-model-update off
(the offline calibration only) and online (refitted from measured actions, per rank). Reads the
traces and plans each run leaves (docs/tracing.md) and prints, after the first --skip
iterations, the median absolute relative error of the iteration (its plan's predicted_step_time
against the span of a replica's actions and against its whole step up to the last optimizer
step; the iteration's global step against the slowest replica's prediction), the span's signed
median error (its bias), and of the actions (measured interval against predicted_s); wall over CPU time of the actions by ranks computing, each stage's busy fraction
(time inside actions over the replica's span), then the trajectory of each rank's fitted alpha2
and beta1 (Plan.rank_time_terms) and its step costs (Plan.rank_step_terms).
Ranks are free to migrate (mpirun --bind-to none, as the demo runs) unless --bind says otherwise
("core": pinned to a core each in turn, --map-by core --bind-to core; "none,core": both).
The runs go one after another on the same calibration and corpus; with
INFINIPIPE_BASE_BUILD_DIR set, the base build's runs go first, on the same calibration."""

import argparse
import glob
import json
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_common as bc  # noqa: E402

MODEL = ["--num-layers", "4", "--hidden-size", "128", "--num-attention-heads", "4",
         "--num-query-groups", "2", "--seq-length", "2048"]


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iters", type=int, default=bc.env_int("ITERS", 30))
    ap.add_argument("--skip", type=int, default=bc.env_int("SKIP", 10),
                    help="iterations left out of the error (the online fit is learning)")
    ap.add_argument("--out", default=os.environ.get("OUT", "out/bench-prediction-error"))
    ap.add_argument("--timeout", type=int, default=bc.env_int("TIMEOUT", 1800))
    ap.add_argument("--dp", default=os.environ.get("DP", "2,1"),
                    help="data-parallel degrees to run (pp 2 each), comma-separated")
    ap.add_argument("--bind", default=os.environ.get("BIND", "none"),
                    help="mpirun bindings to run, comma-separated: none (ranks free to migrate, "
                         "as the demo runs) and/or core (each rank pinned to a core in turn)")
    ap.add_argument("--calibration", default=os.environ.get("CALIBRATION", ""),
                    help="use this calibration file instead of profiling one (a profile taken "
                         "on a loaded machine can be far off; every run then starts from it)")
    return ap.parse_args()


def prepare(a, exe):
    os.makedirs(a.out, exist_ok=True)
    corpus = os.path.join(a.out, "corpus")
    bc.run([exe, "data", "synth", "--distribution", "github", "--num-documents", "2000",
            "--seq-length", "2048", "--seed", "1", "--output", corpus])
    if a.calibration:
        return corpus, a.calibration
    cal = os.path.join(a.out, "calibration.json")
    bc.run([exe, "profile", *MODEL, "--threads", "1", "--quick", "--out", cal],
           env={"OMP_NUM_THREADS": "1"})
    return corpus, cal


BINDINGS = {"core": ["--map-by", "core", "--bind-to", "core:overload-allowed"],
            "none": ["--bind-to", "none"]}


def train(a, exe, corpus, cal, dp, update, bind, out):
    run_dir = os.path.join(out, f"pp2-dp{dp}-{update}-bind-{bind}")
    cmd = ["timeout", str(a.timeout), "mpirun", "--allow-run-as-root", "--oversubscribe",
           *BINDINGS[bind], "-np", str(2 * dp), "env", "OMP_NUM_THREADS=1",
           "OMP_WAIT_POLICY=passive", exe, "train", "--data-path", corpus, "--pp", "2",
           "--dp", str(dp), *MODEL, "--global-batch-size", "8", "--train-iters", str(a.iters),
           "--lr", "3e-3", "--min-lr", "3e-4",
           "--lr-warmup-iters", str(min(10, a.iters - 1)),  # shorter than any run
           "--memory-budget", "64MiB", "--log-interval", str(a.iters), "--quiet",
           "--calibration", cal, "--cost-model-update", update, "--trace", run_dir]
    bc.run(cmd)
    return run_dir


def trace_events(run_dir):
    """(iteration, replica) -> {"actions": [(start_us, end_us, predicted_s)], "ends": [us]}:
    every rank's actions, and where each rank's step ended (its optimizer step's end)."""
    out = {}
    for path in glob.glob(os.path.join(run_dir, "trace-rank*.json")):
        with open(path) as f:
            t = json.load(f)
        events = t["traceEvents"] if isinstance(t, dict) else t
        replica = None
        for e in events:
            if e.get("ph") == "X" and e.get("cat") in ("forward", "backward"):
                replica = e["args"]["replica"]
                break
        for e in events:
            if e.get("ph") != "X":
                continue
            g = e.get("args", {})
            if e.get("cat") in ("forward", "backward"):
                out.setdefault((g["iteration"], g["replica"]), {"actions": [], "ends": []})[
                    "actions"].append((e["ts"], e["ts"] + e["dur"], g["predicted_s"]))
            elif e.get("cat") == "optimizer" and replica is not None:
                out.setdefault((g["iteration"], replica), {"actions": [], "ends": []})[
                    "ends"].append(e["ts"] + e["dur"])
    return out


def rel(measured, predicted):
    return abs(measured - predicted) / predicted if predicted > 0 else float("nan")


def signed(measured, predicted):
    return (measured - predicted) / predicted if predicted > 0 else float("nan")


def plan_of(run_dir, it, replica):
    with open(os.path.join(run_dir, "plans", f"iter-{it:08d}-replica{replica}.json")) as f:
        return json.load(f)


def errors(run_dir, skip):
    """Median errors after `skip` iterations: the replica's actions' span and its whole step (to
    the last rank's optimizer end) against predicted_step_time, the iteration's global step
    against the slowest replica's, and each action's interval against its predicted_s; then the
    counts."""
    ev = trace_events(run_dir)
    span_err, span_bias, step_err, act_err = [], [], [], []
    steps = {}  # iteration -> [(start, end of the last optimizer step, predicted)] per replica
    for (it, rep), d in sorted(ev.items()):
        lst = d["actions"]
        if it <= skip or not lst:
            continue
        start = min(s for s, _, _ in lst)
        predicted = plan_of(run_dir, it, rep)["predicted_step_time"]
        span = (max(e for _, e, _ in lst) - start) / 1e6
        span_err.append(rel(span, predicted))
        span_bias.append(signed(span, predicted))
        if d["ends"]:
            step_err.append(rel((max(d["ends"]) - start) / 1e6, predicted))
            steps.setdefault(it, []).append((start, max(d["ends"]), predicted))
        act_err += [rel((e - s) / 1e6, p) for s, e, p in lst]
    # The global step waits for the slowest replica (the dp all-reduce): its prediction is the
    # slowest replica's plan, not the replica's own.
    global_err = [rel((max(e for _, e, _ in r) - min(s for s, _, _ in r)) / 1e6,
                      max(p for _, _, p in r)) for r in steps.values()]
    return (bc.median(span_err), bc.median(span_bias), bc.median(step_err),
            bc.median(global_err), bc.median(act_err), len(span_err), len(act_err))


def traced_actions(run_dir, skip):
    """Every rank's forward and backward trace events after `skip` iterations."""
    for path in glob.glob(os.path.join(run_dir, "trace-rank*.json")):
        with open(path) as f:
            t = json.load(f)
        for e in t["traceEvents"] if isinstance(t, dict) else t:
            if (e.get("ph") == "X" and e.get("cat") in ("forward", "backward")
                    and e["args"]["iteration"] > skip):
                yield e


def contention(run_dir, skip):
    """Per action (after `skip` iterations) of every rank of the run (all on this machine): its
    wall interval over the CPU time its thread computed (trace's cpu_s), and how many of the
    run's ranks were inside an action meanwhile, itself included (time-averaged, rounded to a
    half). Returns {ranks computing: (n, median wall/cpu)}, {} for a trace without cpu_s."""
    acts = [(e["pid"], e["ts"], e["ts"] + e["dur"], e["args"]["cpu_s"])
            for e in traced_actions(run_dir, skip)
            if e["args"].get("cpu_s", 0) > 0 and e["dur"] > 0]
    by_rank = {}
    for a in acts:
        by_rank.setdefault(a[0], []).append(a)
    bins = {}
    for rank, s, e, cpu in acts:
        overlap = sum(max(0, min(e, b[2]) - max(s, b[1]))
                      for r, lst in by_rank.items() if r != rank for b in lst)
        busy = round(2 * (1 + overlap / (e - s))) / 2
        bins.setdefault(busy, []).append((e - s) / 1e6 / cpu)
    return {k: (len(v), bc.median(v)) for k, v in sorted(bins.items())}


def busy_fractions(run_dir, skip):
    """Per stage (after `skip` iterations): the median over iterations and replicas of the
    fraction of the replica's actions' span its rank of that stage spent inside actions (what
    the shared replay takes the other replicas' ranks to compute)."""
    inside, span = {}, {}
    for e in traced_actions(run_dir, skip):
        g = e["args"]
        key = (g["iteration"], g["replica"])
        inside[key + (g["stage"],)] = inside.get(key + (g["stage"],), 0) + e["dur"]
        lo, hi = span.get(key, (e["ts"], e["ts"] + e["dur"]))
        span[key] = (min(lo, e["ts"]), max(hi, e["ts"] + e["dur"]))
    by_stage = {}
    for (it, rep, stage), d in inside.items():
        lo, hi = span[(it, rep)]
        by_stage.setdefault(stage, []).append(d / (hi - lo))
    return ", ".join(f"stage {s}: {bc.median(v):.2f}" for s, v in sorted(by_stage.items()))


def step_terms(run_dir, iters):
    """Each rank's action gap and tail as the last plan of replica 0 carried them."""
    terms = plan_of(run_dir, iters, 0).get("rank_step_terms", [])
    return ", ".join(f"rank {r}: gap {g * 1e3:.2f} ms, tail {t * 1e3:.1f} ms"
                     for r, (g, t) in enumerate(terms)) or "none"


def trajectory(run_dir, iters):
    """Rows: iteration, then alpha2 and beta1 of each rank as replica 0's plan carried them."""
    rows = []
    for it in sorted({1, 2, 5, 10, 20, iters} & set(range(1, iters + 1))):
        terms = plan_of(run_dir, it, 0).get("rank_time_terms", [])
        cells = [f"{t[1] * 1e9:.1f} ns / {t[2] * 1e3:.2f} ms" for t in terms]
        rows.append([str(it)] + (cells or ["shared (no per-rank terms)", ""]))
    return rows


def builds():
    """(label, binary) per build to compare: $INFINIPIPE_BASE_BUILD_DIR (label 'before') runs
    first when set, then this tree's build ('after', or the only one)."""
    out = []
    base = os.environ.get("INFINIPIPE_BASE_BUILD_DIR")
    if base:
        exe = os.path.join(base, "infinipipe")
        if not os.access(exe, os.X_OK):
            sys.exit(f"error: {exe} not found; build the base commit there first")
        out.append(("before", exe))
    out.append(("after" if base else "this tree", bc.binary()))
    return out


def main():
    a = parse_args()
    binds = a.bind.split(",")
    for b in binds:
        if b not in BINDINGS:
            sys.exit(f"error: --bind {b}: expected core or none (comma-separated)")
    runs = builds()
    print("## Cost-model prediction error in real training\n")
    for line in bc.machine_lines():
        print(line)
    corpus, cal = prepare(a, runs[-1][1])
    results = {}
    with bc.LoadSampler() as load:
        for label, exe in runs:
            for dp in [int(d) for d in a.dp.split(",")]:
                for update in ("off", "online"):
                    for bind in binds:
                        out = os.path.join(a.out, label.replace(" ", "-"))
                        results[(label, dp, update, bind)] = train(a, exe, corpus, cal, dp,
                                                                   update, bind, out)
    print(f"- {load.describe()}")
    print(f"- {a.iters} iterations each, errors over iterations {a.skip + 1}..{a.iters}; "
          f"calibration: " + (f"`{a.calibration}`" if a.calibration else
                              "`profile --quick --threads 1` of the same model") + "; builds: "
          + ", ".join(f"{label} = `{exe}`" for label, exe in runs) + "\n")
    rows = []
    for (label, dp, update, bind), run_dir in results.items():
        span, bias, step, glob_step, act, n_it, n_act = errors(run_dir, a.skip)
        rows.append([label, f"pp 2 x dp {dp}", update, bind, f"{100 * span:.1f}%",
                     f"{100 * bias:+.1f}%", f"{100 * step:.1f}%", f"{100 * glob_step:.1f}%",
                     str(n_it), f"{100 * act:.1f}%", str(n_act)])
    print(bc.md_table(["build", "layout", "cost-model update", "bind", "actions' span",
                       "span bias", "whole step", "global step", "n", "action median abs err",
                       "n"], rows))
    print("\n(median |measured - predicted| / predicted of predicted_step_time against the span "
          "of a replica's actions, the median of (measured - predicted) / predicted of the "
          "span (bias), and against its whole step: from its first action to the last of its "
          "ranks' optimizer steps; global step: the iteration's, from the replicas' first action "
          "to the last optimizer step of any rank, against the slowest replica's "
          "predicted_step_time)")
    print("\nWall time over CPU time of the actions, by how many of the run's ranks were "
          "inside an action meanwhile (itself included; time-averaged, to a half), "
          "every rank on this machine:\n")
    rows = []
    for (label, dp, update, bind), run_dir in results.items():
        for busy, (n, ratio) in contention(run_dir, a.skip).items():
            rows.append([label, f"pp 2 x dp {dp}", update, bind, f"{busy:.1f}", str(n),
                         f"{ratio:.2f}"])
    print(bc.md_table(["build", "layout", "cost-model update", "bind", "ranks computing", "n",
                       "median wall / cpu"], rows) if rows else "(no CPU times in these traces)")
    print("\nBusy fraction (time inside actions over the replica's actions' span, median):\n")
    for (label, dp, update, bind), run_dir in results.items():
        print(f"- {label}, pp 2 x dp {dp}, {update}, bind {bind}: "
              f"{busy_fractions(run_dir, a.skip)}")
    for (label, dp, update, bind), run_dir in results.items():
        if update != "online":
            continue
        print(f"\nFitted alpha2 / beta1 per rank ({label}, online, pp 2 x dp {dp}, bind {bind}, "
              f"replica 0's "
              f"plans); step costs at iteration {a.iters}: {step_terms(run_dir, a.iters)}\n")
        print(bc.md_table(["iteration", "rank 0", "rank 1"], trajectory(run_dir, a.iters)))


if __name__ == "__main__":
    main()
