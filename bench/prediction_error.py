#!/usr/bin/env python3
"""Prediction error of the cost model in real training, in one invocation: the demo's layout
(pp 2 x dp 2, 4 ranks) and pp 2 x dp 1 (2 ranks), each trained with --cost-model-update off
(the offline calibration only) and online (refitted from measured actions, per rank). Reads the
traces and plans each run leaves (docs/tracing.md) and prints, after the first --skip
iterations, the median absolute relative error of the iteration (span of a replica's actions
against its plan's predicted_step_time) and of the actions (measured interval against
predicted_s), then the trajectory of each rank's fitted alpha2 and beta1 (Plan.rank_time_terms).
The four runs go one after another on the same calibration and corpus."""

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
    return ap.parse_args()


def prepare(a, exe):
    os.makedirs(a.out, exist_ok=True)
    corpus = os.path.join(a.out, "corpus")
    bc.run([exe, "data", "synth", "--distribution", "github", "--num-documents", "2000",
            "--seq-length", "2048", "--seed", "1", "--output", corpus])
    cal = os.path.join(a.out, "calibration.json")
    bc.run([exe, "profile", *MODEL, "--threads", "1", "--quick", "--out", cal],
           env={"OMP_NUM_THREADS": "1"})
    return corpus, cal


def train(a, exe, corpus, cal, dp, update):
    run_dir = os.path.join(a.out, f"pp2-dp{dp}-{update}")
    cmd = ["timeout", str(a.timeout), "mpirun", "--allow-run-as-root", "--oversubscribe",
           "--bind-to", "none", "-np", str(2 * dp), "env", "OMP_NUM_THREADS=1",
           "OMP_WAIT_POLICY=passive", exe, "train", "--data-path", corpus, "--pp", "2",
           "--dp", str(dp), *MODEL, "--global-batch-size", "8", "--train-iters", str(a.iters),
           "--lr", "3e-3", "--min-lr", "3e-4", "--lr-warmup-iters", "10",
           "--memory-budget", "64MiB", "--log-interval", str(a.iters), "--quiet",
           "--calibration", cal, "--cost-model-update", update, "--trace", run_dir]
    bc.run(cmd)
    return run_dir


def trace_actions(run_dir):
    """(iteration, replica) -> list of (start_us, end_us, predicted_s), over every rank."""
    out = {}
    for path in glob.glob(os.path.join(run_dir, "trace-rank*.json")):
        with open(path) as f:
            t = json.load(f)
        for e in t["traceEvents"] if isinstance(t, dict) else t:
            if e.get("ph") != "X" or e.get("cat") not in ("forward", "backward"):
                continue
            g = e["args"]
            out.setdefault((g["iteration"], g["replica"]), []).append(
                (e["ts"], e["ts"] + e["dur"], g["predicted_s"]))
    return out


def rel(measured, predicted):
    return abs(measured - predicted) / predicted if predicted > 0 else float("nan")


def plan_of(run_dir, it, replica):
    with open(os.path.join(run_dir, "plans", f"iter-{it:08d}-replica{replica}.json")) as f:
        return json.load(f)


def errors(run_dir, skip):
    acts = trace_actions(run_dir)
    it_err, act_err = [], []
    for (it, rep), lst in sorted(acts.items()):
        if it <= skip:
            continue
        span = (max(e for _, e, _ in lst) - min(s for s, _, _ in lst)) / 1e6
        it_err.append(rel(span, plan_of(run_dir, it, rep)["predicted_step_time"]))
        act_err += [rel((e - s) / 1e6, p) for s, e, p in lst]
    return bc.median(it_err), bc.median(act_err), len(it_err), len(act_err)


def trajectory(run_dir, iters):
    """Rows: iteration, then alpha2 and beta1 of each rank as replica 0's plan carried them."""
    rows = []
    for it in sorted({1, 2, 5, 10, 20, iters} & set(range(1, iters + 1))):
        terms = plan_of(run_dir, it, 0).get("rank_time_terms", [])
        cells = [f"{t[1] * 1e9:.1f} ns / {t[2] * 1e3:.2f} ms" for t in terms]
        rows.append([str(it)] + (cells or ["shared (no per-rank terms)", ""]))
    return rows


def main():
    a = parse_args()
    exe = bc.binary()
    print("## Cost-model prediction error in real training\n")
    for line in bc.machine_lines():
        print(line)
    corpus, cal = prepare(a, exe)
    results = {}
    with bc.LoadSampler() as load:
        for dp in (2, 1):
            for update in ("off", "online"):
                results[(dp, update)] = train(a, exe, corpus, cal, dp, update)
    print(f"- {load.describe()}")
    print(f"- {a.iters} iterations each, errors over iterations {a.skip + 1}..{a.iters}; "
          f"calibration: `profile --quick --threads 1` of the same model\n")
    rows = []
    for (dp, update), run_dir in results.items():
        it_med, act_med, n_it, n_act = errors(run_dir, a.skip)
        rows.append([f"pp 2 x dp {dp}", update, f"{100 * it_med:.1f}%", str(n_it),
                     f"{100 * act_med:.1f}%", str(n_act)])
    print(bc.md_table(["layout", "cost-model update", "iteration median abs err", "n",
                       "action median abs err", "n"], rows))
    for dp in (2, 1):
        print(f"\nFitted alpha2 / beta1 per rank (online, pp 2 x dp {dp}, replica 0's plans):\n")
        print(bc.md_table(["iteration", "rank 0", "rank 1"],
                          trajectory(results[(dp, "online")], a.iters)))


if __name__ == "__main__":
    main()
