"""`infinipipe.torch.wrap(model, args)`: a Hugging Face transformers causal LM trained with EPP
plans (an EppModel), in one call.

    epp = infinipipe.torch.wrap(model, ["--pp", "2", "--memory-budget", "2GiB"])
    optimizer = torch.optim.AdamW(epp.parameters(), lr=1e-4)
    loss = epp.forward_backward(token_id_lists)  # plans the global batch, runs it, gradients
    optimizer.step(); optimizer.zero_grad()

`args` are `infinipipe train`'s configuration words (layout, schedule, --memory-budget,
--device preset, --seq-length, ...); the model's config.json (`model.config`) is the model, read
by infinipipe's one reader of it, so model flags may repeat it, not contradict it.

In one process the plan's every pipeline rank runs here, in turn (the stages are views of the
model's modules: no copy). Launched by torchrun or mpirun with pp x dp processes, each process
wraps the same model and keeps its rank's stages; gradients are summed over the replicas and the
tied embedding's ends, as the trainer sums them. Either way the model's own parameters hold the
gradients and the trained values, so `model.generate` and `save_pretrained` work as before.
"""

from __future__ import annotations

from typing import Dict, Iterator, List, Optional, Sequence

import torch
from torch import nn

import infinipipe as ip
from infinipipe.torch.launch import launch_env
from infinipipe.torch.executor import RankStats, run_plan_local
from infinipipe.torch.hf import HfModel, HfStage


class EppModel:
    def __init__(self, model: nn.Module, args: Sequence[str] = (),
                 dtype: Optional[torch.dtype] = None):
        """`dtype`: the compute dtype (torch.bfloat16: the fp32 parameters are cast once per
        step into bf16 working copies), default the parameters' own."""
        launch = launch_env()
        text = model.config.to_json_string()
        # One process runs every rank of the layout; launched, dp follows the processes.
        world = launch.world_size if launch.world_size > 1 else 0
        cfg = ip.Config.for_hf_model(text, f"{type(model).__name__}.config", list(args), world)
        self.cost = ip.CostModel.from_config(cfg)
        self.config = cfg.with_stage_layout(self.cost)
        self.layout = self.config.stage_layout(self.cost)
        self.hf = HfModel(model, self.config.model.seq_length)
        self.model = model
        self.dtype = dtype
        self.device = next(model.parameters()).device
        self.last_plans: List[ip.Plan] = []
        self._step = None
        if launch.world_size > 1:
            self._launched()
        else:
            self.stages: Dict[int, HfStage] = {s.index: self.hf.stage(s) for s in self.layout}

    def _launched(self) -> None:
        from infinipipe.torch.distributed import setup
        from infinipipe.torch.planning import BatchPlanner
        from infinipipe.torch.trainer import RankModel, TrainStep

        cfg = self.config
        device = "cpu" if self.device.type == "cpu" else "cuda"
        self.groups = setup(cfg.pp, cfg.dp, device, len(self.layout), cfg.model.tie_embeddings,
                            cfg.p2p_timeout, sp=cfg.ulysses_degree)
        self.rank_model = RankModel(cfg, self.layout, self.groups,
                                    next(self.model.parameters()).dtype,
                                    self.hf.stage)
        self.stages = self.rank_model.stages
        self._planner = BatchPlanner(cfg, self.cost, self.groups)
        self._step = TrainStep(cfg, self.rank_model, None, bf16=self.dtype == torch.bfloat16)

    def parameters(self) -> Iterator[nn.Parameter]:
        """The parameters this process trains (every one in a single process)."""
        seen = set()
        for stage in self.stages.values():
            for p in stage.parameters():
                if id(p) not in seen:
                    seen.add(id(p))
                    yield p

    def plan(self, lengths: Sequence[int]) -> ip.Plan:
        """The plan of sequences of these lengths (one replica's share)."""
        return ip.plan(list(lengths), self.config, self.cost).plan

    def forward_backward(self, sequences: Sequence[Sequence[int]]) -> float:
        """One global batch (token id lists; every process passes the same): its mean loss over
        the predicted tokens, each parameter's gradient of it added to its .grad."""
        seqs = [list(s) for s in sequences]
        predicted = sum(max(len(s) - 1, 0) for s in seqs)
        if predicted == 0:
            raise ip.ConfigError("the batch predicts no token: every sequence needs 2 tokens")
        if self._step is not None:
            return self._forward_backward_launched(seqs, predicted)
        cfg = self.config
        shares = [seqs] if cfg.dp == 1 else [
            [seqs[i] for i in part] for part in
            ip.replica_split([len(s) for s in seqs], cfg.dp, self.cost, cfg)]
        loss, self.last_plans = 0.0, []
        for share in shares:  # the replicas in turn: their gradients add up in .grad
            if not share:
                continue
            plan = self.plan([len(s) for s in share])
            self.last_plans.append(plan)
            stats: List[RankStats] = run_plan_local(plan, self.stages, share, 1.0 / predicted,
                                                    self.device, self.dtype)
            loss += sum(s.loss_sum for s in stats)
        return loss / predicted

    def _forward_backward_launched(self, seqs, predicted: int) -> float:
        g = self.groups
        share = self._planner.share_of(seqs)
        text = None
        if g.stage == 0 and g.sp_rank == 0:
            text = self.plan([len(s) for s in share]).to_json()
        plan, _ = self._planner.share_plan(text, "")
        self.last_plans = [plan]
        grads = {id(p): p.grad for p in self.parameters()}
        loss, _ = self._step.gradients(plan, share, predicted)
        for p in self.parameters():  # gradients() replaced them: add to what was there
            before = grads[id(p)]
            if before is not None:
                p.grad.add_(before)
        return loss

    def save(self, directory: str, iteration: int = 0) -> None:
        """The weights as an infinipipe checkpoint (docs/checkpoints.md): what `infinipipe
        checkpoint export` (ip.export_hf) turns into a Hugging Face folder, and either trainer
        loads. Every process calls it; without optimizer state."""
        def values(stages) -> dict:
            out = {}
            for stage in stages:
                copy = stage.tied_weight() if stage.tied_copy else None
                for name, p in stage.named_parameters():
                    if p is not copy:
                        out[name] = p.detach().to("cpu", torch.float32).numpy()
            return out

        cfg, yaml = self.config, self.config.to_yaml()
        if self._step is None:
            ip.checkpoint_save_shard(directory, iteration, 0, 1, values(self.stages.values()),
                                     cfg, with_optimizer=False)
            ip.checkpoint_commit(directory, cfg, yaml, iteration, 0)
            return
        import torch.distributed as dist

        g = self.groups
        if g.copy_index == 0:
            ip.checkpoint_save_shard(directory, iteration, g.stage, g.pp,
                                     values(self.stages.values()), cfg, with_optimizer=False)
        dist.barrier()
        if g.rank == 0:
            ip.checkpoint_commit(directory, cfg, yaml, iteration, 0)
        dist.barrier()

    def close(self) -> None:
        if self._step is not None:
            from infinipipe.torch.distributed import shutdown

            shutdown()


def wrap(model: nn.Module, args: Sequence[str] = (),
         dtype: Optional[torch.dtype] = None) -> EppModel:
    """A transformers LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM or
    MistralForCausalLM, trained with infinipipe's plans (see the module's doc)."""
    return EppModel(model, args, dtype)
