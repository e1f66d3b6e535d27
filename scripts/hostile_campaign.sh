#!/usr/bin/env bash
# The hand-made hostile-input campaign of issue 33 (docs/reliability.md, "Found and fixed, round
# two"): ~460 inputs through the binary, each run with a time limit and judged by its exit code
# and message. A finding is a hang, a crash, library text or "internal error" in a message, more
# than one error line, a refusal where acceptance was expected or the reverse.
# Usage: bash scripts/hostile_campaign.sh [build/infinipipe]   (prints findings; log in $W)
set -u
SRC=$(cd "$(dirname "$0")/.." && pwd)
B=$(realpath "${1:-$SRC/build/infinipipe}")
W=$(mktemp -d)
LOG=$W/campaign.log
export OMP_NUM_THREADS=1
N=0; BAD=0
t() {
  local expect=$1 desc=$2; shift 3
  N=$((N+1))
  local out rc
  out=$(timeout -k 5 30 "$@" 2>&1 </dev/null); rc=$?
  local why=""
  [ $rc -eq 124 ] && why="HANG"
  [ -z "$why" ] && [ $rc -ne 0 ] && [ $rc -ne 1 ] && [ $rc -ne 2 ] && why="CRASH rc=$rc"
  [ -z "$why" ] && echo "$out" | grep -qiE "internal error|\[json\.exception|Run with --help|Could not convert|bad_alloc|what\(\)|terminate called|-nan|Segmentation" && why="LEAK"
  [ -z "$why" ] && [ "$expect" = refuse ] && [ $rc -eq 0 ] && why="ACCEPTED"
  [ -z "$why" ] && [ "$expect" = ok ] && [ $rc -ne 0 ] && why="REFUSED"
  if [ $rc -ne 0 ] && [ -z "$why" ]; then
    local n; n=$(echo "$out" | grep -c "^infinipipe: error")
    [ "$n" -ne 1 ] && why="MESSAGES=$n"
  fi
  local first; first=$(echo "$out" | grep -m1 "error" | cut -c1-220)
  printf '%s\t%s\trc=%s\t%s\t%s\n' "${why:-ok}" "$desc" "$rc" "$*" "$first" >>"$LOG"
  if [ -n "$why" ]; then BAD=$((BAD+1)); printf '!! %s | %s | rc=%s\n   %s\n' "$why" "$desc" "$rc" "$(echo "$out" | head -3 | cut -c1-300)"; fi
}
cd "$W"; : >"$LOG"
L="--lengths $SRC/examples/lengths-small.txt"
mkfifo fifo; mkdir adir; printf '{"text": "hello"}\n' > in.jsonl
$B data synth --num-documents 40 --seq-length 128 --output corpus >/dev/null
M="--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 128 --global-batch-size 4 --min-tail-slice 32 --data-path corpus"
$B train $M --train-iters 1 --save ck --trace run -q >/dev/null 2>&1 || echo "setup train failed"
$B checkpoint export ck hf >/dev/null || echo "setup export failed"

echo "== 1 special and oversized files"
for s in fifo /dev/zero /dev/urandom adir; do
  t refuse "config $s" -- $B config check $s
  t refuse "--config $s" -- $B plan --config $s $L --out p.json
  t refuse "--lengths $s" -- $B plan --lengths $s --out p.json
  t refuse "--calibration $s" -- $B plan $L --calibration $s --out p.json
  t refuse "simulate --plan $s" -- $B simulate --plan $s
  t refuse "--prompt-file $s" -- $B generate --load ck --prompt-file $s
  t refuse "--tokenizer-model $s" -- $B data prepare --input in.jsonl --output o --tokenizer-type SentencePieceTokenizer --tokenizer-model $s
  t refuse "data prepare --input $s" -- $B data prepare --input $s --output o
  t refuse "generate --tokenizer-model $s" -- $B generate --load ck --prompt hi --tokenizer-type SentencePieceTokenizer --tokenizer-model $s
done
ln -sf $W/fifo fifo.bin; ln -sf $W/fifo fifo.idx
t refuse "--data-path FIFO prefix" -- $B train $M --data-path fifo --train-iters 1
t refuse "data stats FIFO prefix" -- $B data stats --data-path fifo
for f in state.json config.json model.safetensors.index.json; do
  rm -rf ck2; cp -r ck ck2; rm ck2/iter_0000001/$f; mkfifo ck2/iter_0000001/$f
  t refuse "checkpoint $f FIFO" -- $B checkpoint verify ck2
  t refuse "--load checkpoint $f FIFO" -- $B generate --load ck2 --prompt hi
done
for f in config.json model.safetensors tokenizer_config.json; do
  rm -rf hf2; cp -r hf hf2; rm hf2/$f; mkfifo hf2/$f
  if [ $f = tokenizer_config.json ]; then t any "HF $f FIFO (not read by train)" -- $B train --global-batch-size 4 --min-tail-slice 32 --data-path corpus --train-iters 1 --load hf2; continue; fi
  t refuse "HF $f FIFO" -- $B train --global-batch-size 4 --min-tail-slice 32 --data-path corpus --train-iters 1 --load hf2
done
for f in metrics.jsonl config.yaml trace-rank00000.json; do
  rm -rf run2; cp -r run run2; rm run2/$f; mkfifo run2/$f
  t refuse "report $f FIFO" -- $B report run2 --no-html
done
rm -rf run2; cp -r run run2; p=$(ls run2/plans | head -1); rm run2/plans/$p; mkfifo run2/plans/$p
t refuse "report plan FIFO" -- $B report run2 --no-html
truncate -s 17M big.yaml; t refuse "17 MiB YAML" -- $B config check big.yaml
truncate -s 300M noline.jsonl; t refuse "300 MiB line" -- $B data prepare --input noline.jsonl --output o
( printf '{"text": "'; head -c 2000000 /dev/zero | tr '\0' a; printf '"}\n' ) > longdoc.jsonl
t ok "2 MB document" -- $B data prepare --input longdoc.jsonl --output longdoc

echo "== 2 links in a run directory"
echo SECRETSECRET > secret
for f in metrics.jsonl config.yaml trace-rank00000.json calibration.json; do
  rm -rf run2; cp -r run run2; rm -f run2/$f; ln -s $W/secret run2/$f
  if [ $f = calibration.json ]; then t any "report $f link (not read)" -- $B report run2 --no-html; else t refuse "report $f link" -- $B report run2 --no-html; fi
done
rm -rf run2; cp -r run run2; mv run2/plans plansx; ln -s $W/plansx run2/plans
t refuse "report plans/ link" -- $B report run2 --no-html
rm -rf run2; cp -r run run2; p=$(ls run2/plans | head -1); mv run2/plans/$p planx; ln -s $W/planx run2/plans/$p
t refuse "report plan file link" -- $B report run2 --no-html
rm -rf run3; mkdir run3; for f in run/*; do ln -s $W/$f run3/; done
t refuse "run dir of links" -- $B report run3 --no-html
ln -sfn $W/run runlink; t ok "RUN_DIR itself a link" -- $B report runlink --no-html
grep -h SECRET "$LOG" >/dev/null && echo "!! SECRET leaked into a message"

echo "== 3 outputs"
t refuse "--output DIR/" -- $B data prepare --input in.jsonl --output adir/
t refuse "--output /" -- $B data prepare --input in.jsonl --output /
t refuse "--output ." -- $B data prepare --input in.jsonl --output .
t refuse "--output .." -- $B data prepare --input in.jsonl --output ..
t refuse "--output missing/x" -- $B data prepare --input in.jsonl --output missing/x
t refuse "--output-prefix DIR/ key a/b" -- $B data prepare --input in.jsonl --output-prefix adir/ --json-keys a/b
t refuse "key .." -- $B data prepare --input in.jsonl --output-prefix px --json-keys ..
t refuse "key ../x" -- $B data prepare --input in.jsonl --output-prefix px --json-keys text ../x
cp in.jsonl same.bin; t refuse "input X.bin output X" -- $B data prepare --input same.bin --output same
cp in.jsonl same2.idx; t refuse "input X.idx output X" -- $B data prepare --input same2.idx --output same2
ln -sf $W/in.jsonl alias.bin; t refuse "output .bin a link to the input" -- $B data prepare --input in.jsonl --output alias
cmp -s in.jsonl same.bin || echo "!! input replaced"
t refuse "report --html DIR" -- $B report run --html adir
t refuse "report --html DIR/" -- $B report run --html adir/
t refuse "report --json DIR" -- $B report run --no-html --json adir
t refuse "report --merge-trace /" -- $B report run --no-html --merge-trace /
t refuse "report --html = trace" -- $B report run --html run/trace-rank00000.json
t refuse "report --json = metrics" -- $B report run --no-html --json run/metrics.jsonl
t refuse "plan --out DIR" -- $B plan $L --out adir
t refuse "plan --out DIR/" -- $B plan $L --out adir/
t refuse "plan --svg DIR/" -- $B plan $L --out p.json --svg adir/
t refuse "plan --out = lengths" -- $B plan --lengths $W/len.txt --out $W/len.txt
t refuse "checkpoint export to /" -- $B checkpoint export ck /
t refuse "profile --out DIR/" -- $B profile --out adir/
ls adir | grep -q . && echo "!! something written into adir: $(ls adir)"
ls *.tmp adir/*.tmp run/*.tmp 2>/dev/null && echo "!! temporaries left"

echo "== 4 extreme numbers in every key of the option table"
for k in num-layers hidden-size num-attention-heads num-query-groups ffn-hidden-size vocab-size seq-length max-position-embeddings pipeline-model-parallel-size data-parallel-size virtual-pipeline-model-parallel-size num-layers-per-virtual-pipeline-stage ulysses-degree micro-batch-size min-tail-slice seq1f1b-slices recompute-num-layers zero-stage global-batch-size train-iters train-samples lr-warmup-iters lr-decay-iters lr-warmup-samples lr-decay-samples seed save-interval eval-interval eval-iters exit-interval log-interval num-devices devices-per-node; do
  for v in 4611686018427387904 -4611686018427387904 99999999999999999999 1e99 -1; do
    t refuse "--$k $v" -- $B plan --$k $v $L --out p.json
  done
done
for k in rotary-base norm-epsilon init-method-std p2p-timeout watchdog-timeout lr min-lr lr-warmup-fraction weight-decay adam-beta1 adam-beta2 adam-eps clip-grad exit-duration-in-mins intra-node-bandwidth inter-node-bandwidth intra-node-latency inter-node-latency; do
  for v in 1e308 -1e308 nan inf 1e400 1e-320; do
    t any "--$k $v" -- $B plan --$k $v $L --out p.json
  done
done
for k in memory-budget device-memory; do
  for v in 1e30GiB -1 1e400 nanGiB 9223372036854775807 1e18TiB; do t refuse "--$k $v" -- $B plan --$k $v $L --out p.json; done
done
printf 'train-iters: 4611686018427387904\n' > ti.yaml; t refuse "YAML train-iters 2^62" -- $B config check ti.yaml
t any "train-samples 2^50 lr" -- $B plan --train-samples 1125899906842624 --global-batch-size 1 $L --out p.json

echo "== 4b subcommand flags"
for v in 4611686018427387904 -1 1e99 99999999999999999999 abc; do
  t refuse "synth --num-documents $v" -- $B data synth --num-documents $v --seq-length 64 --output s
  t refuse "synth --seq-length $v" -- $B data synth --num-documents 4 --seq-length $v --output s
  t refuse "generate --max-new-tokens $v" -- $B generate --load ck --prompt hi --max-new-tokens $v
  t refuse "generate --top-k $v" -- $B generate --load ck --prompt hi --top-k $v
  t refuse "prepare --workers $v" -- $B data prepare --input in.jsonl --output o --workers $v
  t any "verify --iteration $v" -- $B checkpoint verify ck --iteration $v
  t refuse "train --trace-iterations $v" -- $B train $M --train-iters 1 --trace-iterations $v --trace tr
  t refuse "simulate --repeats $v" -- $B simulate $L --repeats $v
done
for v in nan -1 1e308 inf 2; do
  t any "generate --temperature $v" -- $B generate --load ck --prompt hi --temperature $v
  t refuse "generate --top-p $v" -- $B generate --load ck --prompt hi --top-p $v
done

echo "== 5 accepted silently"
printf 'num-layers: 2\nnum-layers: 4\n' > d1.yaml; t refuse "dup key" -- $B config check d1.yaml
printf 'seq-length: 64\nseq_length: 64\n' > d2.yaml; t refuse "dup key spelling" -- $B config check d2.yaml
printf 'dp: 1\ndata-parallel-size: 1\n' > d3.yaml; t refuse "dup alias" -- $B config check d3.yaml
printf 'tie-embeddings: true\nno-tie-embeddings: true\n' > d4.yaml; t refuse "flag and negation" -- $B config check d4.yaml
printf 'foo-bar: 1\nfoo-bar: 2\n' > d5.yaml; t refuse "dup unknown key" -- $B config check d5.yaml
printf 'num-layers: 2\n---\nnum-layers: 4\n' > m1.yaml; t refuse "two docs" -- $B config check m1.yaml
printf 'num-layers: 2\n---\n' > m2.yaml; t refuse "empty second doc" -- $B config check m2.yaml
printf 'num-layers: 2\n...\n---\nfoo: 1\n' > m3.yaml; t refuse "doc end then doc" -- $B config check m3.yaml
printf -- '---\nnum-layers: 2\n...\n' > m4.yaml; t ok "one doc with markers" -- $B config check m4.yaml
printf '# c\n,\nnum-layers: 2\n' > y2.yaml; t refuse "stray flow entry" -- $B config check y2.yaml
cp $SRC/fuzz/regressions/config_yaml/stray-flow-entry-after-document y3.yaml; t refuse "fuzz stray" -- $B config check y3.yaml
printf 'num-layers: 2\n}\n' > y4.yaml; t refuse "stray flow end" -- $B config check y4.yaml
printf 'a: &x 1\nb: *x\n' > y1.yaml; t refuse "anchors to unknown keys" -- $B config check y1.yaml
python3 - <<'PY'
import json, struct, shutil, os
def add(path, names, data_extra=0):
    b = open(path, 'rb').read(); n = struct.unpack('<Q', b[:8])[0]
    h = json.loads(b[8:8+n]); d = b[8+n:]
    off = len(d)
    for nm in names:
        h[nm] = {'dtype': 'F32', 'shape': [1], 'data_offsets': [off, off+4]}; off += 4
    t = json.dumps(h).encode(); t += b' ' * ((8 - len(t) % 8) % 8)
    open(path, 'wb').write(struct.pack('<Q', len(t)) + t + d + b'\0' * (off - len(d)))
for name, extra in [('hfx1', ['model.layers.2.mlp.up_proj.weight']), ('hfx2', ['vision.weight']),
                    ('hfx3', ['lm_head.weight']), ('hfx4', ['model.layers.0.self_attn.rotary_emb.inv_freq']),
                    ('hfx5', ['model.layers.0.self_attn.q_proj.bias'])]:
    shutil.rmtree(name, ignore_errors=True); shutil.copytree('hf', name); add(name + '/model.safetensors', extra)
# sharded: index with an extra entry, and a shard tensor missing from the index
for name in ['hfs1', 'hfs2']:
    shutil.rmtree(name, ignore_errors=True); shutil.copytree('hf', name)
    b = open(name + '/model.safetensors', 'rb').read(); n = struct.unpack('<Q', b[:8])[0]
    h = json.loads(b[8:8+n]); os.rename(name + '/model.safetensors', name + '/model-00001-of-00001.safetensors')
    wm = {k: 'model-00001-of-00001.safetensors' for k in h if k != '__metadata__'}
    if name == 'hfs1': wm['model.layers.7.mlp.down_proj.weight'] = 'model-00001-of-00001.safetensors'
    else: del wm['model.norm.weight']
    json.dump({'metadata': {}, 'weight_map': wm}, open(name + '/model.safetensors.index.json', 'w'))
PY
HT="--global-batch-size 4 --min-tail-slice 32 --data-path corpus --train-iters 1"
for h in hfx1 hfx2 hfx3 hfx5 hfs1 hfs2; do t refuse "HF $h" -- $B train $HT --load $h; done
t ok "HF inv_freq buffer" -- $B train $HT --load hfx4
t ok "HF extra with --ignore-unexpected-keys" -- $B train $HT --load hfx1 --ignore-unexpected-keys
t ok "HF --pretrained-checkpoint extra ignored" -- $B train $HT --pretrained-checkpoint hfx2 --ignore-unexpected-keys

echo "== 6 messages"
for f in optimizer.safetensors model.safetensors state.json shard-rank00000.json config.json model.safetensors.index.json cost-fit-rank00000.json tokenizer_config.json; do
  rm -rf ck2; cp -r ck ck2; g=ck2/iter_0000001/$f; sz=$(stat -c %s $g); truncate -s $((sz/2)) $g
  if [ $f = shard-rank00000.json ]; then t any "verify truncated $f (read only by the commit)" -- $B checkpoint verify ck2; continue; fi
  t refuse "verify truncated $f" -- $B checkpoint verify ck2
  echo "$(grep -c "$f" <<<"$(tail -1 "$LOG")") $f named" | grep -q "^0" && echo "!! verify of truncated $f does not name it: $(tail -1 "$LOG" | cut -f5)"
done
rm -rf ck2; cp -r ck ck2; sed -i 's/"iteration": 1/"iteration": 7/' ck2/iter_0000001/state.json
t refuse "verify edited state.json" -- $B checkpoint verify ck2
t refuse "verify empty dir" -- $B checkpoint verify adir
rm -rf ck3; cp -r ck ck3; cp -r ck3/iter_0000001 ck3/iter_0000002; rm ck3/iter_0000002/state.json
t ok "verify with a newer interrupted save" -- $B checkpoint verify ck3
printf '{"a": 1e400}' > big.json; t refuse "plan 1e400" -- $B simulate --plan big.json
printf '{"a": "\xff"}' > utf.json; t refuse "plan bad utf8" -- $B simulate --plan utf.json
t refuse "calibration 1e400" -- $B plan $L --calibration big.json --out p.json
t refuse "missing value" -- $B simulate --plan
t refuse "unknown subcommand flag" -- $B data prepare --bogus
t refuse "extra positional" -- $B checkpoint verify ck extra

echo "campaign: $N inputs, $BAD findings; log $LOG"
