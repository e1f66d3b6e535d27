"""The ranks of distributed gradient checks (run under mpirun by test_dist.py and
test_hf_models.py): for each case of CASES.json, in turn, plans a fixed random batch for its
layout, executes it with infinipipe.torch and writes this rank's gradients (summed over replicas
and the tied embedding's ends), the loss and what the plan did to CASE_OUT/rank<R>.npz. The
cases of one job share its processes (their start-up, mostly importing PyTorch, would otherwise
be most of the check's time); each builds its own groups and model.

usage: dist_grads.py CASES.json
  CASES.json: [{"out": DIR, "seed": S, "lengths": [N, ...], "words": [CONFIG-WORDS...],
                "hf_model": DIR or absent}, ...], every case's layout of the job's world size

With hf_model the stages are the folder's transformers model (infinipipe.torch.hf) in float64,
its config.json the model, its weights the start.
"""

import json
import sys

import numpy as np
import torch

import infinipipe as ip
from infinipipe.torch.distributed import setup, shutdown
from infinipipe.torch.planning import BatchPlanner
from infinipipe.torch.trainer import RankModel, TrainStep, make_optimizer, predicted_tokens


def batch(seed: int, lengths, vocab: int):
    rng = np.random.default_rng(seed)
    return [[int(t) for t in rng.integers(0, vocab, n)] for n in lengths]


def run_case(case):
    out, seed, lengths, words = case["out"], case["seed"], case["lengths"], case["words"]
    folder = case.get("hf_model")
    if folder is None:
        cfg = ip.Config.from_args(words)
    else:
        cfg = ip.Config.for_training(words + ["--pretrained-checkpoint", folder])
    cost = ip.CostModel.from_config(cfg)
    cfg = cfg.with_stage_layout(cost)
    layout = cfg.stage_layout(cost)
    g = setup(cfg.pp, cfg.dp, "cpu", len(layout), cfg.model.tie_embeddings, 120.0,
              sp=cfg.ulysses_degree)
    if folder is None:
        model = RankModel(cfg, layout, g)
        model.init()
    else:
        from infinipipe.torch.hf import load_folder

        hf = load_folder(folder, cfg.model.seq_length, torch.float64)
        model = RankModel(cfg, layout, g, torch.float64, hf.stage)
    seqs = batch(seed, lengths, cfg.model.vocab_size)
    planner = BatchPlanner(cfg, cost, g)  # the trainer's split and plan sharing
    share = planner.share_of(seqs)
    planning = g.stage == 0 and g.sp_rank == 0
    text = ip.plan([len(s) for s in share], cfg, cost).plan.to_json() if planning else None
    plan, _ = planner.share_plan(text, "")
    step = TrainStep(cfg, model, make_optimizer(cfg, model))
    loss, _ = step.gradients(plan, share, predicted_tokens(lengths))
    record = {"loss": np.array(loss)}
    for index, stage in model.stages.items():
        for name, p in stage.named_parameters():
            record[f"grad/{index}/{name}"] = p.grad.numpy()
    record["dtype"] = np.array(str(next(model.named_parameters())[1].dtype))
    record["kinds"] = np.array([c.kind for c in plan.chunks])
    record["pipelines"] = np.array(plan.num_pipelines)
    record["recompute"] = np.array(sum(a.recompute_layers for a in plan.actions[g.stage]))
    record["vpp"] = np.array(plan.vpp)
    np.savez(f"{out}/rank{g.rank}.npz", **record)


def main():
    with open(sys.argv[1]) as f:
        cases = json.load(f)
    for case in cases:
        run_case(case)
    shutdown()


if __name__ == "__main__":
    main()
