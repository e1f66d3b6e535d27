"""The GPU check (bench/gpu_check.sh runs it): on one device, in phases, each in a process of its
own under its own timeout and all within --budget seconds, the results written after every phase
(OUT/gpu_check.json, OUT/gpu_check.md, every phase's output in OUT/gpu_check.log), so a crash,
a hang or an out-of-memory loses one phase:

  (a) preflight   the attention kernels, with no fallback to the math path
  (b) maths       the executor's loss and gradients against the C++ engine's (reference .npz)
  (c) pp1/pp2/pp4 bf16 tokens/s and MFU of EPP against 1F1B, and (d) their peak memory
                  (allocated and reserved) against the plan's; pp 1 also writes (e) a calibration
                  file from CostFeedback (OUT/calibration-DEVICE.json)

bench/gpu_check_phases.py holds the phases. The reference comes from --reference (a bundle's,
bench/gpu_bundle.sh), else it is made here with the module's C++ engine (a full build).

    python3 bench/gpu_check.py --device cuda --bundle gpu-bundle --out gpu-check
    python3 bench/gpu_check.py --device cpu --quick --out DIR   # the same paths on a CPU
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# (phase, timeout in seconds on CUDA, on a CPU)
PHASES = [("preflight", 60, 60), ("maths", 90, 90), ("pp1", 150, 120), ("pp2", 120, 90),
          ("pp4", 120, 90)]


def refuse(message):
    sys.exit(f"gpu_check: {message}")


def check_bundle(bundle):
    """The bundle's module loads only in the Python it was built for."""
    path = os.path.join(bundle, "bundle.json")
    if not os.path.exists(path):
        refuse(f"{bundle} is not a bundle (no bundle.json): make one with bash bench/gpu_bundle.sh")
    with open(path) as f:
        meta = json.load(f)
    here = "%d.%d" % sys.version_info[:2]
    if meta["python"] != here:
        refuse(f"the bundle {bundle} was built for Python {meta['python']} ({meta['module']}); "
               f"this is Python {here} ({sys.executable}): run the check with a Python "
               f"{meta['python']} (PYTHON=... bash bench/gpu_check.sh), or rebuild the bundle "
               f"for this one (bash bench/gpu_bundle.sh --python {sys.executable})")
    return meta


def check_machine(device):
    """One message for a PyTorch or a GPU the check cannot use."""
    import torch
    try:
        from infinipipe.torch import require_torch
        require_torch(torch.__version__)  # a PyTorch older than infinipipe.torch's minimum
    except ImportError as e:
        refuse(str(e))
    if device == "cuda":
        if not torch.cuda.is_available():
            refuse(f"--device cuda, but PyTorch {torch.__version__} sees no GPU (a CPU-only "
                   f"PyTorch, or no driver): use --device cpu, or a CUDA build of PyTorch")
        name = torch.cuda.get_device_name(0)
        if not torch.cuda.is_bf16_supported():
            major, minor = torch.cuda.get_device_capability(0)
            refuse(f"{name} (compute capability {major}.{minor}) has no bf16, which the "
                   f"throughput phases train in: run the check on an Ampere or later GPU "
                   f"(compute capability 8.0+)")
        return name, torch.__version__
    return "CPU", torch.__version__


def run_phase(name, timeout, a, env):
    cmd = [sys.executable, os.path.join(HERE, "gpu_check_phases.py"), name, "--device",
           a.device, "--out", a.out, "--scratch", a.scratch, "--reference", a.reference] + \
        (["--quick"] if a.quick else [])
    log = os.path.join(a.scratch, f"phase-{name}.log")
    result_path = os.path.join(a.scratch, f"phase-{name}.json")
    if os.path.exists(result_path):
        os.remove(result_path)
    t0 = time.perf_counter()
    with open(log, "w") as f:
        p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env,
                             start_new_session=True)
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            rc = None
    seconds = time.perf_counter() - t0
    with open(log) as f, open(os.path.join(a.out, "gpu_check.log"), "a") as all_logs:
        all_logs.write(f"== {name} (exit {rc}, {seconds:.0f} s)\n{f.read()}\n")
    if os.path.exists(result_path):
        with open(result_path) as f:
            result = json.load(f)
    else:
        with open(log) as f:
            tail = f.read()[-2000:]
        why = f"timed out after {timeout:.0f} s" if rc is None else f"exited {rc}"
        result = {"phase": name, "ok": False,
                  "error": f"{why} without results; its last output:\n{tail}"}
    result["wall_s"] = seconds
    return result


def fmt_bytes(n):
    return "-" if n is None else f"{n / 2**30:.2f} GiB"


def report(meta, results):
    lines = [f"# GPU check on {meta['device']} (PyTorch {meta['torch']}, Python "
             f"{meta['python']}, module {meta['module']})", "",
             "| phase | result | seconds |", "|---|---|---:|"]
    for r in results:
        lines.append(f"| {r['phase']} | {'ok' if r['ok'] else r['error'].splitlines()[0][:200]}"
                     f" | {r['wall_s']:.0f} |")
    by = {r["phase"]: r for r in results}
    if by.get("preflight", {}).get("ok"):
        lines += ["", "## (a) attention kernels", "", "| dtype | path | packed | context | "
                  "largest error |", "|---|---|---|---|---:|"]
        for dtype in ("float32", "bfloat16"):
            x = by["preflight"][dtype]
            lines.append(f"| {dtype} | {x['path']} | {', '.join(x['packed'])} | "
                         f"{', '.join(x['context'])} | {x['max_error']:.1e} |")
    if by.get("maths", {}).get("ok"):
        m = by["maths"]
        lines += ["", "## (b) the executor against the C++ engine (fp32)", "",
                  "| case | pp x vpp | chunks | recomputed layers | relative error |",
                  "|---|---|---|---:|---:|"]
        for c in m["cases"]:
            lines.append(f"| {c['case']} | {c['pp']} x {c['vpp']} | {', '.join(c['chunks'])} | "
                         f"{c['recomputed_layers']} | {c['relative_error']:.2e} |")
        lines += ["", f"every loss and gradient within {m['max_relative_error']:.1e} of the "
                      f"engine's (tolerance {m['tolerance']:.0e})"]
    runs = [by[p] for p in ("pp1", "pp2", "pp4") if p in by and "epp" in by[p]]
    if runs:
        lines += ["", "## (c) bf16 throughput, EPP against 1F1B", "",
                  "| pp | schedule | path | setting | tokens/s | MFU (plan) | step (plan) |",
                  "|---:|---|---|---|---:|---:|---:|"]
        mem = ["", "## (d) peak memory against the plan", "",
               "| pp | schedule | allocated | reserved | plan |", "|---:|---|---:|---:|---:|"]
        ratios = []
        for r in runs:
            for s in ("epp", "1f1b"):
                x = r[s]
                if "error" in x or "tokens_per_s" not in x:
                    lines.append(f"| {r['pp']} | {s} | | | {x.get('error', 'no result')} | | |")
                else:
                    lines.append(f"| {r['pp']} | {s} | {x['path']} | {x['setting']} | "
                                 f"{x['tokens_per_s']:.0f} | {x['mfu']:.1%} "
                                 f"({x['predicted_mfu']:.1%}) | {x['step_s']:.3f} s "
                                 f"({x['predicted_step_s']:.3f} s) |")
                mem.append(f"| {r['pp']} | {s} | {fmt_bytes(x.get('peak_allocated_bytes'))} | "
                           f"{fmt_bytes(x.get('peak_reserved_bytes'))} | "
                           f"{fmt_bytes(x.get('predicted_peak_bytes'))} |")
            if "tokens_per_s" in r["epp"] and "tokens_per_s" in r["1f1b"]:
                ratios.append(f"EPP / 1F1B tokens/s at pp {r['pp']}: "
                              f"{r['epp']['tokens_per_s'] / r['1f1b']['tokens_per_s']:.2f}")
        lines += [""] + ratios + mem
        cal = by.get("pp1", {}).get("epp", {}).get("calibration")
        if cal:
            lines += ["", "## (e) calibration", "",
                      f"{cal}: {by['pp1']['epp']['calibration_samples']} action times of EPP "
                      f"at pp 1 (--calibration {cal})"]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--quick", action="store_true", help="fewer iterations")
    ap.add_argument("--out", default="gpu-check", help="where the report and files go")
    ap.add_argument("--scratch", help="where each phase's own files go (default OUT/phases)")
    ap.add_argument("--bundle", help="a folder of bench/gpu_bundle.sh: its module and reference")
    ap.add_argument("--reference", help="a folder with the reference small.npz (default: the "
                                        "bundle's, else made here with the C++ engine)")
    ap.add_argument("--budget", type=float, default=None,
                    help="seconds for all phases (default 450 on CUDA, 420 on a CPU)")
    ap.add_argument("--phases", default=",".join(p for p, _, _ in PHASES),
                    help="the phases to run, comma-separated")
    a = ap.parse_args()
    start = time.perf_counter()
    env = dict(os.environ)
    module = "the checkout's build"
    if a.bundle:
        bundle = check_bundle(a.bundle)
        a.bundle = os.path.abspath(a.bundle)
        sys.path.insert(0, a.bundle)
        env["PYTHONPATH"] = a.bundle + (os.pathsep + env["PYTHONPATH"]
                                        if env.get("PYTHONPATH") else "")
        a.reference = a.reference or os.path.join(a.bundle, "reference")
        module = f"bundle of {bundle['commit'][:12]}, pybind11 {bundle['pybind11']}"
    device, torch_version = check_machine(a.device)
    os.makedirs(a.out, exist_ok=True)
    a.out = os.path.abspath(a.out)
    a.scratch = os.path.abspath(a.scratch or os.path.join(a.out, "phases"))
    os.makedirs(a.scratch, exist_ok=True)
    if os.path.exists(os.path.join(a.out, "gpu_check.log")):
        os.remove(os.path.join(a.out, "gpu_check.log"))
    if not a.reference:
        import infinipipe as ip
        if getattr(ip._core, "planner_only", False):
            refuse("this module is a planner-only build without the C++ engine: give the "
                   "reference of a bundle (--bundle DIR or --reference DIR/reference)")
        sys.path.insert(0, HERE)
        from gpu_check_reference import write_reference
        a.reference = os.path.dirname(write_reference(os.path.join(a.scratch, "reference")))
    budget = a.budget or (450 if a.device == "cuda" else 420)
    meta = {"device": device, "torch": torch_version, "python": sys.version.split()[0],
            "module": module}
    wanted = a.phases.split(",")
    unknown = set(wanted) - {p for p, _, _ in PHASES}
    if unknown:
        refuse(f"no phase {', '.join(sorted(unknown))}: the phases are "
               f"{', '.join(p for p, _, _ in PHASES)}")
    results = []
    for name, cuda_s, cpu_s in PHASES:
        if name not in wanted:
            continue
        left = budget - (time.perf_counter() - start)
        if left < 10:
            results.append({"phase": name, "ok": False, "wall_s": 0.0,
                            "error": f"not run: the {budget:.0f} s budget is spent"})
        else:
            print(f"== {name}", flush=True)
            results.append(run_phase(name, min(cuda_s if a.device == "cuda" else cpu_s, left),
                                     a, env))
        text = report(meta, results)  # after every phase: a later crash loses nothing
        with open(os.path.join(a.out, "gpu_check.md"), "w") as f:
            f.write(text)
        with open(os.path.join(a.out, "gpu_check.json"), "w") as f:
            json.dump({**meta, "phases": results}, f, indent=2, default=str)
    print(text, end="")
    failed = [r["phase"] for r in results if not r["ok"]]
    print(f"== gpu check: {time.perf_counter() - start:.0f} s, "
          f"{'every phase ok' if not failed else 'failed: ' + ', '.join(failed)}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
