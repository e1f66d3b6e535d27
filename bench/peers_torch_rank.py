"""One rank of bench/peers_torch.py, launched by `torch.distributed.run` (or mpirun).

    peers_torch_rank.py peer --model DIR --batches FILE --schedule NAME --mode pad|pack ...
    peers_torch_rank.py epp --rss FILE -- [infinipipe.torch.train's flags]

`peer` trains the Hugging Face LlamaForCausalLM in DIR with torch.distributed.pipelining as its
users run it: the model's decoder layers split by hand into PipelineStages (torchtitan's way:
the embedding on the first stage, the final norm and head on the last), one of the library's
schedules, fixed-shape micro-batches of one row each. `epp` runs infinipipe.torch's trainer in
this process. Both write the rank's memory peak the same way: ru_maxrss less the resident size
after the imports (torch, transformers, infinipipe), so weights, optimizer state, activations,
communication buffers and the allocator's keep are counted alike."""

import argparse
import ctypes
import json
import os
import resource
import sys
import time

import torch
import torch.distributed as dist
import torch.distributed.pipelining as pipelining
import transformers
from transformers import LlamaForCausalLM  # transformers imports its modelling code lazily

# Both modes import the same code before the baseline is taken.
import infinipipe  # noqa: F401
import infinipipe.torch.checkpoint  # noqa: F401
from infinipipe.torch.launch import launch_env
import infinipipe.torch.executor  # noqa: F401
import infinipipe.torch.planning  # noqa: F401
import infinipipe.torch.train as epp_train
import infinipipe.torch.trainer  # noqa: F401


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


BASELINE = rss_bytes()  # after the imports, before any model or process group


def write_rss(path, **extra):
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    rank = launch_env().rank
    with open(f"{path}.rank{rank}", "w") as f:
        json.dump(dict(rank=rank, baseline=BASELINE, maxrss=peak, peak=peak - BASELINE, **extra),
                  f)


def keep_freed_memory():
    """The glibc thresholds infinipipe.torch.train sets (its _keep_freed_memory), so both
    runtimes allocate under the same malloc settings."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except AttributeError:
        return
    mallopt(-3, 64 << 20)  # M_MMAP_THRESHOLD
    mallopt(-1, 1 << 30)  # M_TRIM_THRESHOLD


class HFStage(torch.nn.Module):
    """Decoder layers [first, last) of a LlamaForCausalLM, with the embedding on stage 0 and the
    final norm and LM head on the last stage; the rotary table is recomputed per stage (what
    LlamaModel.forward does once). No attention mask: transformers' default causal mask (SDPA
    with is_causal)."""

    def __init__(self, model, layer_ids, is_first, is_last):
        super().__init__()
        self.embed_tokens = model.model.embed_tokens if is_first else None
        self.layers = torch.nn.ModuleList(model.model.layers[i] for i in layer_ids)
        self.rotary_emb = model.model.rotary_emb
        self.norm = model.model.norm if is_last else None
        self.lm_head = model.lm_head if is_last else None

    def forward(self, x):
        h = self.embed_tokens(x) if self.embed_tokens is not None else x
        positions = torch.arange(h.shape[1], device=h.device).unsqueeze(0)
        rope = self.rotary_emb(h, positions)
        for layer in self.layers:
            h = layer(h, position_ids=positions, position_embeddings=rope)
        if self.lm_head is not None:
            h = self.lm_head(self.norm(h))
        return h


SCHEDULES = {  # name -> (class name, virtual stages per rank, placement)
    "gpipe": ("ScheduleGPipe", 1, "loop"),
    "1f1b": ("Schedule1F1B", 1, "loop"),
    "interleaved1f1b": ("ScheduleInterleaved1F1B", 2, "loop"),
    "interleavedzb": ("ScheduleInterleavedZeroBubble", 2, "loop"),
    "zbv": ("ScheduleZBVZeroBubble", 2, "v"),
}


def stage_ids(rank, world, virtual, placement):
    if virtual == 1:
        return [rank]
    if placement == "v":  # ZBV: rank r holds stages r and 2*world-1-r
        return [rank, 2 * world - 1 - rank]
    return [rank + k * world for k in range(virtual)]


def layer_split(num_layers, num_stages):
    """Contiguous, as even as the count allows (earlier stages take the remainder)."""
    if num_layers < num_stages:
        sys.exit(f"error: {num_layers} layers cannot fill {num_stages} pipeline stages")
    base, extra = divmod(num_layers, num_stages)
    bounds, at = [], 0
    for s in range(num_stages):
        n = base + (1 if s < extra else 0)
        bounds.append(range(at, at + n))
        at += n
    return bounds


def pad_batches(docs_per_batch):
    """(a) Each sequence of a global batch right-padded to the batch's longest: inputs, targets
    (-100 on padding and on each sequence's last token, which predicts nothing) and the real
    tokens (the documents' lengths, as infinipipe counts them)."""
    out = []
    for docs in docs_per_batch:
        width = max(len(d) for d in docs)
        x = torch.zeros(len(docs), width, dtype=torch.long)
        y = torch.full((len(docs), width), -100, dtype=torch.long)
        for i, d in enumerate(docs):
            t = torch.tensor(d, dtype=torch.long)
            x[i, :len(d)] = t
            y[i, :len(d) - 1] = t[1:]
        out.append((x, y, sum(len(d) for d in docs)))
    return out


def pack_batches(docs_per_batch, rows, seq_length, iters):
    """(b) The documents, in the sampler's order, concatenated into one stream and cut into rows
    of seq_length (each row's targets run one token into the next row), `rows` rows per global
    batch; attention crosses document boundaries (the default causal mask, no document mask).
    Returns the batches and the stream's tokens left untrained after the last one."""
    stream = [t for docs in docs_per_batch for d in docs for t in d]
    need = iters * rows * seq_length + 1
    if len(stream) < need:
        sys.exit(f"error: the batches file holds {len(stream)} tokens, packing {iters} "
                 f"iterations needs {need}: dump more batches")
    data = torch.tensor(stream[:need], dtype=torch.long)
    out = []
    for i in range(iters):
        at = i * rows * seq_length
        x = data[at:at + rows * seq_length].view(rows, seq_length)
        y = data[at + 1:at + rows * seq_length + 1].view(rows, seq_length)
        out.append((x, y, rows * seq_length))
    return out, len(stream) - (need - 1)


def run_peer(a):
    keep_freed_memory()
    torch.manual_seed(1)
    launch = launch_env()  # torchrun's or mpirun's variables; MASTER_ADDR/PORT from either
    dist.init_process_group("gloo", rank=launch.rank, world_size=launch.world_size)
    rank, world = dist.get_rank(), dist.get_world_size()
    with open(a.batches) as f:
        docs_per_batch = json.load(f)["batches"]
    if a.mode == "pad":
        batches = pad_batches(docs_per_batch[:a.iters])
        untrained = 0
    else:
        batches, untrained = pack_batches(docs_per_batch, a.rows, a.seq_length, a.iters)

    cls_name, virtual, placement = SCHEDULES[a.schedule]
    transformers.logging.disable_progress_bar()
    model = LlamaForCausalLM.from_pretrained(a.model, dtype=torch.float32)
    model.train()
    num_stages = world * virtual
    bounds = layer_split(model.config.num_hidden_layers, num_stages)
    mine = stage_ids(rank, world, virtual, placement)
    modules = [HFStage(model, bounds[s], s == 0, s == num_stages - 1) for s in mine]
    del model  # the layers of other stages go with it
    params = [p for m in modules for p in m.parameters()]
    decay = [p for p in params if p.dim() > 1]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                                   {"params": [p for p in params if p.dim() <= 1],
                                    "weight_decay": 0.0}], lr=a.lr)

    def loss_fn(logits, target):  # mean over the micro-batch's predicted tokens
        return torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(),
                                                 target.flatten(), ignore_index=-100)

    schedule_cls = getattr(pipelining, cls_name)
    built = {}  # width -> schedule: stage shapes are fixed when a schedule first runs

    def schedule_for(width):
        if width not in built:
            built.clear()  # one at a time (a width seen again is rebuilt: cheap, meta shapes)
            stages = [pipelining.PipelineStage(m, s, num_stages, torch.device("cpu"))
                      for m, s in zip(modules, mine)]
            built[width] = schedule_cls(stages if virtual > 1 else stages[0],
                                        n_microbatches=a.microbatches, loss_fn=loss_fn)
        return built[width]

    is_first = 0 in mine
    is_last = num_stages - 1 in mine
    seconds, tokens, losses = [], [], []
    dist.barrier()
    for it, (x, y, real) in enumerate(batches):
        t0 = time.perf_counter()
        sched = schedule_for(x.shape[1])
        mb_losses = []
        if is_first and is_last:
            sched.step(x, target=y, losses=mb_losses)
        elif is_first:
            sched.step(x)
        elif is_last:
            sched.step(target=y, losses=mb_losses)
        else:
            sched.step()
        # Megatron's clipping over the pipeline (as infinipipe's trainer does): one all-reduce
        sq = torch.stack([p.grad.pow(2).sum() for p in params if p.grad is not None]).sum()
        dist.all_reduce(sq)
        scale = min(1.0, a.clip_grad / (float(sq.sqrt()) + 1e-6))
        if scale < 1.0:
            for p in params:
                if p.grad is not None:
                    p.grad.mul_(scale)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        seconds.append(time.perf_counter() - t0)
        tokens.append(real)
        if mb_losses:  # the batch's mean over its predicted tokens, as infinipipe reports it
            counts = (y != -100).sum(dim=1).double().view(a.microbatches, -1).sum(dim=1)
            per_mb = torch.stack(mb_losses).detach().double()
            losses.append(float((per_mb * counts).sum() / counts.sum()))
        else:
            losses.append(None)
        if rank == 0 and not a.quiet:
            print(f"[{a.schedule}/{a.mode}] iteration {it + 1}: {seconds[-1]:.2f} s, width "
                  f"{x.shape[1]}, {real} real tokens", flush=True)
    dist.barrier()
    write_rss(a.rss, seconds=seconds, tokens=tokens, losses=losses, untrained=untrained,
              widths=[b[0].shape[1] for b in batches], stages=mine)
    dist.destroy_process_group()
    return 0


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "epp":
        ap = argparse.ArgumentParser(prog="peers_torch_rank.py epp")
        ap.add_argument("--rss", required=True)
        ap.add_argument("train", nargs=argparse.REMAINDER)
        a = ap.parse_args(sys.argv[2:])
        words = a.train[1:] if a.train[:1] == ["--"] else a.train
        code = epp_train.main(words)  # exits the process itself on an error
        write_rss(a.rss)
        return code
    ap = argparse.ArgumentParser(prog="peers_torch_rank.py peer")
    ap.add_argument("--model", required=True, help="a transformers LlamaForCausalLM folder")
    ap.add_argument("--batches", required=True, help="JSON: {'batches': [[doc tokens...]...]}")
    ap.add_argument("--schedule", required=True, choices=sorted(SCHEDULES))
    ap.add_argument("--mode", required=True, choices=("pad", "pack"))
    ap.add_argument("--iters", type=int, required=True)
    ap.add_argument("--microbatches", type=int, required=True)
    ap.add_argument("--rows", type=int, required=True, help="packed rows per global batch")
    ap.add_argument("--seq-length", type=int, required=True)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--clip-grad", type=float, default=1.0)
    ap.add_argument("--rss", required=True, help="per-rank result path prefix")
    ap.add_argument("--quiet", action="store_true")
    return run_peer(ap.parse_args(sys.argv[2:] if sys.argv[1:2] == ["peer"] else sys.argv[1:]))


if __name__ == "__main__":
    sys.exit(main())
