"""The GPU check's workloads, shared by the reference (bench/gpu_check_reference.py, here) and the
check (bench/gpu_check_phases.py, there): the same words must give the same model on both."""

import numpy as np

SMALL = ["--num-layers", "8", "--hidden-size", "64", "--num-attention-heads", "4",
         "--num-query-groups", "2", "--group-query-attention", "--seq-length", "256",
         "--vocab-size", "97", "--device", "a800-80gb", "--min-tail-slice", "16",
         "--global-batch-size", "12"]
SMALL_LENGTHS = [256, 40, 17, 200, 5, 96, 2, 130, 64, 31, 150, 77]
# The last case's budget forces split chunks (slices attending to earlier ones) and recompute.
SLICED = ("epp sliced", ["--schedule", "epp", "--pp", "2", "--vpp", "2",
                         "--memory-budget", "5MiB"])


def small_sequences():
    rng = np.random.default_rng(5)
    return [[int(t) for t in rng.integers(0, 97, n)] for n in SMALL_LENGTHS]


def maths_cases(schedules):
    """(name, extra words) of every schedule's plan at pp 2, then the sliced, recomputing plan on
    virtual stages."""
    cases = [(s, ["--schedule", s, "--pp", "2", "--memory-budget", "8MiB"] +
              (["--vpp", "2"] if s == "interleaved" else [])) for s in schedules]
    return cases + [SLICED]


# The throughput workload on a GPU: a ~1B Llama on a long-tail batch of 32K-token sequences.
GPU_MODEL = ["--num-layers", "16", "--hidden-size", "2048", "--num-attention-heads", "16",
             "--num-query-groups", "8", "--group-query-attention", "--ffn-hidden-size", "5632",
             "--seq-length", "32768", "--vocab-size", "32000", "--global-batch-size", "16",
             "--bf16"]
# The same paths on a CPU, small enough for a test: bf16 matrix products run about ten times
# slower than fp32 on CPUs without bf16 instructions, so a step of ~3K tokens on a narrow model.
CPU_MODEL = ["--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "4",
             "--num-query-groups", "2", "--group-query-attention", "--seq-length", "512",
             "--vocab-size", "2048", "--global-batch-size", "8", "--bf16"]


def long_tail(rng, n, longest):
    """Lengths of a long-tail batch: log-normal, a sixteenth of them at the longest length."""
    body = np.clip(rng.lognormal(7.0, 1.2, n), 16, longest).astype(int)
    body[:max(1, n // 16)] = longest
    return [int(x) for x in body]
