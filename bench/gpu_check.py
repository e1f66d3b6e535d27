"""The GPU check (bench/gpu_check.sh runs it once the module is built): on one device,

1. the executor against the C++ engine: every schedule's plan on one stage and a sliced,
   recomputing plan on virtual stages, in fp32 (TF32 off), loss and gradients within 1e-4
   relative of the engine on the CPU (1e-5 on the CPU);
2. bf16 throughput of EPP against 1F1B on a long-tail batch under a memory budget: tokens/s,
   MFU and peak memory, each against the plan's prediction;
3. a profile: the measured action times fed to CostFeedback, written as a calibration file
   (OUT/calibration-<device>.json) for --calibration.

Writes OUT/gpu_check.md (the report) and OUT/gpu_check.json (the numbers).

    python3 bench/gpu_check.py --device cuda --out DIR
    python3 bench/gpu_check.py --device cpu --quick --out DIR     # the same paths on a CPU
"""

import argparse
import json
import os
import sys
import time

import numpy as np
import torch

import infinipipe as ip
from infinipipe.torch.distributed import RankGroups
from infinipipe.torch.executor import run_plan_local
from infinipipe.torch.model import stage_from_spec
from infinipipe.torch.trainer import RankModel, TrainStep, make_optimizer, predicted_tokens

SMALL = ["--num-layers", "8", "--hidden-size", "64", "--num-attention-heads", "4",
         "--num-query-groups", "2", "--group-query-attention", "--seq-length", "256",
         "--vocab-size", "97", "--device", "a800-80gb", "--min-tail-slice", "16",
         "--global-batch-size", "12"]
SMALL_LENGTHS = [256, 40, 17, 200, 5, 96, 2, 130, 64, 31, 150, 77]


def long_tail(rng, n, longest):
    body = np.clip(rng.lognormal(7.0, 1.2, n), 16, longest).astype(int)
    body[:max(1, n // 16)] = longest  # a few sequences at the longest length
    return [int(x) for x in body]


def maths(device, report):
    """Step 1: the executor's loss and gradients against the engine's."""
    tol = 1e-5 if device.type == "cpu" else 1e-4
    cases = [(s, ["--pp", "2", "--memory-budget", "8MiB"] + (["--vpp", "2"] if s == "interleaved"
                                                               else [])) for s in ip.schedules()]
    cases.append(("epp", ["--pp", "2", "--vpp", "2", "--memory-budget", "5MiB"]))
    worst = 0.0
    for schedule, words in cases:
        cfg = ip.Config.from_args(SMALL + words)
        rng = np.random.default_rng(5)
        seqs = [[int(t) for t in rng.integers(0, 97, n)] for n in SMALL_LENGTHS]
        plan = ip.plan(SMALL_LENGTHS, cfg, schedule=schedule).plan
        params = ip.init_params(cfg)
        want_loss, want = ip.reference_step(cfg, params, seqs)
        stages = {s.index: stage_from_spec(cfg.model, s).to(device) for s in plan.stages}
        for st in stages.values():
            st.load({n: params[n] for n, _ in st.named_parameters()})
        predicted = predicted_tokens(SMALL_LENGTHS)
        stats = run_plan_local(plan, stages, seqs, 1.0 / predicted, device)
        loss = sum(x.loss_sum for x in stats) / predicted
        grads = {}
        for st in stages.values():
            for name, p in st.named_parameters():
                grads[name] = grads.get(name, 0) + p.grad.float().cpu().numpy()
        err = max(float(np.abs(grads[n] - g).max() / np.abs(g).max()) for n, g in want.items())
        err = max(err, abs(loss - want_loss) / want_loss)
        worst = max(worst, err)
        report.append(f"| {schedule} | {plan.pp} x vpp {plan.vpp} | "
                      f"{', '.join(sorted({c.kind for c in plan.chunks}))} | {err:.2e} |")
        if err > tol:
            raise SystemExit(f"gpu_check: {schedule}: gradients {err:.2e} from the engine's "
                             f"(tolerance {tol:.0e})")
    return worst, tol


def throughput(device, quick, report, out):
    """Steps 2 and 3: bf16 EPP against 1F1B on one device, and the profile."""
    if device.type == "cuda":
        words = ["--num-layers", "16", "--hidden-size", "2048", "--num-attention-heads", "16",
                 "--num-query-groups", "8", "--group-query-attention", "--ffn-hidden-size",
                 "5632", "--seq-length", "32768", "--vocab-size", "32000",
                 "--global-batch-size", "16", "--memory-budget", "60GiB", "--bf16"]
        preset = torch.cuda.get_device_name(device)
        device_words = ["--device", next((p for k, p in (("H200", "h200-141gb"),
                                                         ("H100", "h100-80gb"),
                                                         ("A800", "a800-80gb")) if k in preset),
                                         "h100-80gb")]
        iters = 3 if quick else 6
    else:
        words = ["--num-layers", "4", "--hidden-size", "128", "--num-attention-heads", "4",
                 "--num-query-groups", "2", "--group-query-attention", "--seq-length", "1024",
                 "--global-batch-size", "8", "--memory-budget", "48MiB", "--bf16"]
        device_words = ["--device", "cpu"]
        iters = 2 if quick else 4
    rng = np.random.default_rng(7)
    results = {}
    for schedule in ("epp", "1f1b"):
        cfg = ip.Config.from_args(words + device_words + ["--schedule", schedule])
        cost = ip.CostModel.from_config(cfg)
        cfg = cfg.with_stage_layout(cost)
        groups = RankGroups(0, 1, 1, 1, 0, 0, device, "none")
        model = RankModel(cfg, cfg.stage_layout(cost), groups)
        model.init()
        step = TrainStep(cfg, model, make_optimizer(cfg, model), bf16=True)
        feedback = ip.CostFeedback(cost)
        lengths = long_tail(rng, cfg.global_batch_size, cfg.model.seq_length)
        seqs = [[int(t) for t in rng.integers(0, cfg.model.vocab_size, n)] for n in lengths]
        r = ip.plan(lengths, cfg, cost)
        plan = r.plan
        sim = ip.simulate(plan, cfg, cost)
        times, peak = [], 0
        for i in range(iters):
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(device)
                torch.cuda.synchronize(device)
            t0 = time.perf_counter()
            res = step.run(plan, seqs, predicted_tokens(lengths), 1e-4)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
                peak = max(peak, torch.cuda.max_memory_allocated(device))
            times.append(time.perf_counter() - t0)
            feedback.observe(plan, cost, cfg, 0, [(t.index, t.end - t.start)
                                                  for t in res.stats.times])
        measured = min(times[1:]) if len(times) > 1 else times[0]
        tokens = sum(lengths)
        results[schedule] = {
            "setting": r.setting, "tokens": tokens, "step_s": measured,
            "predicted_step_s": plan.predicted_step_time, "tokens_per_s": tokens / measured,
            "mfu": sim.mfu * plan.predicted_step_time / measured, "predicted_mfu": sim.mfu,
            "peak_bytes": peak, "predicted_peak_bytes": plan.predicted_peak_bytes[0],
            "loss": res.loss}
        if schedule == "epp":
            path = os.path.join(out, f"calibration-{device.type}.json")
            with open(path, "w") as f:
                f.write(feedback.calibration_json(feedback.share(),
                                                  "bench/gpu_check.py: EPP actions, bf16"))
            results[schedule]["calibration"] = path
    for s, x in results.items():
        report.append(f"| {s} | {x['setting']} | {x['tokens_per_s']:.0f} | {x['mfu']:.1%} "
                      f"({x['predicted_mfu']:.1%}) | {x['step_s']:.3f} s "
                      f"({x['predicted_step_s']:.3f} s) | {x['peak_bytes'] / 2**30:.2f} GiB "
                      f"({x['predicted_peak_bytes'] / 2**30:.2f} GiB) |")
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--quick", action="store_true", help="fewer iterations")
    ap.add_argument("--out", default="gpu-check", help="where the report and files go")
    a = ap.parse_args()
    if a.device == "cuda" and not torch.cuda.is_available():
        sys.exit("gpu_check: --device cuda, but PyTorch sees no GPU (use --device cpu)")
    os.makedirs(a.out, exist_ok=True)
    device = torch.device("cuda", 0) if a.device == "cuda" else torch.device("cpu")
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    lines = [f"# GPU check on {name} (PyTorch {torch.__version__})", "",
             "| schedule | layout | chunks | largest relative error |", "|---|---|---|---:|"]
    worst, tol = maths(device, lines)
    lines += ["", f"every gradient within {worst:.1e} of the C++ engine's (tolerance {tol:.0e})",
              "", "| schedule | setting | tokens/s | MFU (plan) | step (plan) | peak (plan) |",
              "|---|---|---:|---:|---:|---:|"]
    results = throughput(device, a.quick, lines, a.out)
    ratio = results["epp"]["tokens_per_s"] / results["1f1b"]["tokens_per_s"]
    lines += ["", f"EPP / 1F1B tokens/s: {ratio:.2f}"]
    with open(os.path.join(a.out, "gpu_check.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(a.out, "gpu_check.json"), "w") as f:
        json.dump({"device": name, "torch": torch.__version__, "max_gradient_error": worst,
                   "throughput": results}, f, indent=2)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
