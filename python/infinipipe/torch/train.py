"""``python3 -m infinipipe.torch.train``: `infinipipe train` on PyTorch.

Every global batch is drawn as `infinipipe train` draws it, split over the data-parallel
replicas, planned by the C++ planner (EPP by default) on the first rank of each pipeline and
sent to its other ranks, and executed by infinipipe.torch; gradients are summed over the
replicas, clipped, and AdamW steps with Megatron-LM's schedule. The configuration flags are
`infinipipe train`'s (Megatron-LM's names, --config FILE.yaml); checkpoints are infinipipe's, so
a run saved by either runtime resumes in the other.

--hf-model DIR trains a Hugging Face folder's model (Llama, Qwen2, Qwen3, Mistral) with its own
transformers modelling code (infinipipe.torch.hf): its config.json is the model, its weights the
start (as --pretrained-checkpoint DIR), a --load checkpoint of the run resumes over them.

Launch with ``torchrun --nproc_per_node N`` or ``mpirun -np N`` (N = pp x dp); --device cpu
trains on CPUs over gloo, a GPU preset (--device h100-80gb, h200-141gb, a800-80gb, or ``cuda``
for the GPU found) on CUDA over NCCL.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Tuple

import infinipipe as ip
from infinipipe.torch.launch import launch_env  # no PyTorch: flags are checked before it loads

USAGE = """usage: python3 -m infinipipe.torch.train [--hf-model DIR] [--metrics FILE] [--log-dir DIR]
                                       [--timings FILE]
                                       [--trace DIR [--trace-iterations N|A-B] [--trace-explain]]
                                       [--quiet] [--search-iterations N]
                                       [CONFIG OPTIONS: infinipipe train's, e.g. --pp 2 --dp 2
                                        --data-path PREFIX --train-iters 50 --save DIR ...]
"""



@dataclass
class CommandArgs:
    hf_model: str = ""
    metrics: str = ""
    log_dir: str = ""
    trace: str = ""
    trace_iterations: str = ""
    trace_explain: bool = False
    timings: str = ""
    quiet: bool = False
    search_iterations: int = 4  # the layout search's sampled training batches (auto degrees)
    search_iterations_given: bool = False
    config: List[str] = field(default_factory=list)


_VALUED = {"--hf-model": "hf_model", "--metrics": "metrics", "--log-dir": "log_dir",
           "--trace": "trace", "--trace-iterations": "trace_iterations", "--timings": "timings"}


def parse_command(argv: List[str]) -> CommandArgs:
    out = CommandArgs()
    i = 0
    while i < len(argv):
        word = argv[i]
        key, _, inline = word.partition("=")
        if key in ("-h", "--help"):
            print(USAGE + __doc__)
            raise SystemExit(0)
        if key in _VALUED:
            if not inline:
                if i + 1 >= len(argv):
                    raise ip.ConfigError(f"{key} needs a value")
                i += 1
                inline = argv[i]
            setattr(out, _VALUED[key], inline)
        elif key == "--search-iterations":
            if not inline:
                if i + 1 >= len(argv):
                    raise ip.ConfigError("--search-iterations needs a value")
                i += 1
                inline = argv[i]
            try:
                out.search_iterations = int(inline)
            except ValueError:
                raise ip.ConfigError(f"--search-iterations must be an integer (training batches "
                                     f"the layout search samples), got '{inline}'") from None
            out.search_iterations_given = True
        elif key in ("--quiet", "-q"):
            out.quiet = True
        elif key == "--trace-explain":
            out.trace_explain = True
        else:
            out.config.append(word)
        i += 1
    if out.trace_iterations and not out.trace:
        raise ip.ConfigError("--trace-iterations chooses what --trace records: add --trace DIR")
    if out.trace_explain and not out.trace:
        raise ip.ConfigError("--trace-explain explains the plans --trace saves: add --trace DIR")
    if out.hf_model:
        out.config = _start_from(out.hf_model, out.config)
    return out


def _start_from(folder: str, words: List[str]) -> List[str]:
    """--hf-model DIR is the run's start: --pretrained-checkpoint DIR (a --pretrained-checkpoint
    naming another folder contradicts it)."""
    if not ip.hf_folder_is(folder):
        raise ip.ConfigError(f"--hf-model {folder}: not a Hugging Face model folder (config.json "
                             "and model.safetensors or model.safetensors.index.json)")
    for i, w in enumerate(words):
        key, _, value = w.partition("=")
        if key == "--pretrained-checkpoint":
            value = value or (words[i + 1] if i + 1 < len(words) else "")
            if os.path.realpath(value) != os.path.realpath(folder):
                raise ip.ConfigError(f"--hf-model {folder} is the run's start; "
                                     f"--pretrained-checkpoint {value} contradicts it: drop one")
            return words
    return words + ["--pretrained-checkpoint", folder]


def _runtime_device(config_args: List[str]) -> List[str]:
    """`--device cuda` names the preset of the GPU found."""
    args = list(config_args)
    for i, w in enumerate(args):
        value = None
        if w == "--device" and i + 1 < len(args):
            value, at = args[i + 1], i + 1
        elif w.startswith("--device="):
            value, at = w.split("=", 1)[1], i
        if value == "cuda":
            import torch
            if not torch.cuda.is_available():
                raise ip.ConfigError("--device cuda needs a CUDA GPU, and PyTorch sees none")
            name = torch.cuda.get_device_name()
            preset = ip.gpu_preset(name)
            if not preset:
                raise ip.ConfigError(
                    f"--device cuda: no cost-model preset for '{name}': give --device a preset "
                    f"(`infinipipe train --help` lists them) or a --calibration file")
            args[at] = preset if at == i + 1 else f"--device={preset}"
    return args


def check_supported(cfg: ip.Config, words: Sequence[str] = (), hf_model: bool = False) -> None:
    """What this trainer cannot honour, refused with what to do instead, by the runtimes' one
    table (ip.train_problems; `words`: the configuration's command-line words, where an option
    given at its default shows; `hf_model`: the model is a folder's transformers model)."""
    problems = ip.train_problems(cfg, "transformers" if hf_model else "torch", list(words))
    if problems:
        raise ip.ConfigError(problems[0])


def _keep_freed_memory() -> None:
    """On CPU each step allocates and frees the same large activations; glibc returns freed
    blocks above its thresholds to the kernel, so every reuse pays fresh zeroed pages. Raised
    thresholds keep them in the heap (measured: -2 % CPU time per step). glibc only."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except AttributeError:  # not glibc (musl has no mallopt)
        return
    m_trim_threshold, m_mmap_threshold = -1, -3
    mallopt(m_mmap_threshold, 64 << 20)  # blocks up to 64 MiB come from the heap
    mallopt(m_trim_threshold, 1 << 30)  # and its top is kept up to 1 GiB


def _cpu_groups(places: List[Tuple[str, Tuple[int, ...]]]) -> List[Tuple[int, int, int]]:
    """Per rank (node, cores, ranks) as `infinipipe train` gathers them (comm/cpu_groups.h):
    the ranks of one host whose CPU sets overlap, linked one after another, share the union of
    their CPUs; a group is named by its lowest rank."""
    n = len(places)
    group = list(range(n))

    def root(i):
        while group[i] != i:
            i = group[i]
        return i

    for a in range(n):
        for b in range(a + 1, n):
            if places[a][0] == places[b][0] and set(places[a][1]) & set(places[b][1]):
                group[root(b)] = root(a)
    out = []
    for i in range(n):
        members = [j for j in range(n) if root(j) == root(i)]
        cpus = set().union(*(places[j][1] for j in members))
        out.append((min(members), max(1, len(cpus)), len(members)))
    return out


def _agree_on_layout(args: CommandArgs,
                     words: List[str]) -> Tuple[List[str], List[str], List[str]]:
    """What `infinipipe train` decides before its groups: with an auto degree, rank 0 searches
    the layout (ip.resolve_auto_layout) on every rank's host and CPUs and the others take its
    choice (broadcast_object_list), so every rank trains the same. Joins the job to do so.
    Returns the words with the chosen degrees, the lines the search printed and every rank's
    host name (the rank order is decided on them)."""
    import socket

    launch = launch_env()
    lenient = ip.train_options_lenient(words, launch.world_size)
    mine = (socket.gethostname(), tuple(sorted(os.sched_getaffinity(0)))
            if hasattr(os, "sched_getaffinity") else ())
    places = [mine]
    if launch.world_size > 1:
        import torch.distributed as dist

        from infinipipe.torch.distributed import join

        join("cpu" if lenient.device == "cpu" else "cuda", lenient.p2p_timeout)
        places = [None] * launch.world_size
        dist.all_gather_object(places, mine)
    answer: List[object] = [None]
    if launch.rank == 0:
        try:
            r = ip.resolve_auto_layout(words, launch.world_size,
                                       _cpu_groups(places) if launch.world_size > 1 else [],
                                       args.search_iterations, args.search_iterations_given)
            answer = [(r.args, r.lines, None)]
        except ip.ConfigError as e:  # every rank stops with rank 0's message
            answer = [(None, None, str(e))]
    if launch.world_size > 1:
        dist.broadcast_object_list(answer, src=0)
    chosen, lines, error = answer[0]
    if error is not None:
        raise ip.ConfigError(error)
    return chosen, lines, [host for host, _ in places]


def run(argv: List[str]) -> int:
    args = parse_command(argv)
    words, searched, rank_hosts = _agree_on_layout(args, _runtime_device(args.config))
    cfg = ip.Config.for_training(words, launch_env().world_size)
    check_supported(cfg, args.config, bool(args.hf_model))

    import torch  # after the options: a mistyped flag is refused in a blink

    from infinipipe.torch.backend import TorchBackend
    from infinipipe.torch.distributed import setup, shutdown
    from infinipipe.torch.trainer import RankModel, TrainStep, make_optimizer

    order, order_reason, order_decided = ip.rank_order(cfg, rank_hosts)
    cost = ip.CostModel.from_config(cfg)
    cfg = cfg.with_stage_layout(cost)
    layout = cfg.stage_layout(cost)
    device = "cpu" if cfg.device == "cpu" else "cuda"
    if device == "cpu":
        _keep_freed_memory()
    hf_model = None
    if args.hf_model:
        from infinipipe.torch.hf import load_folder

        hf_model = load_folder(args.hf_model, cfg.model.seq_length)
    g = setup(cfg.pp, cfg.dp, device, len(layout), cfg.model.tie_embeddings,
              cfg.p2p_timeout, sp=cfg.ulysses_degree, order=order)
    talk = not args.quiet and g.rank == 0
    if talk:
        for line in searched:
            print(line)
        if order_decided:
            print(f"rank placement auto: {order_reason}")
    model = RankModel(cfg, layout, g, make_stage=hf_model and hf_model.stage)
    hf_model = None  # the layers of other ranks' stages are freed with it
    optimizer = make_optimizer(cfg, model)
    if not args.hf_model:
        model.init()  # the seed's values; a checkpoint or folder the run starts from replaces them
    config_yaml = cfg.with_run_tokenizer().to_yaml()  # as train records it
    if g.rank == 0:
        said = ip.run_samples_message(cfg)  # what truncation drops, once per run, as train says
        if said:
            print(f"infinipipe: {said}", file=sys.stderr, flush=True)
    metrics = ip.metrics_path(args.metrics, args.log_dir, args.trace, cfg.save)
    if talk:
        print(f"training {cfg.model.num_layers} layers x hidden {cfg.model.hidden_size} "
              f"({cfg.model.num_parameters} parameters), {cfg.schedule} schedule, pp {cfg.pp} x "
              f"dp {cfg.dp}, {cfg.train_iters} iterations of {cfg.global_batch_size} sequences "
              f"on PyTorch {torch.__version__} ({g.backend}, {g.device})"
              + (f"; metrics -> {metrics}" if metrics else ""), flush=True)
    step = TrainStep(cfg, model, optimizer, bf16=cfg.bf16)
    backend = TorchBackend(cfg, cost, layout, model, optimizer, step, weights_from=args.hf_model)
    # The run itself is `infinipipe train`'s (runtime/run_driver.h) over this rank's backend.
    done = ip.run_train(backend, cfg, config_yaml, metrics, args.timings, args.trace,
                        args.trace_iterations, args.trace_explain, cfg.tensorboard_dir,
                        args.quiet or g.rank != 0)
    if talk and done:
        print(f"done: {len(done)} iterations, final loss {done[-1].loss:.4f}", flush=True)
    shutdown()
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    launch = launch_env()
    where = "" if launch.world_size == 1 else f" on rank {launch.rank}"
    try:
        return run(argv)
    except ip.ConfigError as e:
        print(f"infinipipe: error{where}: {e}", file=sys.stderr, flush=True)
        code = 2
    except (ip.Error, RuntimeError, OSError) as e:
        print(f"infinipipe: error{where}: {e}", file=sys.stderr, flush=True)
        code = 1
    except Exception:  # a bug: its traceback, and the job still ends
        import traceback

        traceback.print_exc()
        code = 1
    # Under a launcher the other ranks may wait on this one: end the process now, so the
    # launcher ends the job.
    os._exit(code)


if __name__ == "__main__":
    main()
