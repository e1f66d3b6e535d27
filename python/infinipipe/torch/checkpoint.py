"""A PyTorch rank's part of a checkpoint in infinipipe's format (docs/checkpoints.md): its shard
of the weights and the optimizer's moments and step counts, which the run driver writes and reads
with the C++ code the ``infinipipe`` command uses (with the iteration, the data position and the
online cost fit), so either runtime resumes the other's run. Hugging Face folders load as
weights only (the run starts at iteration 0)."""

from __future__ import annotations

import numpy as np
import torch

import infinipipe as ip
from infinipipe.torch.trainer import RankModel, sharded


def _numpy(t: torch.Tensor) -> np.ndarray:
    return t.detach().to(device="cpu", dtype=torch.float32).contiguous().numpy()


def _states(model: RankModel, optimizer, iteration: int, names) -> dict:
    """name -> (step, exp_avg, exp_avg_sq) of the optimizer's state of `names`."""
    owned = {id(p) for group in optimizer.param_groups for p in group["params"]}
    out = {}
    for name, p in model.unique_parameters():
        if name not in names or id(p) not in owned:
            continue
        st = optimizer.state.get(p)
        if st and "exp_avg" in st:
            out[name] = (int(float(st["step"])), _numpy(st["exp_avg"]), _numpy(st["exp_avg_sq"]))
        elif iteration > 0 and not isinstance(optimizer, torch.optim.AdamW):
            empty = np.zeros(0, dtype=np.float32)
            out[name] = (iteration, empty, empty)  # SGD keeps only its step count
    return out


def shard(iteration: int, config: ip.Config, model: RankModel,
          optimizer: torch.optim.Optimizer) -> dict:
    """This rank's shard of the checkpoint after `iteration`, as the run driver writes it
    (backend.TorchBackend.shard). Replica 0 of each pipeline rank writes the parameters (the
    replicas hold the same) with their optimizer state; sharded, every rank writes the states
    it owns, as the C++ distributed optimizer's checkpoints do."""
    g = model.groups
    names = {n for n, _ in model.unique_parameters()}
    writer = g.copy_index == 0  # the first of the stage's copies writes its parameters
    out = {"params": {n: _numpy(p) for n, p in model.unique_parameters()} if writer else {},
           "states": _states(model, optimizer, iteration, names), "shapes": {},
           "writes": writer, "every_replica_saves": sharded(config, model),
           "rank": g.stage, "num_ranks": g.pp, "model_part": -1, "model_parts": 0}
    if out["every_replica_saves"]:
        out.update(shapes={n: list(p.shape) for n, p in model.unique_parameters()}, writes=True,
                   rank=g.rank, num_ranks=g.world_size, model_part=g.stage, model_parts=g.pp)
    return out


def load_state(reader: ip.CheckpointReader, config: ip.Config, model: RankModel,
               optimizer: torch.optim.Optimizer) -> None:
    """Weights and optimizer state of the checkpoint `reader` opened (the run driver checked
    its model and samples), whatever layout or runtime wrote it."""
    names = sorted({n for n, _ in model.named_parameters()})
    model.load(reader.read_params(names))
    owned = {id(p) for group in optimizer.param_groups for p in group["params"]}
    states = reader.read_optimizer(config, names)
    for name, p in model.named_parameters():
        if name in states and id(p) in owned and isinstance(optimizer, torch.optim.AdamW):
            step, m, v = states[name]
            optimizer.state[p] = {
                "step": torch.tensor(float(step)),
                "exp_avg": torch.as_tensor(m).to(device=p.device, dtype=p.dtype),
                "exp_avg_sq": torch.as_tensor(v).to(device=p.device, dtype=p.dtype),
            }


def load_weights(directory: str, config: ip.Config, model: RankModel) -> None:
    """Weights only (--pretrained-checkpoint, or --load of a Hugging Face folder)."""
    if ip.checkpoint_latest(directory) is None and ip.hf_folder_is(directory):
        _, values = ip.read_hf(directory)
        model.load(values)
        return
    reader = ip.CheckpointReader(directory)
    reader.check_model(config.model)
    model.load(reader.read_params(sorted({n for n, _ in model.named_parameters()})))
