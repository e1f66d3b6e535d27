"""Checkpoints of a PyTorch run in infinipipe's format (docs/checkpoints.md), written and read by
the C++ code the ``infinipipe`` command uses, so either runtime resumes the other's run: the
weights, the optimizer's moments and step counts, the iteration and the data position.
Hugging Face folders load as weights only (the run starts at iteration 0)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist

import infinipipe as ip
from infinipipe.torch.trainer import RankModel, sharded


@dataclass
class Resumed:
    iteration: int = 0
    consumed_samples: int = 0
    delay_state: str = ""


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


def save(directory: str, iteration: int, consumed_samples: int, delay_state: str,
         config: ip.Config, config_yaml: str, model: RankModel,
         optimizer: torch.optim.Optimizer) -> None:
    """Every rank calls it, then rank 0 commits. Replica 0 of each pipeline rank writes the
    parameters (the replicas hold the same) with their optimizer state; sharded, every rank
    writes the states it owns, as the C++ distributed optimizer's checkpoints do."""
    g = model.groups
    names = {n for n, _ in model.unique_parameters()}
    writer = g.copy_index == 0  # the first of the stage's copies writes its parameters
    params = {n: _numpy(p) for n, p in model.unique_parameters()} if writer else {}
    states = _states(model, optimizer, iteration, names)
    if sharded(config, model):
        shapes = {n: list(p.shape) for n, p in model.unique_parameters()}
        ip.checkpoint_save_shard(directory, iteration, g.rank, g.world_size, params, config,
                                 states, model_part=g.stage, model_parts=g.pp, shapes=shapes)
    elif writer:
        ip.checkpoint_save_shard(directory, iteration, g.stage, g.pp, params, config, states)
    if g.distributed:
        dist.barrier()
    if g.rank == 0:
        ip.checkpoint_commit(directory, config, config_yaml, iteration, consumed_samples,
                             delay_state)
    if g.distributed:
        dist.barrier()


def load(directory: str, config: ip.Config, model: RankModel,
         optimizer: torch.optim.Optimizer) -> Resumed:
    """Resumes from the newest complete checkpoint under `directory`, whatever layout or runtime
    wrote it; a Hugging Face folder gives the weights only."""
    if ip.checkpoint_latest(directory) is None and ip.hf_folder_is(directory):
        load_weights(directory, config, model)
        return Resumed()
    reader = ip.CheckpointReader(directory)
    reader.check_model(config.model)
    reader.check_samples(config)
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
    return Resumed(reader.iteration, reader.consumed_samples, reader.delay_state)


def load_weights(directory: str, config: ip.Config, model: RankModel) -> None:
    """Weights only (--pretrained-checkpoint, or --load of a Hugging Face folder)."""
    if ip.checkpoint_latest(directory) is None and ip.hf_folder_is(directory):
        _, values = ip.read_hf(directory)
        model.load(values)
        return
    reader = ip.CheckpointReader(directory)
    reader.check_model(config.model)
    model.load(reader.read_params(sorted({n for n, _ in model.named_parameters()})))
