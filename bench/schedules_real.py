#!/usr/bin/env python3
"""Real training runs on this machine, every schedule side by side at the same memory budget:
epp vs 1f1b vs seq1f1b vs gpipe (and interleaved when the layer count allows it) under
`mpirun -np PP*DP infinipipe train` on a long-tail synthetic corpus. Prints one markdown table.

Every size is a flag with an environment-variable default (flag wins), e.g.
    ITERS=8 BUDGET=256MiB bash bench/schedules_real.sh
    bash bench/schedules_real.sh --pp 2 --dp 2 --schedules "epp 1f1b"
BUDGET=auto (the default) takes the smallest budget at which batch-level 1F1B still fits a batch
of GBS maximum-length sequences (the planner's own figure): every schedule then runs at a budget
where 1F1B survives only by recomputing heavily.

--cost-model-updates "off online" runs every schedule under each mode from the same calibration
(bench/schedules_real_costs.py compares them): does planning with the measured costs pick
better plans?"""

import argparse
import json
import os
import re
import shlex
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_common as bc  # noqa: E402
import schedules_real_costs as costs  # noqa: E402


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)

    def opt(flag, env, default, kind=str, text=""):
        value = os.environ.get(env, str(default))
        try:
            value = kind(value)
        except ValueError:
            sys.exit(f"error: {env}={value!r} is not a valid {kind.__name__}")
        ap.add_argument(flag, type=kind, default=value,
                        help=f"{text}{'; ' if text else ''}env {env}, default {default}")

    opt("--schedules", "SCHEDULES", "epp 1f1b seq1f1b gpipe interleaved")
    opt("--pp", "PP", 4, int, "pipeline stages")
    opt("--dp", "DP", 1, int, "data-parallel replicas (mpirun -np PP*DP)")
    opt("--vpp", "VPP", 2, int, "virtual stages per rank, interleaved only")
    opt("--interleaved-mbs", "INTERLEAVED_MBS", 1, int,
        "sequences per micro-batch for interleaved, Megatron's usual 1 (0 = the planner tunes "
        "a token capacity, which can leave fewer than pp micro-batches)")
    opt("--num-layers", "LAYERS", 8, int)
    opt("--hidden-size", "HIDDEN", 128, int)
    opt("--ffn-hidden-size", "FFN", 384, int)
    opt("--seq-length", "SEQ_LEN", 4096, int, "longest sequence (documents are truncated)")
    opt("--global-batch-size", "GBS", 8, int, "sequences per iteration")
    opt("--iters", "ITERS", 4, int, "training iterations per schedule and round")
    opt("--rounds", "ROUNDS", 2, int,
        "times every schedule runs, in turn; per iteration the fastest round counts")
    opt("--warmup", "WARMUP", 1, int, "first iterations left out of the medians")
    opt("--documents", "DOCS", 1000, int, "documents in the synthetic corpus")
    opt("--distribution", "DIST", "github", str, "github | commoncrawl | uniform | fixed")
    opt("--budget", "BUDGET", "auto", str, "memory budget per rank, e.g. 96MiB, or auto")
    opt("--config", "CONFIG", "examples/cpu-small.yaml", str, "model and options to start from")
    opt("--calibration", "CALIBRATION", "auto", str,
        "calibration file; auto = examples/calibration-cpu.json when the model has its shape, "
        "else `infinipipe profile` of this model, cached in --out; '' = cpu preset")
    opt("--profile-grid", "PROFILE_GRID", "full", str,
        "grid of that profile: full (lengths to 4096, minutes) | quick (to 256, seconds)")
    opt("--cost-model-updates", "COST_MODEL_UPDATES", "", str,
        "--cost-model-update modes every schedule runs under, in turn, e.g. 'off online': the "
        "same runs planned with the calibration only and with the online refit, compared (EPP's "
        "speed-up in each, what the online plans chose differently); '' = train's default "
        "(online) without the flag")
    opt("--timeout", "RUN_TIMEOUT", 300, int, "seconds per training run")
    opt("--out", "OUT", "out/bench/schedules_real", str, "working folder")
    return ap.parse_args()


def config_flags(a):
    """Model and parallel flags shared by simulate and train (cpu-small's model, resized)."""
    world = a.pp * a.dp
    flags = ["--config", a.config, "--num-layers", str(a.num_layers), "--hidden-size",
             str(a.hidden_size), "--ffn-hidden-size", str(a.ffn_hidden_size), "--seq-length",
             str(a.seq_length), "--pp", str(a.pp), "--dp", str(a.dp), "--num-devices", str(world),
             "--devices-per-node", str(world), "--global-batch-size", str(a.global_batch_size)]
    if a.calibration:
        flags += ["--calibration", a.calibration]
    return flags


UNIT = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}


def auto_budget(a, exe):
    """1F1B's minimum budget for GBS maximum-length sequences, from `simulate --compare`."""
    cmd = [exe, "simulate", "--compare", "--distribution", "fixed", "--memory-budget", "1MiB"]
    cmd += config_flags(a)
    _, out, _ = bc.run(cmd)
    m = re.search(r"^\| 1f1b \| OOM \(needs ([\d.]+) (B|KiB|MiB|GiB)\)", out, re.M)
    if not m:
        sys.exit(f"error: could not read 1F1B's minimum budget from `{shlex.join(cmd)}`:\n{out}")
    need = float(m.group(1)) * UNIT[m.group(2)]
    return int(-(-need // 2**20)), shlex.join(cmd)  # whole MiB, rounded up


def resolve_calibration(a, exe):
    """auto: the checked-in CPU calibration if it fits the model, else profile this model once
    (one thread, as training runs; cached by shape). Returns (path or '', how it was made)."""
    if a.calibration != "auto":
        return a.calibration, "given" if a.calibration else "none: cpu preset coefficients"
    ref = "examples/calibration-cpu.json"
    with open(os.path.join(bc.ROOT, ref)) as f:
        m = json.load(f)["model"]
    if (m["hidden_size"], m["ffn_hidden_size"]) == (a.hidden_size, a.ffn_hidden_size):
        return ref, "checked in"
    if a.profile_grid not in ("full", "quick"):
        sys.exit(f"error: --profile-grid {a.profile_grid!r}: full or quick")
    quick = a.profile_grid == "quick"
    path = os.path.join(a.out, f"calibration-h{a.hidden_size}-f{a.ffn_hidden_size}"
                               f"{'-quick' if quick else ''}.json")
    cmd = [exe, "profile", "--config", a.config, "--hidden-size", str(a.hidden_size),
           "--ffn-hidden-size", str(a.ffn_hidden_size), "--threads", "1", "--repeats", "1",
           "--out", path] + (["--quick"] if quick else [])
    if not os.path.exists(path):
        print("(profiling the model for its calibration ...)", file=sys.stderr, flush=True)
        bc.run(cmd, env={"OMP_NUM_THREADS": "1"})
    return path, f"`{shlex.join(cmd)}` (cached)"


def read_jsonl(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def rank_path(path, rank):
    if rank == 0:
        return path
    stem, ext = os.path.splitext(path)
    return f"{stem}-rank{rank:05d}{ext}"


def analyse_timings(records, stage_layers):
    """From one rank's --timings lines: per iteration (busy, span, predicted busy, predicted step,
    recompute seconds estimate). Recompute is estimated as r/L of the measured forward of the
    same (stage, chunk): a recompute re-runs r of the stage's L layers' forward."""
    out = {}
    for rec in records:
        acts = rec["actions"]
        if not acts:
            continue
        busy = sum(x["end_s"] - x["start_s"] for x in acts)
        span = max(x["end_s"] for x in acts) - min(x["start_s"] for x in acts)
        pred_busy = sum(x["predicted_s"] for x in acts)
        fwd = {(x["stage"], x["chunk"]): x["end_s"] - x["start_s"] for x in acts
               if x["kind"] == "forward"}
        rec_s = 0.0
        for x in acts:
            r = x["recompute_layers"]
            if x["kind"] == "backward" and r > 0:
                layers = stage_layers.get(x["stage"], 0)
                if layers > 0:
                    rec_s += fwd.get((x["stage"], x["chunk"]), 0.0) * r / layers
        out[rec["iteration"]] = (busy, span, pred_busy, rec["predicted_step_seconds"], rec_s)
    return out


def stage_layer_counts(a, exe, schedule, budget, workdir):
    """Layers per (virtual) stage: from a plan the traced run saved, else from `infinipipe plan`
    on the corpus's first batch (the layout depends on the schedule and model, not the batch)."""
    plans = os.path.join(workdir, "trace", "plans")
    names = sorted(os.listdir(plans)) if os.path.isdir(plans) else []
    path = os.path.join(plans, names[0]) if names else os.path.join(workdir, "layout-plan.json")
    if not names:
        cmd = [exe, "plan", "--data-path", os.path.join(a.out, "corpus"), "--schedule",
               schedule, "--memory-budget", f"{budget}MiB", "--out", path] + config_flags(a)
        if schedule == "interleaved":
            cmd += ["--vpp", str(a.vpp)]
            if a.interleaved_mbs > 0:
                cmd += ["--micro-batch-size", str(a.interleaved_mbs)]
        rc, _, _ = bc.run(cmd, check=False)
        if rc != 0 or not os.path.exists(path):
            return {}
    with open(path) as f:
        plan = json.load(f)
    return {s["index"]: s["num_layers"] for s in plan.get("stages", [])}


def first_error(text):
    """The first error line, without the "infinipipe: error on rank 0 (...):" prefix."""
    lines = [x.strip() for x in text.splitlines()]
    for line in lines:  # infinipipe's own message first (mpirun adds its own "error" lines)
        if line.startswith("infinipipe: error"):
            return re.sub(r"^infinipipe: error( on rank \d+ \([^)]*\))?: ", "", line)
    for line in lines:
        if "error" in line.lower():
            return line
    lines = [x for x in text.splitlines() if x.strip()]
    return lines[-1].strip() if lines else "no output"


def run_schedule(a, exe, schedule, budget, has_trace, rnd, update=""):
    d = os.path.join(a.out, schedule, *([update] if update else []), f"round{rnd}")
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        if f.endswith(".jsonl"):
            os.remove(os.path.join(d, f))
    corpus = os.path.join(a.out, "corpus")
    world = a.pp * a.dp
    train = [exe, "train", "--schedule", schedule, "--data-path", corpus, "--train-iters",
             str(a.iters), "--lr", "1e-3", "--lr-warmup-iters", "2", "--memory-budget",
             f"{budget}MiB", "--log-interval", "1", "--metrics",
             os.path.join(d, "metrics.jsonl"), "--timings", os.path.join(d, "timings.jsonl")]
    train += config_flags(a)
    if update:
        train += ["--cost-model-update", update]
    if schedule == "interleaved":
        train += ["--vpp", str(a.vpp)]
        if a.interleaved_mbs > 0:
            train += ["--micro-batch-size", str(a.interleaved_mbs)]
    if has_trace:
        train += ["--trace", os.path.join(d, "trace")]
    cmd = ["timeout", str(a.timeout), "mpirun", "--allow-run-as-root", "--oversubscribe",
           "--bind-to", "none", "-np", str(world), "env", "OMP_NUM_THREADS=1",
           "OMP_WAIT_POLICY=passive"] + train
    t0 = time.time()
    rc, out, err = bc.run(cmd, check=False)
    wall = time.time() - t0
    with open(os.path.join(d, "log.txt"), "w") as f:
        f.write(f"$ {shlex.join(cmd)}\n{out}\n{err}")
    res = {"schedule": schedule, "update": update, "rc": rc, "wall": wall, "cmd": cmd, "dir": d}
    if rc != 0:
        msg = first_error(err + "\n" + out)
        if rc == 124:
            res["error"] = f"timed out after {a.timeout} s"
        elif "memory budget" in msg and "too small" in msg:
            res["error"] = f"OOM: the planner refuses: {msg}"
        else:
            res["error"] = f"failed (exit {rc}): {msg}"
        return res
    stage_layers = stage_layer_counts(a, exe, schedule, budget, d)
    res["layout_known"] = bool(stage_layers)
    res["ranks"] = []
    for r in range(world):
        res["ranks"].append({
            "metrics": read_jsonl(rank_path(os.path.join(d, "metrics.jsonl"), r)),
            "timings": analyse_timings(
                read_jsonl(rank_path(os.path.join(d, "timings.jsonl"), r)), stage_layers),
        })
    if has_trace:
        rc2, rep, rep_err = bc.run([exe, "report", os.path.join(d, "trace")], check=False)
        with open(os.path.join(d, "report.md"), "w") as f:
            f.write(rep if rc2 == 0 else f"report failed: {rep_err}")
        res["report"] = os.path.join(d, "report.md") if rc2 == 0 else None
    return res


def summarise(a, runs):
    """One table row from the rounds of one schedule. Every round trains the same batches from
    the same weights, so per iteration the fastest round is the least disturbed measurement of
    the same work (other processes on the shared cores only ever add time)."""
    if any("error" in r for r in runs):
        return None
    world = a.pp * a.dp
    m0 = runs[0]["ranks"][0]["metrics"]
    its = sorted({m["iteration"] for m in m0 if m["iteration"] > a.warmup})
    best = {}  # iteration -> (rank-0 metrics, run) of the fastest round
    for run in runs:
        for m in run["ranks"][0]["metrics"]:
            if m["iteration"] in its and (m["iteration"] not in best or
                                          m["seconds"] < best[m["iteration"]][0]["seconds"]):
                best[m["iteration"]] = (m, run)
    steady = [best[it][0] for it in its]
    tok_s = bc.median([m["tokens_per_s"] for m in steady])
    step_s = bc.median([m["seconds"] for m in steady])
    spread = [max(m["seconds"] for run in runs for m in run["ranks"][0]["metrics"]
                  if m["iteration"] == it) / best[it][0]["seconds"] for it in its]
    # Peak per pipeline stage: max over its dp replicas, the measured iterations and rounds.
    meas, pred = [0] * a.pp, [0] * a.pp
    for run in runs:
        for r in range(world):
            stage = r // a.dp
            for m in run["ranks"][r]["metrics"]:
                if m["iteration"] in its:
                    meas[stage] = max(meas[stage], m["measured_peak_bytes"])
                    pred[stage] = max(pred[stage], m["predicted_peak_bytes"])
    recompute_layers = bc.median([m["recompute_layers"] for m in steady])
    # Bubble: idle share of each rank between its first and last action, mean over ranks;
    # predicted the same way from the plan's action times and predicted step.
    bub_m, bub_p, rec_s = [], [], []
    for it in its:
        run = best[it][1]
        per_rank = [run["ranks"][r]["timings"].get(it) for r in range(world)]
        if any(x is None for x in per_rank):
            continue
        bub_m.append(sum(1 - b / s for b, s, _, _, _ in per_rank if s > 0) / world)
        bub_p.append(sum(1 - pb / ps for _, _, pb, ps, _ in per_rank if ps > 0) / world)
        # Recompute on the critical path is what costs; report the slowest rank's total.
        rec_s.append(max(x[4] for x in per_rank))
    pct = lambda xs: f"{100 * bc.median(xs):.1f}%" if xs else "–"  # noqa: E731
    return {
        "tok_s": tok_s,
        "step_s": step_s,
        "peak": " / ".join(f"{bc.mib(x)} ({bc.mib(y)})" for x, y in zip(meas, pred)),
        "max_peak": max(meas),
        "recompute": f"{recompute_layers:g} layers, ≈{bc.median(rec_s):.2f} s"
                     if rec_s and all(r.get("layout_known") for r in runs) else
                     f"{recompute_layers:g} layers",
        "bubble": f"{pct(bub_m)} ({pct(bub_p)})",
        "loss": m0[-1]["loss"],
        "knobs": m0[-1].get("plan_knobs", ""),
        "plan_s": bc.median([m["plan_seconds"] for m in steady]),
        "spread": max(spread) if spread else 1.0,
        "losses": [run["ranks"][0]["metrics"][-1]["loss"] for run in runs],
    }


def mode_label(schedule, update):
    return f"{schedule} ({update})" if update else schedule


def main():
    a = parse_args()
    exe = bc.binary()
    os.chdir(bc.ROOT)
    os.makedirs(a.out, exist_ok=True)
    schedules = a.schedules.split()
    listed = a.cost_model_updates.split()
    updates = listed or [""]  # "": train's default, no flag
    for u in listed:
        if u not in ("off", "online") or listed.count(u) > 1:
            sys.exit(f"error: --cost-model-updates {a.cost_model_updates!r}: list 'off' and/or "
                     f"'online' once each, e.g. 'off online'")
    if a.warmup >= a.iters:
        sys.exit(f"error: --warmup {a.warmup} leaves no measured iteration of --iters {a.iters}")
    if len(updates) > 1 and a.warmup < 2:
        sys.exit(f"error: --warmup {a.warmup} with --cost-model-updates: the online refit reaches "
                 f"the plans from iteration 3 (iteration 2 is planned while 1 runs), so measure "
                 f"from there: --warmup 2 or more")
    print("# Real runs: every schedule at the same memory budget\n")
    print("\n".join(bc.machine_lines()))
    with bc.LoadSampler() as load:
        corpus = os.path.join(a.out, "corpus")
        synth = [exe, "data", "synth", "--distribution", a.distribution, "--num-documents",
                 str(a.documents), "--seq-length", str(a.seq_length), "--seed", "1", "--output",
                 corpus]
        bc.run(synth)
        _, stats, _ = bc.run([exe, "data", "stats", "--data-path", corpus, "--seq-length",
                              str(a.seq_length)])
        stats_line = [x for x in stats.splitlines() if x.startswith("mean")]
        a.calibration, cal_note = resolve_calibration(a, exe)
        if a.budget == "auto":
            budget, budget_cmd = auto_budget(a, exe)
            budget_note = (f"auto: 1F1B's smallest feasible budget for {a.global_batch_size} "
                           f"sequences of {a.seq_length} tokens (`{budget_cmd}`)")
        else:
            m = re.fullmatch(r"(\d+)MiB", a.budget)
            if not m:
                sys.exit(f"error: --budget {a.budget!r}: give it in MiB, e.g. 192MiB, or auto")
            budget, budget_note = int(m.group(1)), "given"
        _, help_out, _ = bc.run([exe, "train", "--help"])
        has_trace = "--trace" in help_out
        # (schedule, update) -> one result per round; rounds take the schedules and modes in turn
        runs = {}
        for rnd in range(a.rounds):
            for s in schedules:
                for u in updates:
                    key = (s, u)
                    if s == "interleaved" and a.num_layers % (a.pp * a.vpp) != 0:
                        runs[key] = [{"schedule": s, "error": f"n/a: {a.num_layers} layers do "
                                      f"not split into pp {a.pp} x vpp {a.vpp} stages"}]
                        continue
                    if any("error" in r for r in runs.get(key, [])):
                        continue  # refusals are deterministic: no second try
                    print(f"\n(round {rnd + 1}/{a.rounds}: running {mode_label(s, u)} ...)",
                          file=sys.stderr, flush=True)
                    runs.setdefault(key, []).append(
                        run_schedule(a, exe, s, budget, has_trace, rnd, u))
    world = a.pp * a.dp
    print(f"- workload: {a.distribution}-like synthetic corpus, {a.documents} documents truncated "
          f"to {a.seq_length} tokens ({stats_line[0] if stats_line else ''}); global batch "
          f"{a.global_batch_size} sequences, {a.iters} iterations x {a.rounds} round(s) per "
          f"schedule{' and mode' if len(updates) > 1 else ''}, the first {a.warmup} left out")
    print(f"- model: {a.config} resized to {a.num_layers} layers x hidden {a.hidden_size} "
          f"(ffn {a.ffn_hidden_size}), fp32, AdamW; cost model: "
          f"{a.calibration + ' (' + cal_note + ')' if a.calibration else cal_note}")
    if updates != [""]:
        print(f"- --cost-model-update: {' and '.join(updates)}, each schedule under each")
    print(f"- layout: mpirun -np {world} (pp {a.pp} x dp {a.dp}), OMP_NUM_THREADS=1 per rank, "
          f"{world} ranks on {os.cpu_count()} cores")
    print(f"- memory budget per rank: {budget} MiB ({budget_note})")
    print(f"- {load.describe()}\n")
    rows = []
    summaries = {key: summarise(a, rs) for key, rs in runs.items()}
    for (name, u), rs in runs.items():
        sm = summaries[(name, u)]
        if sm is None:
            err = next(r["error"] for r in rs if "error" in r)
            rows.append([mode_label(name, u), err.replace("|", "/")] + ["–"] * 7)
            continue
        base = summaries.get(("epp", u))  # EPP of the same mode
        rel = f"{base['tok_s'] / sm['tok_s']:.2f}x" if base and sm["tok_s"] > 0 else "–"
        rows.append([mode_label(name, u), f"{sm['tok_s']:.0f}", rel, f"{sm['step_s']:.2f}",
                     sm["peak"], sm["recompute"], sm["bubble"], f"{sm['loss']:.4f}",
                     sm["knobs"]])
    print(bc.md_table(
        ["schedule", "tokens/s", "EPP speedup", "s/iter", "peak MiB per stage: measured "
         "(predicted)", "recompute / iter", "bubble measured (predicted)", "final loss",
         "plan (last iteration)"], rows, "lrrrrrrrl"))
    done = {n: sm for n, sm in summaries.items() if sm}
    if done:
        spread = max(sm["spread"] for sm in done.values())
        print(f"\ntokens/s and s/iter: per iteration the fastest of {a.rounds} round(s), median "
              f"over iterations {a.warmup + 1}..{a.iters}; the slowest round of an iteration took "
              f"up to {spread:.2f}x its fastest (the noise of the shared machine).")
        losses = [x for sm in done.values() for x in sm["losses"]]
        diff = max(losses) - min(losses)
        same = diff <= 1e-3 * max(abs(x) for x in losses)
        print(f"final losses of every schedule and round differ by at most {diff:.2e} "
              f"({'the same maths' if same else 'CHECK: they should agree to round-off'}).")
    if len(updates) > 1:
        print()
        print(costs.compare_report(a, runs, summaries, schedules))
    reports = [r["report"] for rs in runs.values() for r in rs[-1:] if r.get("report")]
    if reports:
        print(f"\n`infinipipe report` of each traced run (predicted vs measured per action kind, "
              f"stage and iteration; HTML next to it): {', '.join(reports)}")
    cmd = next((r["cmd"] for rs in runs.values() for r in rs if "cmd" in r), None)
    if cmd:
        print(f"\ncommand of each run (schedule, mode and folders vary):\n\n    {shlex.join(cmd)}")


if __name__ == "__main__":
    main()
