"""Runs one pipeline rank's action list of an infinipipe plan on PyTorch, as the C++ executor
(src/runtime/executor.h) does: forwards and backwards of chunks on the stages the rank holds, in
the plan's order, activations and gradients through a StageLink.

Slices. A sequence cut into slices runs forward slice by slice; on every layer a later slice
attends to the K/V its earlier slices left on this stage. Those K/V enter the later slice's
graph as leaves, so its backward stops there and leaves dK/dV in the leaves' ``grad``; they are
summed per earlier slice and fed, with the stage output's gradient, into that slice's backward
(which the schedules always run after its later slices'). Nothing crosses from one chunk's graph
into another's.

Recompute. ``Action.recompute_layers`` = r: the first r layers of the stage run under
``torch.utils.checkpoint`` (non-reentrant) and are recomputed in the chunk's backward; their K/V
for later slices are kept, as in the C++ engine.

Evaluation. A forward-only plan (``plan.forward_only``) runs without autograd and keeps nothing
of a chunk after its forward but the K/V of a slice whose sequence has later slices, released
when the sequence's last slice ran on the stage.

No hidden synchronisation. Nothing in an action waits for the device: a chunk's index tensors
(positions, token ids, targets) are built once on the host (pinned for CUDA) and copied without
blocking, the loss is summed on the device, the predicted tokens are counted on the host, and
CUDA action times come from events read once after the step (CPU: the host clock).

Memory as planned (docs/cost-model.md, "Memory of a stage"). With a compute dtype (bf16) the
parameters stay fp32 masters; each is cast once per step into a working copy that every chunk's
layers use (through the cast, each chunk's weight gradients add up in the fp32 ``grad``), so the
residual stream, the saved activations and the sends are bf16. The LM head's loss runs in blocks
of rows (lm_loss). A stage's output is not kept after its send (its backward starts from the
output's gradient edge), and a send's tensor is freed once the send completed (link.py).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import torch
from torch.autograd.graph import get_gradient_edge
from torch.func import functional_call
from torch.utils import checkpoint as activation_checkpoint

from infinipipe.torch.attention import KV, chunk_attention
from infinipipe.torch.link import StageLink
from infinipipe.torch.stages import PipelineStage, check_stage
from infinipipe.torch.ulysses import HeadExchange, UlyssesGroup


@dataclass(frozen=True)
class SliceRows:
    """One slice of a chunk: tokens [offset, offset + length) of sequence `seq`, at rows
    [row, row + length) of the chunk's tensors."""

    seq: int
    offset: int
    length: int
    seq_len: int
    row: int

    @property
    def is_final(self) -> bool:
        return self.offset + self.length == self.seq_len


def chunk_rows(chunk) -> List[SliceRows]:
    """The rows of an infinipipe.Chunk's slices, in the plan's order."""
    rows, row = [], 0
    for s in chunk.slices:
        rows.append(SliceRows(s.seq, s.offset, s.len, s.seq_len, row))
        row += s.len
    return rows


@dataclass
class ActionTime:
    index: int  # in plan.actions[rank]
    start: float  # seconds since RankStats.t0 (CUDA: on the device's clock, from the first action)
    end: float


@dataclass
class RankStats:
    loss_sum: float = 0.0  # unscaled token losses of this rank's last-stage forwards
    predicted_tokens: int = 0
    times: List[ActionTime] = field(default_factory=list)
    t0: float = 0.0  # time.monotonic() when the rank's first action started


@dataclass
class _KvPart:
    """K/V a split slice left on one layer of a stage, for its sequence's later slices."""
    offset: int
    length: int
    k: torch.Tensor
    v: torch.Tensor
    dk: Optional[torch.Tensor] = None  # summed over the later slices that attended to it
    dv: Optional[torch.Tensor] = None


@dataclass
class _ContextLeaf:
    k: torch.Tensor
    v: torch.Tensor
    parts: List[_KvPart]


@dataclass
class _ChunkState:
    x_in: Optional[torch.Tensor]  # the received activation (a leaf), None on the first stage
    # Where the backward starts: the scaled loss (last stage), else the gradient edge of the
    # activation sent on, whose tensor is not kept.
    out: object
    out_shape: Tuple[int, ...]
    kept: List[_KvPart]  # this chunk's split slices' K/V (per layer)
    leaves: List[_ContextLeaf]


def _targets(rows: Sequence[SliceRows], sequences) -> List[int]:
    """Each token's next token; -1 where nothing is predicted (a sequence's last token). A split
    slice predicts its last token from its next slice's first."""
    out = []
    for r in rows:
        seq = sequences[r.seq]
        out.extend(seq[r.offset + 1:r.offset + r.length + 1])
        if r.is_final:
            out.append(-1)
    return out


class _ChunkIndex:
    """A chunk's index tensors on this rank, built once and shared by its stages here: host
    tensors (pinned when the device is CUDA) copied without blocking, and each stage's position
    embedding of its tokens. `lo, hi`: this rank's rows (Ulysses), or all."""

    def __init__(self, rows: Sequence[SliceRows], sequences, lo: int, hi: int,
                 device: torch.device):
        self.rows, self.sequences, self.lo, self.hi, self.device = rows, sequences, lo, hi, device
        positions = torch.cat([torch.arange(r.offset, r.offset + r.length) for r in rows])[lo:hi]
        self.positions = self._to_device(positions)
        self._position: Dict[int, object] = {}

    def position(self, stage_index: int, stage: PipelineStage, dtype: torch.dtype) -> object:
        if stage_index not in self._position:
            self._position[stage_index] = stage.position_embedding(self.positions, dtype)
        return self._position[stage_index]

    def _to_device(self, host: torch.Tensor) -> torch.Tensor:
        if self.device.type != "cuda":
            return host
        return host.pin_memory().to(self.device, non_blocking=True)

    def tokens(self) -> torch.Tensor:
        ids = [t for r in self.rows for t in self.sequences[r.seq][r.offset:r.offset + r.length]]
        return self._to_device(torch.tensor(ids[self.lo:self.hi], dtype=torch.long))

    def targets(self) -> Tuple[torch.Tensor, int]:
        """The targets on the device and how many are predicted (counted on the host)."""
        t = _targets(self.rows, self.sequences)[self.lo:self.hi]
        return (self._to_device(torch.tensor(t, dtype=torch.long)),
                len(t) - t.count(-1))


class _ActionClock:
    """Start and end of each action: the host clock on CPU; on CUDA, events recorded on the
    current stream around each action and read once after the step, so timing never waits."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.marks: List[Tuple[int, object, object]] = []

    def now(self):
        if not self.cuda:
            return time.monotonic()
        e = torch.cuda.Event(enable_timing=True)
        e.record()
        return e

    def add(self, index: int, start, end) -> None:
        self.marks.append((index, start, end))

    def times(self, t0: float) -> List[ActionTime]:
        if not self.cuda:
            return [ActionTime(i, s - t0, e - t0) for i, s, e in self.marks]
        if not self.marks:
            return []
        first = self.marks[0][1]
        self.marks[-1][2].synchronize()  # the one wait, after the step
        return [ActionTime(i, first.elapsed_time(s) / 1e3, first.elapsed_time(e) / 1e3)
                for i, s, e in self.marks]


class _LayerAttention:
    """The stages.ChunkAttention of one chunk on one layer: the chunk's slices and their
    contexts; with Ulysses, tokens are exchanged for heads around it. Keeps the K/V it attended
    with (every token's, this rank's heads), which later slices of a cut sequence need."""

    def __init__(self, segments: Sequence[Tuple[int, int]], contexts: Sequence[Optional[KV]],
                 exchange: Optional[HeadExchange]):
        self.segments, self.contexts, self.exchange = segments, contexts, exchange
        self.k: Optional[torch.Tensor] = None
        self.v: Optional[torch.Tensor] = None

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        if self.exchange is not None:
            q, k, v = self.exchange.to_heads(q), self.exchange.to_heads(k), \
                self.exchange.to_heads(v)
        self.k, self.v = k, v
        out = chunk_attention(q, k, v, self.segments, self.contexts)
        return out if self.exchange is None else self.exchange.to_tokens(out)


class RankExecutor:
    """Executes plan.actions[rank] with the stages this rank holds (by global stage): any
    model's stages.PipelineStage."""

    def __init__(self, plan, rank: int, stages: Dict[int, PipelineStage], link: StageLink,
                 sequences: Sequence[Sequence[int]], loss_scale: float,
                 device: torch.device, dtype: Optional[torch.dtype] = None,
                 ulysses: Optional[UlyssesGroup] = None):
        if len(sequences) != len(plan.seq_lengths):
            raise ValueError(f"{len(sequences)} sequences for a plan of {len(plan.seq_lengths)}")
        for i, (s, n) in enumerate(zip(sequences, plan.seq_lengths)):
            if len(s) != n:
                raise ValueError(f"sequence {i} has {len(s)} tokens, the plan says {n}")
        self.plan, self.rank, self.link = plan, rank, link
        self.stages = {i: check_stage(s) for i, s in stages.items()}
        self.sequences, self.loss_scale, self.device = sequences, loss_scale, device
        self.weights = self._working_copies(dtype)
        self.dtype = dtype or next(next(iter(stages.values())).parameters()).dtype
        self.ulysses = ulysses if ulysses is not None and ulysses.size > 1 else None
        self.actions = plan.actions[rank]
        self.chunks = plan.chunks
        self.specs = plan.stages
        self.hidden = next(iter(stages.values())).hidden_size
        self._ends: Dict[int, Tuple[Optional[torch.nn.Module], Optional[torch.nn.Module]]] = {}
        self._layer_copies: Dict[Tuple[int, int], Optional[dict]] = {}
        self._kv: Dict[Tuple[int, int, int], List[_KvPart]] = {}  # (stage, seq, layer) -> parts
        self._states: Dict[Tuple[int, int], _ChunkState] = {}
        self._index: Dict[int, _ChunkIndex] = {}
        self._last_use = {a.chunk: i for i, a in enumerate(self.actions)}
        self._loss_sum = torch.zeros((), dtype=torch.float64, device=device)
        self.stats = RankStats()

    def _working_copies(self, dtype: Optional[torch.dtype]):
        """{id(parameter): working copy} in `dtype`, made once for the step (with autograd, so
        gradients reach the fp32 parameters); None where the parameters are used as they are."""
        if dtype is None:
            return None
        out = {}
        with torch.set_grad_enabled(not self.plan.forward_only):
            for stage in self.stages.values():
                for p in stage.parameters():
                    if id(p) not in out:
                        out[id(p)] = p if p.dtype == dtype else p.to(dtype)
        return out

    def _copies_of(self, module: torch.nn.Module) -> Optional[dict]:
        """The working copies of a module's parameters by its own names, or None."""
        if self.weights is None:
            return None
        return {n: self.weights[id(p)] for n, p in module.named_parameters()}

    def _layer(self, stage_index: int, g: int):
        layer = self.stages[stage_index].layer(g)
        key = (stage_index, g)
        if key not in self._layer_copies:
            self._layer_copies[key] = self._copies_of(layer)
        return layer, self._layer_copies[key]

    def _end(self, stage_index: int, which: int):
        """The stage's embedding (0) or head (1) module and its working copies."""
        if stage_index not in self._ends:
            stage = self.stages[stage_index]
            self._ends[stage_index] = (stage.embedding() if stage.has_embedding else None,
                                       stage.head() if stage.has_lm_head else None)
        module = self._ends[stage_index][which]
        return module, self._copies_of(module)

    def _chunk_index(self, chunk_id: int, rows, lo: int, hi: int) -> _ChunkIndex:
        index = self._index.get(chunk_id)
        if index is None:
            index = self._index[chunk_id] = _ChunkIndex(rows, self.sequences, lo, hi, self.device)
        return index

    # -- forward ---------------------------------------------------------------------------------

    def _forward(self, stage_index: int, chunk_id: int, recompute: int) -> None:
        stage = self.stages[stage_index]
        chunk = self.chunks[chunk_id]
        rows = chunk_rows(chunk)
        n = sum(r.length for r in rows)
        # With Ulysses this rank runs its share [lo, hi) of the chunk's tokens.
        exchange = HeadExchange(self.ulysses, n) if self.ulysses is not None else None
        lo, hi = exchange.rows if exchange is not None else (0, n)
        index = self._chunk_index(chunk_id, rows, lo, hi)
        position = index.position(stage_index, stage, self.dtype)
        segments = [(r.row, r.length) for r in rows]
        x_in = None
        if stage.has_embedding:
            x = _call(*self._end(stage_index, 0), index.tokens())
        else:
            x_in = self.link.recv_activation(stage_index, chunk_id, (hi - lo, self.hidden))
            x_in.requires_grad_(True)
            x = x_in
        kept: List[_KvPart] = []
        leaves: List[_ContextLeaf] = []
        for li in range(stage.num_layers):
            g = stage.first_layer + li
            contexts: List[Optional[KV]] = []
            for r in rows:
                if r.offset == 0:
                    contexts.append(None)
                    continue
                parts = self._kv.get((stage_index, r.seq, g), [])
                covered = sum(p.length for p in parts)
                if covered != r.offset:
                    raise RuntimeError(
                        f"stage {stage_index}, chunk {chunk_id}: sequence {r.seq}'s slice at "
                        f"{r.offset} finds {covered} tokens of context on layer {g}")
                if self.plan.forward_only:
                    contexts.append((torch.cat([p.k for p in parts]),
                                     torch.cat([p.v for p in parts])))
                    continue
                leaf = _ContextLeaf(
                    torch.cat([p.k for p in parts]).detach().requires_grad_(True),
                    torch.cat([p.v for p in parts]).detach().requires_grad_(True), list(parts))
                leaves.append(leaf)
                contexts.append((leaf.k, leaf.v))
            layer, copies = self._layer(stage_index, g)
            args = (layer, copies, x, position, _LayerAttention(segments, contexts, exchange))
            if li < recompute:
                x, k, v = activation_checkpoint.checkpoint(_run_layer, *args,
                                                           use_reentrant=False)
            else:
                x, k, v = _run_layer(*args)
            for r in rows:
                if not r.is_final:
                    part = _KvPart(r.offset, r.length, k[r.row:r.row + r.length],
                                   v[r.row:r.row + r.length])
                    self._kv.setdefault((stage_index, r.seq, g), []).append(part)
                    kept.append(part)
        if stage.has_lm_head:
            targets, predicted = index.targets()
            out, loss_sum = _call(*self._end(stage_index, 1), x, targets, self.loss_scale)
            self._loss_sum += loss_sum
            self.stats.predicted_tokens += predicted
        else:
            out = x
            self.link.send_activation(stage_index, chunk_id, out.detach())
        if self.plan.forward_only:
            self._release_finished(stage, stage_index, rows)
            return
        start = out if stage.has_lm_head else get_gradient_edge(out)
        self._states[(stage_index, chunk_id)] = _ChunkState(x_in, start, tuple(out.shape), kept,
                                                            leaves)

    def _release_finished(self, stage: PipelineStage, stage_index: int, rows) -> None:
        """Forward-only: a sequence whose last slice ran here needs none of its K/V any more."""
        for r in rows:
            if r.is_final and r.offset > 0:
                for g in range(stage.first_layer, stage.first_layer + stage.num_layers):
                    self._kv.pop((stage_index, r.seq, g), None)

    # -- backward --------------------------------------------------------------------------------

    def _backward(self, stage_index: int, chunk_id: int) -> None:
        stage = self.stages[stage_index]
        state = self._states.pop((stage_index, chunk_id), None)
        if state is None:
            raise RuntimeError(f"rank {self.rank}: backward of chunk {chunk_id} on stage "
                               f"{stage_index} before its forward")
        roots, grads = [state.out], [None]
        if not stage.has_lm_head:
            grads[0] = self.link.recv_grad(stage_index, chunk_id, state.out_shape)
        for p in state.kept:
            if p.dk is None:
                raise RuntimeError(f"rank {self.rank}: chunk {chunk_id}'s slice at {p.offset} "
                                   f"runs backward on stage {stage_index} before its next slice")
            roots += [p.k, p.v]
            grads += [p.dk.to(p.k.dtype), p.dv.to(p.v.dtype)]
        torch.autograd.backward(roots, grads)
        if state.x_in is not None:
            self.link.send_grad(stage_index, chunk_id, state.x_in.grad)
        for leaf in state.leaves:
            at = 0
            for p in leaf.parts:
                dk, dv = leaf.k.grad[at:at + p.length], leaf.v.grad[at:at + p.length]
                # Summed in fp32 (float64 stays), as the cost model's dkv buffer.
                wide = torch.promote_types(dk.dtype, torch.float32)
                p.dk = dk.to(wide) if p.dk is None else p.dk + dk
                p.dv = dv.to(wide) if p.dv is None else p.dv + dv
                at += p.length
        # This chunk's split slices are done here: no later slice needs their K/V any more.
        for r in chunk_rows(self.chunks[chunk_id]):
            if not r.is_final:
                for g in range(stage.first_layer, stage.first_layer + stage.num_layers):
                    parts = self._kv.get((stage_index, r.seq, g), [])
                    parts[:] = [p for p in parts if p.offset != r.offset]
                    if not parts:
                        self._kv.pop((stage_index, r.seq, g), None)

    # -- the action list -------------------------------------------------------------------------

    def run(self, synchronize: bool = False) -> RankStats:
        """Every action of this rank, in order. `synchronize` (debugging only): also wait for
        the device after each action; the action times never need it (CUDA events)."""
        with torch.no_grad() if self.plan.forward_only else contextlib.nullcontext():
            return self._run(synchronize)

    def _act(self, i: int, a) -> None:
        if a.kind == "forward":
            self._forward(a.stage, a.chunk, a.recompute_layers)
        else:
            self._backward(a.stage, a.chunk)
        if self._last_use[a.chunk] == i:
            self._index.pop(a.chunk, None)

    def _run(self, synchronize: bool) -> RankStats:
        clock = _ActionClock(self.device)
        self.stats.t0 = time.monotonic()
        for i, a in enumerate(self.actions):
            start = clock.now()
            self._act(i, a)
            if synchronize and self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
            clock.add(i, start, clock.now())
        self.link.finish()
        if self._states:
            raise RuntimeError(f"rank {self.rank}: chunks {sorted(self._states)} ran forward "
                               "without their backward")
        self.stats.times = clock.times(self.stats.t0)
        return self._read_totals()

    def _read_totals(self) -> RankStats:
        """The step's one read of the device's loss sum."""
        self.stats.loss_sum = float(self._loss_sum)
        return self.stats


def _call(module, weights, *args):
    """The module with the working copies of its weights, or its own."""
    return module(*args) if weights is None else functional_call(module, weights, args)


def _run_layer(layer, weights, x, position, attention: _LayerAttention):
    """One layer on a chunk: its output and the K/V it attended with."""
    return _call(layer, weights, x, position, attention), attention.k, attention.v


def run_plan_local(plan, stages: Dict[int, PipelineStage], sequences, loss_scale: float,
                   device: torch.device, dtype: Optional[torch.dtype] = None,
                   link=None) -> List[RankStats]:
    """Every rank of the plan in this process (each stage's module in `stages`), over an
    in-process link (a LocalLink): whichever rank's next action has its input runs, in rank
    order. `dtype`: the compute dtype (bf16), as RankExecutor."""
    from infinipipe.torch.link import LocalLink

    link = link if link is not None else LocalLink()
    execs = [RankExecutor(plan, r, {s: m for s, m in stages.items() if s % plan.pp == r}, link,
                          sequences, loss_scale, device, dtype) for r in range(plan.pp)]
    nexts = [0] * plan.pp
    while any(nexts[r] < len(e.actions) for r, e in enumerate(execs)):
        progressed = False
        for r, e in enumerate(execs):
            while nexts[r] < len(e.actions) and link.ready(plan, e.actions[nexts[r]]):
                e._act(nexts[r], e.actions[nexts[r]])
                nexts[r] += 1
                progressed = True
        if not progressed:
            waiting = {r: repr(e.actions[nexts[r]]) for r, e in enumerate(execs)
                       if nexts[r] < len(e.actions)}
            raise RuntimeError(f"the plan cannot progress: {waiting}")
    return [e._read_totals() for e in execs]
