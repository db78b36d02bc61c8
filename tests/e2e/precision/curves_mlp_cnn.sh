#!/usr/bin/env bash
# Mixed precision (precision.mode) on the MLP and the CNN:
#  1. bf16 and fp16 track the fp32 loss curve over 300 steps: the mean loss of every 50-step
#     window within a stated relative tolerance (measured worst cases: MLP 0.4% (2026-12-03),
#     CNN 2.0% against an fp32 noise floor of 1.6% (2026-12-04));
#  2. the fallback of a host without AVX512-BF16 (TRELLIS_CPU_HIDE) says so and computes the
#     same losses bit for bit (both run the emulated kernels);
#  3. native bf16 kernels track fp32 too, the MLP and the CNN (its convolutions in oneDNN bf16),
#     or, where oneDNN has no bf16 matmul for the CPU, are refused with the reason; auto follows
#     its measured bf16/fp32 GEMM ratio; native fp16 (no host kernel) is refused.
source "$(dirname "$0")/common.sh"
curves mlp 0.02 "${mlp[@]}"
curves cnn 0.04 "${cnn[@]}"
# The fp32 noise floor, printed beside the CNN's curves: fp32 with another convolution
# summation order. A build without oneDNN runs im2col already: the same run twice.
if "$TRELLIS_BIN" info | grep -q "TRELLIS_ENABLE_ONEDNN=ON"; then
  trellis_run 1 train "${cnn[@]}" --train.max_steps=300 --log.interval=1 --data.test= \
    --kernels.conv=im2col --run.dir="$WORK/cnn-fp32-im2col" > "$WORK/cnn-fp32-im2col.log"
  "${compare[@]}" --rtol 0.04 "$WORK/cnn-fp32" "$WORK/cnn-fp32-im2col"
fi

# 2. The fallback path, forced.
TRELLIS_CPU_HIDE=avx512_bf16,amx_bf16 trellis_run 1 train "${mlp[@]}" --train.max_steps=300 \
  --log.interval=1 --data.test= --precision.mode=bf16 --run.dir="$WORK/mlp-hidden" > "$WORK/mlp-hidden.log"
grep -q "this CPU has no AVX512-BF16 instructions (TRELLIS_CPU_HIDE=avx512_bf16,amx_bf16)" \
  "$WORK/mlp-hidden.log" || fail "the fallback did not say why: $(grep precision "$WORK/mlp-hidden.log")"
"$py" "$TRELLIS_SRC/tools/compare_losses.py" --rtol 0 --steps 300 "$WORK/mlp-bf16" "$WORK/mlp-hidden"

# 3. Native 16-bit kernels (oneDNN bf16 matmul here; slower than emulated on an Intel CPU without
# AMX, faster with AMX or on AMD Zen 4): the same curve. Where oneDNN has no bf16 matmul for the CPU
# (AVX2 only), `trellis info` says so and asking for native is refused with the reason.
# fp16 has no host kernel: refused.
if "$TRELLIS_BIN" info | grep -q "native 16-bit GEMM: bf16"; then
  trellis_run 1 train "${mlp[@]}" --train.max_steps=300 --log.interval=1 --data.test= \
    --precision.mode=bf16 --precision.kernels=native --run.dir="$WORK/mlp-native" > "$WORK/mlp-native.log"
  grep -q "precision: bf16 with native kernels" "$WORK/mlp-native.log" || fail "native bf16 did not run"
  "${compare[@]}" --rtol 0.02 "$WORK/mlp-fp32" "$WORK/mlp-native"
  # The CNN's convolutions in bf16 through oneDNN where the CPU has AVX512-BF16 or AMX.
  trellis_run 1 train "${cnn[@]}" --train.max_steps=300 --log.interval=1 --data.test= \
    --precision.mode=bf16 --precision.kernels=native --run.dir="$WORK/cnn-native" > "$WORK/cnn-native.log"
  "${compare[@]}" --rtol 0.04 "$WORK/cnn-fp32" "$WORK/cnn-native"
  # precision.kernels = auto takes them where the probe measures oneDNN's bf16 GEMM at least
  # 1.2x its fp32 one; at 2 ranks both take the slower rank's figure, and the run says which.
  trellis_run 2 train "${mlp[@]}" --data.test= --train.max_steps=5 --precision.mode=bf16 \
    --run.dir="$WORK/mlp-auto" > "$WORK/mlp-auto.log"
  line=$(grep "precision: bf16 with" "$WORK/mlp-auto.log" | head -1)
  speedup=$(sed -n 's/.*measured \([0-9.]*\)x its fp32 GEMM here (the least over all ranks).*/\1/p' <<< "$line")
  [[ -n $speedup ]] || fail "auto did not say what it measured: $line"
  want=emulated
  awk -v s="$speedup" 'BEGIN { exit !(s >= 1.2) }' && want=native
  [[ $line == *"with $want kernels"* ]] || fail "auto measured ${speedup}x but did not pick $want: $line"
  echo "auto: bf16 GEMM measured ${speedup}x fp32, $want kernels"
else
  rc=0
  trellis_run 1 train "${mlp[@]}" --data.test= --precision.mode=bf16 --precision.kernels=native \
    --run.dir="$WORK/native-bf16" > "$WORK/native-bf16.log" 2>&1 || rc=$?
  # (A build without oneDNN, e.g. the portable build, has no native bf16 GEMM on any CPU.)
  [[ $rc -ne 0 ]] && grep -Eq "precision.kernels = native: (oneDNN has no bf16 matmul on this CPU|this build has no native bf16 GEMM)" "$WORK/native-bf16.log" \
    || fail "native bf16 without a kernel was not refused: $(tail -2 "$WORK/native-bf16.log")"
  echo "this host has no native bf16 GEMM: checked that native bf16 is refused"
fi
rc=0
trellis_run 1 train "${mlp[@]}" --data.test= --precision.mode=fp16 --precision.kernels=native \
  --run.dir="$WORK/native16" > "$WORK/native16.log" 2>&1 || rc=$?
[[ $rc -ne 0 ]] && grep -q "precision.kernels = native: this build has no native fp16 GEMM" "$WORK/native16.log" \
  || fail "native fp16 on the host was not refused: $(tail -2 "$WORK/native16.log")"
echo "mixed precision, MLP and CNN: all checks passed"
