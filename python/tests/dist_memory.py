"""One rank of the memory check (run under mpirun by test_memory.py), in fp32 and then in bf16
(each with its own memory budget): trains one step of a fixed batch (so the optimizer state
exists), then runs the next step's actions and gradient sums under PyTorch's profiler and writes
OUT/<fp32|bf16>-rank<R>.json: this rank's tensor peak (the bytes held at the start — weights and
optimizer state — plus the highest running total of the profiler's CPU allocations and frees)
and the plan's predicted peak for the rank.

usage: dist_memory.py OUT SEED LENGTHS FP32-BUDGET,BF16-BUDGET CONFIG-WORDS...
       (LENGTHS: comma-separated; CONFIG-WORDS without --memory-budget and --bf16)
"""

import json
import sys

import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile

import infinipipe as ip
from infinipipe.torch.distributed import setup, shutdown
from infinipipe.torch.planning import BatchPlanner
from infinipipe.torch.trainer import RankModel, TrainStep, make_optimizer, predicted_tokens


def allocation_peak(fn):
    """fn()'s result and the highest total of the CPU tensor bytes it allocated and not yet
    freed, at any moment (PyTorch's allocator events, every thread of the process)."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        result = fn()
    events = sorted((e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events()
                    if e.name() == "[memory]")
    total = peak = 0
    for _, n in events:
        total += n
        peak = max(peak, total)
    return result, peak


def held_bytes(model, optimizer) -> int:
    """What the rank holds between steps: parameters and optimizer state (gradients are None)."""
    n = sum(p.nbytes for _, p in model.named_parameters())
    for state in optimizer.state.values():
        n += sum(t.nbytes for t in state.values() if torch.is_tensor(t))
    return n


def main():
    out, seed, lengths, budgets, words = (sys.argv[1], int(sys.argv[2]), sys.argv[3],
                                          sys.argv[4].split(","), sys.argv[5:])
    lengths = [int(n) for n in lengths.split(",")]
    g = None
    for precision, budget in zip(("fp32", "bf16"), budgets):
        more = ["--memory-budget", budget] + (["--bf16"] if precision == "bf16" else [])
        g = measure(out, precision, seed, lengths, words + more, g)
    shutdown()


def measure(out, precision, seed, lengths, words, g):
    cfg = ip.Config.from_args(words)
    cost = ip.CostModel.from_config(cfg)
    cfg = cfg.with_stage_layout(cost)
    layout = cfg.stage_layout(cost)
    if g is None:
        g = setup(cfg.pp, cfg.dp, "cpu", len(layout), cfg.model.tie_embeddings, 120.0,
                  sp=cfg.ulysses_degree)
    model = RankModel(cfg, layout, g)
    model.init()
    rng = np.random.default_rng(seed)
    seqs = [[int(t) for t in rng.integers(0, cfg.model.vocab_size, n)] for n in lengths]
    planner = BatchPlanner(cfg, cost, g)
    share = planner.share_of(seqs)
    text = ip.plan([len(s) for s in share], cfg, cost).plan.to_json() if g.stage == 0 else None
    plan, _ = planner.share_plan(text, "")
    optimizer = make_optimizer(cfg, model)
    step = TrainStep(cfg, model, optimizer, bf16=cfg.get("bf16") == "true")
    step.run(plan, share, predicted_tokens(lengths), 1e-4)
    for _, p in model.named_parameters():
        p.grad = None
    held = held_bytes(model, optimizer)
    _, peak = allocation_peak(lambda: step.gradients(plan, share, predicted_tokens(lengths)))
    record = {"precision": precision, "rank": g.rank, "stage": g.stage, "held": held, "measured": held + peak,
              "predicted": plan.predicted_peak_bytes[g.stage],
              "kinds": sorted({c.kind for c in plan.chunks}),
              "recompute": sum(a.recompute_layers for a in plan.actions[g.stage])}
    with open(f"{out}/{precision}-rank{g.rank}.json", "w") as f:
        json.dump(record, f)
    return g


if __name__ == "__main__":
    main()
