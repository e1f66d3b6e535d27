"""The checks of `scripts/multihost-check.sh train`: a run across two hosts against the same run
on one host. Exits 1, saying what differs, unless every iteration's loss and gradient norm are
bit-identical, every plan is the same (chunks and their slices, stages, action order,
recompute), and the plans slice, pack and recompute (else the check would not test them).

Usage: multihost_compare.py ONE_METRICS TWO_METRICS ONE_PLANS TWO_PLANS...
       multihost_compare.py --resumed WHOLE_METRICS RESUMED_METRICS
  --resumed: a run resumed from a checkpoint against the uninterrupted run: each iteration it
  logged has the uninterrupted run's loss and gradient norm, bit for bit.
"""
import glob
import json
import os
import sys


def metrics(path):
    """The last record of every iteration (a resumed run may repeat some)."""
    out = {}
    with open(path) as f:
        for line in f:
            rec = json.loads(line)
            if "iteration" in rec and "loss" in rec:
                out[rec["iteration"]] = rec
    return out


def plans(folders):
    out = {}
    for folder in folders:
        for path in glob.glob(os.path.join(folder, "iter-*.json")):
            with open(path) as f:
                out[os.path.basename(path)] = json.load(f)
    return out


def what_plans(p):
    # Where the ranks run (rank_hosts) differs by design; everything the executor does must not.
    return {k: p[k] for k in ("chunks", "pipeline_of_chunk", "stages", "actions", "schedule",
                              "predicted_peak_bytes")}


def resumed(whole_path, resumed_path):
    whole, part = metrics(whole_path), metrics(resumed_path)
    bad = [] if part else ["the resumed run logged no iteration"]
    for it in sorted(part):
        for key in ("loss", "grad_norm"):
            a, b = whole.get(it, {}).get(key), part[it][key]
            if a != b:
                bad.append(f"iteration {it}: {key} {a!r} uninterrupted, {b!r} resumed")
    for b in bad:
        print("multihost-check: " + b, file=sys.stderr)
    if not bad:
        print(f"iterations {min(part)}-{max(part)} resumed: losses and gradient norms equal the "
              "uninterrupted run's")
    return 1 if bad else 0


def main(argv):
    if len(argv) == 4 and argv[1] == "--resumed":
        return resumed(argv[2], argv[3])
    if len(argv) < 5:
        print(__doc__, file=sys.stderr)
        return 2
    one, two = metrics(argv[1]), metrics(argv[2])
    bad = []
    if sorted(one) != sorted(two) or not one:
        bad.append(f"iterations: one host {sorted(one)}, two hosts {sorted(two)}")
    for it in sorted(set(one) & set(two)):
        for key in ("loss", "grad_norm"):
            a, b = one[it][key], two[it][key]
            if a != b:
                bad.append(f"iteration {it}: {key} {a!r} on one host, {b!r} on two")
            else:
                print(f"iteration {it}: {key} {a!r} on both")
    p_one, p_two = plans([argv[3]]), plans(argv[4:])
    if sorted(p_one) != sorted(p_two) or not p_one:
        bad.append(f"plan files: one host {sorted(p_one)}, two hosts {sorted(p_two)}")
    sliced = packed = recomputed = False
    for name in sorted(set(p_one) & set(p_two)):
        if what_plans(p_one[name]) != what_plans(p_two[name]):
            bad.append(f"plan {name} differs")
        seqs = [s[0] for c in p_one[name]["chunks"] for s in c["slices"]]
        sliced |= len(seqs) != len(set(seqs))
        packed |= any(len(c["slices"]) > 1 for c in p_one[name]["chunks"])
    recomputed = any(r.get("recompute_layers", 0) > 0 for r in one.values())
    for ok, what in ((sliced, "slices a sequence"), (packed, "packs sequences into a chunk"),
                     (recomputed, "recomputes")):
        if not ok:
            bad.append(f"no plan {what}: the check does not test it; change its settings")
    for b in bad:
        print("multihost-check: " + b, file=sys.stderr)
    if not bad:
        print(f"{len(one)} iterations, {len(p_one)} plans (sliced, packed, recomputing): equal")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
