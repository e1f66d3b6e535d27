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
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Tuple

import infinipipe as ip

USAGE = """usage: python3 -m infinipipe.torch.train [--hf-model DIR] [--metrics FILE] [--log-dir DIR]
                                       [--timings FILE]
                                       [--trace DIR [--trace-iterations N|A-B] [--trace-explain]]
                                       [--quiet] [--search-iterations N]
                                       [CONFIG OPTIONS: infinipipe train's, e.g. --pp 2 --dp 2
                                        --data-path PREFIX --train-iters 50 --save DIR ...]
"""

# GPU names PyTorch reports, and the cost model's preset for each.
_GPU_PRESETS = (("H200", "h200-141gb"), ("H100", "h100-80gb"), ("A800", "a800-80gb"))


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
            preset = next((p for key, p in _GPU_PRESETS if key in name), None)
            if preset is None:
                raise ip.ConfigError(
                    f"--device cuda: no cost-model preset for '{name}'; give one of "
                    f"{', '.join(p for _, p in _GPU_PRESETS)} or a --calibration file")
            args[at] = preset if at == i + 1 else f"--device={preset}"
    return args


_MEASURE_LINKS_INTERVAL_DEFAULT = "100"  # src/core/config.h


def check_supported(cfg: ip.Config, words: Sequence[str] = (), hf_model: bool = False) -> None:
    """What this trainer cannot run yet, refused with what to do instead (`words`: the
    configuration's command-line words, where an option given at its default shows;
    `hf_model`: the model is a folder's transformers model)."""
    if not hf_model:
        from infinipipe.torch.model import check_llama

        check_llama(cfg.model)
    if cfg.get("zero-stage") != "1":
        raise ip.ConfigError("the PyTorch trainer keeps a stage's weights whole (zero-stage 1); "
                             "drop --zero-stage")
    if (cfg.get("measure-links") == "true"
            or cfg.get("measure-links-interval") != _MEASURE_LINKS_INTERVAL_DEFAULT
            or any(w.split("=")[0] == "--measure-links-interval" for w in words)):
        raise ip.ConfigError("the PyTorch trainer times links by the configuration (it measures "
                             "with MPI only in `infinipipe train`), so --rank-placement auto "
                             "ranks the orders by bytes; --measure-links and "
                             "--measure-links-interval are `infinipipe train`'s: drop them")
    if int(cfg.train_iters) > 0 and not cfg.has_training_data:
        raise ip.ConfigError("train needs a dataset: pass --data-path PREFIX (make one with "
                             "`infinipipe data synth --output PREFIX`)")


class StopRequest:
    """SIGTERM, SIGINT and SIGUSR1 ask for a stop after the iteration (with
    --exit-signal-handler, the default), as `infinipipe train`; a second signal stops at once."""

    def __init__(self, enabled: bool):
        self.signalled = False
        if enabled and threading.current_thread() is threading.main_thread():
            for s in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1):
                signal.signal(s, self._handle)

    def _handle(self, signum, frame):
        if self.signalled:
            raise SystemExit(128 + signum)
        self.signalled = True


def metrics_path(args: CommandArgs, save: str) -> str:
    """--metrics FILE, else LOG_DIR/metrics.jsonl, else next to the traces, else in --save."""
    if args.metrics:
        return args.metrics
    for folder in (args.log_dir, args.trace, save):
        if folder:
            return os.path.join(folder, "metrics.jsonl")
    return ""


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

    import torch.distributed as dist

    from infinipipe.torch.distributed import join, launch_env

    launch = launch_env()
    lenient = ip.train_options_lenient(words, launch.world_size)
    mine = (socket.gethostname(), tuple(sorted(os.sched_getaffinity(0)))
            if hasattr(os, "sched_getaffinity") else ())
    places = [mine]
    if launch.world_size > 1:
        join("cpu" if lenient.device == "cpu" else "cuda", float(lenient.get("p2p-timeout")))
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
    import torch
    import torch.distributed as dist

    from infinipipe.torch import checkpoint
    from infinipipe.torch.distributed import launch_env, setup, shutdown
    from infinipipe.torch.planning import BatchPlanner
    from infinipipe.torch.trainer import RankModel, TrainStep, make_optimizer, predicted_tokens

    args = parse_command(argv)
    words, searched, rank_hosts = _agree_on_layout(args, _runtime_device(args.config))
    cfg = ip.Config.for_training(words, launch_env().world_size)
    check_supported(cfg, args.config, bool(args.hf_model))
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
              float(cfg.get("p2p-timeout")), sp=cfg.ulysses_degree, order=order)
    talk = not args.quiet and g.rank == 0
    if talk:
        for line in searched:
            print(line)
        if order_decided:
            print(f"rank placement auto: {order_reason}")
    model = RankModel(cfg, layout, g, make_stage=hf_model and hf_model.stage)
    hf_model = None  # the layers of other ranks' stages are freed with it
    optimizer = make_optimizer(cfg, model)
    load, pretrained, save = cfg.get("load"), cfg.get("pretrained-checkpoint"), cfg.get("save")
    resumed = checkpoint.Resumed()
    if load and (ip.checkpoint_latest(load) is not None or ip.hf_folder_is(load)):
        resumed = checkpoint.load(load, cfg, model, optimizer)
        if talk and resumed.iteration > 0:
            print(f"resumed from {load} at iteration {resumed.iteration} "
                  f"({resumed.consumed_samples} samples consumed)")
    elif args.hf_model:
        pass  # from_pretrained loaded the folder's weights
    elif pretrained:
        checkpoint.load_weights(pretrained, cfg, model)
    else:
        model.init()
    config_yaml = cfg.with_run_tokenizer().to_yaml()  # as train records it
    if g.rank == 0 and resumed.iteration < cfg.train_iters:
        said = ip.run_samples_message(cfg)  # what truncation drops, once per run, as train says
        if said:
            print(f"infinipipe: {said}", file=sys.stderr, flush=True)
    if talk:
        print(f"training {cfg.model.num_layers} layers x hidden {cfg.model.hidden_size} "
              f"({cfg.model.num_parameters} parameters), {cfg.schedule} schedule, pp {cfg.pp} x "
              f"dp {cfg.dp}, {cfg.train_iters} iterations of {cfg.global_batch_size} sequences "
              f"on PyTorch {torch.__version__} ({g.backend}, {g.device})", flush=True)
    train_iters, iteration = cfg.train_iters, resumed.iteration
    step = TrainStep(cfg, model, optimizer, bf16=cfg.get("bf16") == "true")
    stop = StopRequest(cfg.get("exit-signal-handler") == "true")
    feedback = ip.CostFeedback(cost) if cfg.get("cost-model-update") == "online" else None
    plan_cost = cost
    # Every rank writes its metrics (its stage's memory) and timings; rank 0 at the path given,
    # the others next to it (metrics-rank00003.jsonl), as `infinipipe train`.
    writer = _rank_log(metrics_path(args, save), g.rank)
    timings = _rank_log(args.timings, g.rank)
    planner = None
    if iteration < train_iters:
        batches = ip.TrainingBatches(cfg, cost)
        # Data prepared by another tokenizer is refused as `infinipipe train` refuses it.
        ip.data_tokenizer_check(cfg, batches.prefixes)
        batches.resume(resumed.consumed_samples, resumed.delay_state)
        planner = BatchPlanner(cfg, cost, batches, g)
    consumed, delay_state = resumed.consumed_samples, resumed.delay_state
    last_saved = iteration if resumed.iteration > 0 else -1
    started = time.monotonic()
    exit_interval = int(cfg.get("exit-interval"))
    exit_minutes = float(cfg.get("exit-duration-in-mins"))
    save_interval = int(cfg.get("save-interval"))
    log_every = max(1, int(cfg.get("log-interval")))
    eval_interval = max(1, int(cfg.get("eval-interval")))
    evals = ip.EvalBatches(cfg) if iteration < train_iters and int(cfg.get("eval-iters")) > 0 \
        else None
    trace = None
    if args.trace:
        if g.distributed:
            dist.barrier()  # the ranks start the trace clock together
        trace = ip.TraceWriter(args.trace, g.rank, g.pp, g.dp, g.stage, g.replica, config_yaml,
                               cfg.schedule, time.monotonic(), args.trace_iterations,
                               cfg.get("calibration"))
    last = None
    if iteration >= train_iters and talk and train_iters > 0:
        print(f"nothing to train: the checkpoint is at iteration {iteration}, --train-iters is "
              f"{train_iters}")
    while iteration < train_iters:
        t0 = time.monotonic()
        b = planner.next(plan_cost, more=iteration + 1 < train_iters)
        consumed, delay_state = b.consumed_samples, b.delay_state
        lr = cfg.lr_at(iteration * cfg.global_batch_size)
        result = step.run(b.plan, b.share, predicted_tokens(b.lengths), lr)
        t_step = time.monotonic()
        iteration += 1
        if feedback is not None:
            plan_cost = _refit(feedback, b.plan, plan_cost, cfg, result, g)
        m = _metrics(iteration, train_iters, consumed, result, b, lr, time.monotonic() - t0, g)
        if evals is not None:
            t_eval = time.monotonic()
            due = iteration % eval_interval == 0
            if evals.has("validation") and (due or iteration == train_iters):
                m.valid_loss, m.valid_tokens = _evaluate(
                    step, planner, evals, "validation",
                    iteration // eval_interval - (1 if due else 0), plan_cost)
            if iteration == train_iters and evals.has("test"):
                m.test_loss, m.test_tokens = _evaluate(step, planner, evals, "test", 0, plan_cost)
            m.eval_seconds = time.monotonic() - t_eval
        if trace is not None:
            explain = ""
            if args.trace_explain and b.result is not None and trace.saves_plan(iteration):
                explain = b.result.explain(cfg, b.planned_with)
            _trace_add(trace, m, b, g, result, t0, t_step, explain)
        if writer:
            writer.write(m.metrics_json() + "\n")
            writer.flush()
        if timings:
            timings.write(ip.timings_record(iteration, m.predicted_step_seconds, b.plan, g.stage,
                                            [(t.index, t.start, t.end)
                                             for t in result.stats.times]) + "\n")
            timings.flush()
        if talk and (iteration % log_every == 0 or iteration == train_iters):
            print(str(m), flush=True)
        last = m
        if save and save_interval > 0 and iteration % save_interval == 0:
            checkpoint.save(save, iteration, consumed, delay_state, cfg, config_yaml, model,
                            optimizer)
            last_saved = iteration
            if talk:
                print(f"saved checkpoint {save}/iter_{iteration:07d}", flush=True)
        if iteration < train_iters and _agree_to_stop(stop, iteration, exit_interval,
                                                      exit_minutes, started, g):
            if talk:
                print(f"stopping after iteration {iteration} as asked", flush=True)
            break
    if save and last_saved != iteration:
        checkpoint.save(save, iteration, consumed, delay_state, cfg, config_yaml, model,
                        optimizer)
        if talk:
            print(f"saved checkpoint {save}/iter_{iteration:07d}", flush=True)
    if talk and last is not None:
        print(f"done: {last.iteration} iterations, final loss {last.loss:.4f}", flush=True)
    for log in (writer, timings):
        if log:
            log.close()
    if planner is not None:
        planner.close()
    if g.distributed:
        dist.barrier()
    shutdown()
    return 0


def _evaluate(step, planner, evals, split, index, plan_cost):
    """`infinipipe train`'s evaluation: --eval-iters global batches of `split`, each split over
    the replicas and planned as training plans it, run as forward-only plans; the token-weighted
    mean loss over the world and its predicted tokens."""
    from infinipipe.torch.trainer import predicted_tokens

    loss_sum, tokens = 0.0, 0
    for seqs in evals.batches(split, index):
        if predicted_tokens([len(s) for s in seqs]) == 0:
            continue  # every document has at most one token: nothing to score
        share = planner.share_of(seqs)
        s, t = step.evaluate(planner.evaluation_plan(share, plan_cost), share)
        loss_sum, tokens = loss_sum + s, tokens + t
    if tokens == 0:
        raise ip.Error(f"the {split} evaluation predicts no token: its documents have at most "
                       "one token each")
    return loss_sum / tokens, tokens


def _refit(feedback, plan_obj, plan_cost, cfg, result, g):
    """The online fit: this rank's measured actions, pooled over its pipeline."""
    import torch
    import torch.distributed as dist

    measured = [(t.index, t.end - t.start) for t in result.stats.times]
    feedback.observe(plan_obj, plan_cost, cfg, g.stage, measured)
    share = torch.tensor(feedback.share(), dtype=torch.float64, device=g.device)
    if g.distributed:
        dist.all_reduce(share, group=g.pipeline)
    return feedback.next_cost_model(share.cpu().tolist())


def _rank_log(path: str, rank: int):
    """The JSON-lines file this rank appends to (None without a path)."""
    if not path:
        return None
    path = ip.rank_path(path, rank)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    return open(path, "a")


def _trace_add(trace, m, b, g, result, t0, t_step, explain):
    """This rank's iteration in its trace: the actions, the wait for the plan, and what followed
    the actions (gradient sums, clipping, the optimizer)."""
    shift = result.stats.t0 - t0
    actions = [(t.index, shift + t.start, shift + t.end) for t in result.stats.times]
    done = actions[-1][2] if actions else shift
    events = [("plan", f"waiting for the plan (planner took {b.plan_seconds:.3f} s)", 0.0,
               b.plan_wait_seconds),
              ("optimizer", "gradient sums, clip and optimizer step", done, t_step - t0)]
    trace.add(m, b.plan, g.stage, actions, events, result.stats.loss_sum,
              result.stats.predicted_tokens, t0, time.monotonic(), explain)


def _agree_to_stop(stop, iteration, exit_interval, exit_minutes, started, g) -> bool:
    import torch
    import torch.distributed as dist

    want = stop.signalled or (exit_interval > 0 and iteration % exit_interval == 0) or \
        (exit_minutes > 0 and time.monotonic() - started >= exit_minutes * 60)
    if not g.distributed:
        return want
    flag = torch.tensor([1.0 if want else 0.0], device=g.device)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item())


def _metrics(iteration, train_iters, consumed, result, b, lr, seconds, g):
    m = ip.IterationMetrics()
    m.iteration, m.train_iters, m.consumed_samples = iteration, train_iters, consumed
    m.loss, m.sequences, m.tokens = result.loss, len(b.sequences), sum(b.lengths)
    m.predicted_tokens, m.seconds = result.predicted_tokens, seconds
    m.plan_seconds, m.plan_wait_seconds = b.plan_seconds, b.plan_wait_seconds
    m.tokens_per_s = sum(b.lengths) / seconds if seconds > 0 else 0.0
    m.lr, m.grad_norm, m.schedule = lr, result.grad_norm, b.plan.schedule
    m.chunks, m.plan_knobs = len(b.plan.chunks), b.setting
    m.recompute_layers = sum(a.recompute_layers for a in b.plan.actions[g.stage]
                             if a.kind == "forward")
    m.predicted_peak_bytes = b.plan.predicted_peak_bytes[g.stage]
    if g.device.type == "cuda":
        import torch

        m.measured_peak_bytes = torch.cuda.max_memory_allocated(g.device)
        torch.cuda.reset_peak_memory_stats(g.device)
    m.predicted_step_seconds = b.plan.predicted_step_time
    m.measured_step_seconds = result.stats.times[-1].end if result.stats.times else 0.0
    m.memory_budget = b.plan.memory_budget
    return m


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    from infinipipe.torch.distributed import launch_env

    rank = launch_env().rank
    where = "" if launch_env().world_size == 1 else f" on rank {rank}"
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
