"""One phase of the GPU check, run by bench/gpu_check.py in a process of its own (so a crash or a
hung kernel loses that phase only). Writes SCRATCH/phase-NAME.json:

* preflight: infinipipe.torch.attention.kernel_preflight in fp32 and bf16 (on CUDA under
  sdpa_kernel([FLASH, EFFICIENT, CUDNN]), so a fallback to the math path fails);
* maths: every schedule's plan and a sliced, recomputing plan on virtual stages, run by
  run_plan_local in fp32 (TF32 off), loss and gradients against the C++ engine's reference
  (REFERENCE/small.npz): 1e-4 relative on CUDA, 1e-5 on a CPU;
* pp1: EPP against 1F1B in bf16 through TrainStep (optimizer included): tokens/s, MFU, peak
  memory allocated and reserved against the plan; EPP's action times fed to CostFeedback and
  written as OUT/calibration-DEVICE.json;
* pp2, pp4: the same through run_plan_local, every pipeline rank on this one device (forward and
  backward only; the predicted peak is the sum over the ranks).

    python3 bench/gpu_check_phases.py PHASE --device cuda --out DIR --scratch DIR \
        --reference DIR [--quick]       # writes SCRATCH/phase-PHASE.json
"""

import argparse
import inspect
import json
import os
import sys
import time

import numpy as np
import torch

import infinipipe as ip
from infinipipe.torch import attention
from infinipipe.torch.distributed import RankGroups
from infinipipe.torch.executor import run_plan_local
from infinipipe.torch.model import stage_from_spec
from infinipipe.torch.trainer import RankModel, TrainStep, make_optimizer, predicted_tokens

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_check_cases import CPU_MODEL, GPU_MODEL, SLICED, SMALL, long_tail, maths_cases  # noqa
from gpu_check_reference import read_reference  # noqa: E402


def preflight(device, a):
    out = {}
    for dtype in (torch.float32, torch.bfloat16):
        r = attention.kernel_preflight(device, dtype)
        out[str(dtype).replace("torch.", "")] = r
    return out


def maths(device, a):
    tol = 1e-5 if device.type == "cpu" else 1e-4
    params, seqs, want_loss, want = read_reference(os.path.join(a.reference, "small.npz"))
    lengths = [len(s) for s in seqs]
    cases = []
    for name, words in maths_cases(ip.schedules()):
        cfg = ip.Config.from_args(SMALL + words)
        # The stages fixed as train fixes them: --vpp 2 is then the sliced case's layout, not
        # one the search may leave for vpp 1.
        cfg = cfg.with_stage_layout(ip.CostModel.from_config(cfg))
        plan = ip.plan(lengths, cfg).plan
        kinds = sorted({c.kind for c in plan.chunks})
        recompute = sum(x.recompute_layers for r in plan.actions for x in r)
        if (name, words) == SLICED and ("split" not in kinds and "hybrid" not in kinds
                                        or recompute == 0 or plan.vpp < 2):
            raise RuntimeError(f"the sliced case planned {kinds} chunks, {recompute} recomputed "
                               f"layers, vpp {plan.vpp}: it no longer checks slicing, recompute "
                               f"and virtual stages (bench/gpu_check_cases.py)")
        stages = {s.index: stage_from_spec(cfg.model, s).to(device) for s in plan.stages}
        for st in stages.values():
            st.load({n: params[n] for n, _ in st.named_parameters()})
        predicted = predicted_tokens(lengths)
        stats = run_plan_local(plan, stages, seqs, 1.0 / predicted, device)
        loss = sum(float(x.loss_sum) for x in stats) / predicted
        grads = {}
        for st in stages.values():
            for n, p in st.named_parameters():
                grads[n] = grads.get(n, 0) + p.grad.float().cpu().numpy()
        err = max(float(np.abs(grads[n] - g).max() / np.abs(g).max()) for n, g in want.items())
        err = max(err, abs(loss - want_loss) / abs(want_loss))
        cases.append({"case": name, "pp": plan.pp, "vpp": plan.vpp, "chunks": kinds,
                      "recomputed_layers": recompute, "relative_error": err})
        if err > tol:
            raise RuntimeError(f"{name}: loss or gradients {err:.2e} from the C++ engine's "
                               f"(tolerance {tol:.0e})")
    return {"tolerance": tol, "cases": cases,
            "max_relative_error": max(c["relative_error"] for c in cases)}


def _workload(device, pp, schedule):
    """The bf16 throughput configuration: a ~1B model on a GPU (its memory split over the
    pipeline ranks sharing it), a small one on a CPU."""
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        preset = ip.gpu_preset(name) or "h100-80gb"  # a GPU without a preset planned as an H100
        budget = int(0.8 * torch.cuda.get_device_properties(device).total_memory / pp) >> 20
        words = GPU_MODEL + ["--device", preset, "--memory-budget", f"{budget}MiB"]
    else:
        words = CPU_MODEL + ["--device", "cpu", "--memory-budget", "48MiB"]
    return ip.Config.from_args(words + ["--pp", str(pp), "--schedule", schedule])


def _fill(params, std):
    """Weights of the right shapes and scale: speed does not depend on the values, and the
    planner-only module has no engine (init_params) to make them."""
    gen = torch.Generator(device=params[0][1].device).manual_seed(1)
    with torch.no_grad():
        for name, p in params:
            if name.endswith("norm.weight"):
                p.fill_(1.0)
            else:
                p.normal_(0.0, std, generator=gen)


def _memory(device):
    if device.type != "cuda":
        return {}
    return {"peak_allocated_bytes": torch.cuda.max_memory_allocated(device),
            "peak_reserved_bytes": torch.cuda.max_memory_reserved(device)}


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _local_runner():
    """run_plan_local in bf16 as the trainer runs it (fp32 weights, bf16 working copies) where
    it takes a dtype (RankExecutor does), else with the stages' weights in bf16."""
    if "dtype" in inspect.signature(run_plan_local).parameters:
        return "run_plan_local, bf16 working copies", torch.float32, {"dtype": torch.bfloat16}
    return "run_plan_local, bf16 weights (it takes no dtype)", torch.bfloat16, {}


def throughput(device, a, pp):
    iters = (2 if a.quick else 4) if device.type == "cpu" else (3 if a.quick else 5)
    rng = np.random.default_rng(7)
    out = {"pp": pp}
    for schedule in ("epp", "1f1b"):
        r = {}
        out[schedule] = r
        model = step = stages = None
        try:
            cfg = _workload(device, pp, schedule)
            cost = ip.CostModel.from_config(cfg)
            cfg = cfg.with_stage_layout(cost)
            lengths = long_tail(rng, cfg.global_batch_size, cfg.model.seq_length)
            seqs = [[int(t) for t in rng.integers(0, cfg.model.vocab_size, n)] for n in lengths]
            t0 = time.perf_counter()
            res = ip.plan(lengths, cfg, cost)
            r["planning_s"] = time.perf_counter() - t0
            plan, sim = res.plan, ip.simulate(res.plan, cfg, cost)
            r.update({"setting": res.setting, "tokens": sum(lengths),
                      "predicted_step_s": plan.predicted_step_time, "predicted_mfu": sim.mfu,
                      "predicted_peak_bytes": sum(plan.predicted_peak_bytes)})
            std = cfg.model.init_method_std
            if pp == 1:
                r["path"] = "TrainStep, bf16, Adam"
                with device:  # made on the device: a 1B model's CPU init takes long
                    model = RankModel(cfg, cfg.stage_layout(cost),
                                      RankGroups(0, 1, 1, 1, 0, 0, device, "none"))
                _fill(list(model.named_parameters()), std)
                step = TrainStep(cfg, model, make_optimizer(cfg, model), bf16=True)
                feedback = ip.CostFeedback(cost)
            else:
                r["path"], dtype, kwargs = _local_runner()
                with device:
                    stages = {s.index: stage_from_spec(cfg.model, s).to(dtype=dtype)
                              for s in plan.stages}
                _fill([p for st in stages.values() for p in st.named_parameters()], std)
            times = []
            for i in range(iters):
                if device.type == "cuda":
                    torch.cuda.reset_peak_memory_stats(device)
                _sync(device)
                t0 = time.perf_counter()
                if pp == 1:
                    res_step = step.run(plan, seqs, predicted_tokens(lengths), 1e-5)
                    loss = res_step.loss
                else:
                    for st in stages.values():
                        st.zero_grad(set_to_none=True)
                    stats = run_plan_local(plan, stages, seqs, 1.0 / predicted_tokens(lengths),
                                           device, **kwargs)
                    loss = sum(float(x.loss_sum) for x in stats) / predicted_tokens(lengths)
                _sync(device)
                times.append(time.perf_counter() - t0)
                if pp == 1 and i > 0:  # the first step warms the kernels up
                    feedback.observe(plan, cost, cfg, 0, [(t.index, t.end - t.start)
                                                          for t in res_step.stats.times])
            measured = min(times[1:])
            r.update({"step_s": measured, "tokens_per_s": r["tokens"] / measured,
                      "mfu": r["predicted_mfu"] * plan.predicted_step_time / measured,
                      "loss": loss, "iterations": iters, **_memory(device)})
            if pp == 1 and schedule == "epp":
                path = os.path.join(a.out, f"calibration-{device.type}.json")
                with open(path, "w") as f:
                    f.write(feedback.calibration_json(
                        feedback.share(), "bench/gpu_check.py: EPP actions at pp 1, bf16"))
                r["calibration"] = path
                r["calibration_samples"] = feedback.samples
        except torch.cuda.OutOfMemoryError as e:  # this schedule's numbers only
            r.update({"error": f"out of memory: {str(e).splitlines()[0]}", **_memory(device)})
        except ip.Error as e:  # a budget the batch does not fit: the other schedule still runs
            r["error"] = f"{type(e).__name__}: {e}"
        finally:
            model = step = stages = None  # noqa: F841  (this schedule's memory, freed)
            if device.type == "cuda":
                torch.cuda.empty_cache()
    return out


PHASES = {"preflight": preflight, "maths": maths,
          "pp1": lambda d, a: throughput(d, a, 1), "pp2": lambda d, a: throughput(d, a, 2),
          "pp4": lambda d, a: throughput(d, a, 4)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("phase", choices=sorted(PHASES))
    ap.add_argument("--device", choices=["cuda", "cpu"], required=True)
    ap.add_argument("--out", required=True, help="the report's folder (the calibration file)")
    ap.add_argument("--scratch", required=True, help="where phase-PHASE.json goes")
    ap.add_argument("--reference", required=True, help="folder of small.npz")
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    device = torch.device("cuda", 0) if a.device == "cuda" else torch.device("cpu")
    if device.type == "cuda":  # the maths compare fp32 with fp32
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    t0 = time.perf_counter()
    result = {"phase": a.phase}
    try:
        result.update(PHASES[a.phase](device, a))
        failed = [f"{s}: {result[s]['error']}" for s in ("epp", "1f1b")
                  if "error" in result.get(s, {})]
        result["ok"] = not failed
        if failed:
            result["error"] = "; ".join(failed)
    except torch.cuda.OutOfMemoryError as e:
        result.update({"ok": False, "error": f"out of memory: {str(e).splitlines()[0]}",
                       **_memory(device)})
    except (RuntimeError, ValueError, KeyError, ip.Error) as e:
        result.update({"ok": False, "error": f"{type(e).__name__}: {e}"})
    result["seconds"] = time.perf_counter() - t0
    with open(os.path.join(a.scratch, f"phase-{a.phase}.json"), "w") as f:
        json.dump(result, f, indent=2, default=str)
    sys.exit(0 if result["ok"] else 1)


if __name__ == "__main__":
    main()
