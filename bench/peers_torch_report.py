"""The markdown of bench/peers_torch.py: one table per corpus, each pipeline size's best peer
against EPP at equal memory, and the per-run progress lines."""

import re

import bench_common as bc

NAMES = {"gpipe": "ScheduleGPipe", "1f1b": "Schedule1F1B",
         "interleaved1f1b": "ScheduleInterleaved1F1B (2 stages/rank)",
         "interleavedzb": "ScheduleInterleavedZeroBubble (2 stages/rank)",
         "zbv": "ScheduleZBVZeroBubble (2 stages/rank)", "epp": "EPP (infinipipe.torch)"}
INPUTS = {"pad": "padded to the batch's longest", "pack": "packed rows (cross-document)",
          "default": "the config's budget", "equal": "budget = best peer's peak"}
GOAL = 1.3


def first_error(text):
    lines = [x.strip() for x in text.splitlines() if x.strip()]
    for line in lines:
        if line.startswith("infinipipe: error"):
            return re.sub(r"^infinipipe: error( on rank \d+( \([^)]*\))?)?: ", "", line)
    for line in reversed(lines):
        if re.search(r"Error|error:", line):
            return line[:300]
    return lines[-1][:300] if lines else "no output (timed out?)"


def mib(x):
    return f"{x / 2**20:.0f}"


def progress(r):
    if "error" in r:
        return f"  {r['tag']}: FAILED: {r['error']}"
    return (f"  {r['tag']}: {r['tps']:.0f} real tok/s, peak {'/'.join(mib(p) for p in r['peaks'])}"
            f" MiB per rank, loss {r['loss']:.4f}" if r["loss"] is not None else
            f"  {r['tag']}: {r['tps']:.0f} real tok/s")


def render(a, results, samples_message):
    out = [f"- model: examples/cpu-small.yaml's Llama (8 layers, hidden 256, 4 heads, FFN 768, "
           f"vocab 257, untied head), fp32; the peers train a random transformers "
           f"LlamaForCausalLM of that shape (save_pretrained once), SDPA attention",
           f"- corpus: `infinipipe data synth`, {a.documents} documents; the sampler's global "
           f"batches of {a.global_batch_size} sequences up to {a.seq_length} tokens, the same "
           f"batches for every run (EPP's metrics are checked against them)"
           + (f"; {samples_message}" if samples_message else ""),
           f"- {a.iters} iterations per run, the first {a.warmup} a warm-up; real tokens/s = "
           f"tokens trained in the others / the slowest rank's seconds for them",
           "- peers: the decoder layers split evenly over the stages by hand (embedding on the "
           "first, norm and head on the last), one row per micro-batch, "
           f"{a.global_batch_size} micro-batches, AdamW, clipping 1.0, the library's defaults "
           "otherwise; a new batch width builds new PipelineStages (shapes are fixed per "
           "schedule object), inside the timed step",
           "- peak memory per rank: ru_maxrss less the resident size after the imports (torch, "
           "transformers, infinipipe), both runtimes under the same glibc malloc thresholds "
           "(those infinipipe.torch.train sets); the column shows the largest rank", ""]
    for dist_name, d in results.items():
        model = ("transformers' LlamaForCausalLM through --hf-model" if d["epp_model"] == "hf"
                 else "infinipipe's own Llama of the same shape (the trainer has no --hf-model "
                      "yet)")
        widths = [max(len(s) for s in b) for b in d["batches"][a.warmup:]]
        out.append(f"### {dist_name}: EPP trains {model}\n")
        out.append(f"Timed batches' longest sequences: {', '.join(map(str, widths))}.\n")
        rows = []
        for pp, p in d["pp"].items():
            best = p["best"]
            for r in p["rows"]:
                name = f"{NAMES[r['schedule']]}, {INPUTS[r['mode']]}"
                if r["schedule"] == "epp" and r.get("budget"):
                    name += f" ({r['budget']} MiB)"
                if "error" in r:
                    rows.append([f"pp {pp}", name, "failed: " + r["error"][:120], "", "", "", ""])
                    continue
                ratio = f"{r['tps'] / best['tps']:.2f}x" if best else "-"
                pad = (f"{100 * (1 - r['tokens'] / r['computed']):.0f} %"
                       if r["mode"] == "pad" else "0 %" if r["mode"] == "pack" else "-")
                loss = (f"{r['first_loss']:.4f} / {r['loss']:.4f}" if r["loss"] is not None
                        else "-")
                rows.append([f"pp {pp}", name, f"{r['tps']:.0f}", ratio, mib(max(r["peaks"])),
                             pad, loss])
        out.append(bc.md_table(["pp", "schedule, input", "real tok/s", "/ best peer",
                                "peak MiB (max rank)", "padding computed", "loss: first / last"], rows,
                               "llrrrrr"))
        out.append("")
        for pp, p in d["pp"].items():
            best = p["best"]
            eq = next((r for r in p["rows"] if r["schedule"] == "epp" and r["mode"] == "equal"),
                      None)
            if best is None or eq is None or "error" in eq:
                out.append(f"- pp {pp}: no comparison at equal memory (a run failed)")
                continue
            ratio = eq["tps"] / best["tps"]
            verdict = "meets" if ratio >= GOAL else "misses"
            out.append(f"- pp {pp}: best peer {NAMES[best['schedule']]}, {INPUTS[best['mode']]}: "
                       f"{best['tps']:.0f} real tok/s at {mib(max(best['peaks']))} MiB; EPP with "
                       f"that budget: {eq['tps']:.0f} real tok/s at {mib(max(eq['peaks']))} MiB "
                       f"measured = {ratio:.2f}x ({verdict} the {GOAL}x goal)")
            pads = [r for r in p["rows"] if r["mode"] == "pad" and "error" not in r]
            if pads and best["mode"] != "pad":  # the peers that train what EPP trains
                bp = max(pads, key=lambda r: r["tps"])
                dflt = [r for r in p["rows"] if r["mode"] == "default" and "error" not in r]
                at_config = f"{dflt[0]['tps'] / bp['tps']:.2f}x" if dflt else "failed"
                out.append(f"  - against the best padded peer ({NAMES[bp['schedule']]}: "
                           f"{bp['tps']:.0f} real tok/s at {mib(max(bp['peaks']))} MiB; no "
                           f"attention across documents, as EPP): EPP at the config's budget "
                           f"{at_config}, at equal memory {eq['tps'] / bp['tps']:.2f}x")
        firsts = sorted({f"{r['first_loss']:.4f}" for p in d["pp"].values() for r in p["rows"]
                         if "error" not in r and r["mode"] != "pack" and r["loss"] is not None})
        out.append(f"- the first iteration's loss (the same weights and batch; packing's batch "
                   f"differs) of every padded and EPP run: {', '.join(firsts)}")
        packs = [r for p in d["pp"].values() for r in p["rows"]
                 if r.get("mode") == "pack" and "error" not in r]
        if packs:
            r = packs[0]
            out.append(f"- packing: {a.global_batch_size} rows x {a.seq_length} tokens per "
                       f"iteration, every token trained, none dropped in the timed iterations "
                       f"(the stream's {r['untrained']} tokens after the last row are not "
                       f"trained); it drops no document but trains attention across document "
                       f"boundaries, which EPP and padding do not")
        out.append("")
    return "\n".join(out)
