#!/usr/bin/env bash
# One device call's worth of GPU work, run from the repository root; at most 8 files land in $OUT.
#
#   bash benchmarks/gpu_batch.sh suite-a   # 2 GPUs: 8 suite workloads, 4 per GPU, in parallel (~7 min)
#   bash benchmarks/gpu_batch.sh suite-b   # 2 GPUs: GPU 0 the last 4 suite workloads; GPU 1 the GPU tests,
#                                          # then bf16 attention and int8 requantization (low precision)
#   LIMIT=583 bash benchmarks/gpu_batch.sh suite-all   # 2 GPUs: all 12 workloads, 6 per GPU (~9 min)
#   bash benchmarks/gpu_batch.sh trust       # 1 GPU, ~7 min: the exploit corpus's GPU cases, then the GPU tests
#   bash benchmarks/gpu_batch.sh honest      # 1 GPU, ~6 min: the corpus's GPU cases, honest compile/Triton/SDPA
#                                            # candidates through verify, SDPA's NaN/Inf pattern per backend
#   bash benchmarks/gpu_batch.sh gputests    # 1 GPU, ~5 min: the GPU tests alone
#   DEV=dir SKIP=0 N=5 bash benchmarks/gpu_batch.sh memory   # 1 GPU: the gate's peak memory on the N problems
#                                            # of DEV with the largest inputs after the SKIP largest (~100 s each)
#   DEV=dir ONLY=name-globs bash benchmarks/gpu_batch.sh plans  # 1 GPU: one emitted baseline's check per problem in the
#                                            # lean plan, then in the full one (time, peak: the 1 GiB rule), then the
#                                            # memory plan's GPU tests (~4 min for one 1-4 GiB problem)
#   bash benchmarks/gpu_batch.sh window      # 1 GPU, ~1 min: where a short forward's timed window goes
#   KB=dir SOUT=dir ONLY=ids bash benchmarks/gpu_batch.sh sample   # 1 GPU: `kernelgate suite KB --only ONLY
#                                            # --resume --out SOUT`, a sample's next few problems (carry SOUT
#                                            # in, and back as $OUT/suite.tgz), ~100 s a problem
#   bash benchmarks/gpu_batch.sh pallas      # 1 GPU, ~8 min: the Pallas GPU tests (JAX's GPU lowering), then the
#                                            # three examples/ports implementations ported to Pallas and benched
#   bash benchmarks/gpu_batch.sh jaxthreads  # 1 GPU, ~1 min: which JAX threads take Python thread states after the
#                                            # worker's JAX prime (a Pallas port was ended `introspection`)
#   DEV=dir bash benchmarks/gpu_batch.sh lean  # 1 GPU, ~9 min: where prepare's and one judge's time goes on
#                                            # attention and two dev problems of 6-8 GiB; then the GPU tests
#   DEV=dir bash benchmarks/gpu_batch.sh reduceconv  # 1 GPU, ~8 min: rewrite:reduce-conv's parts timed
#                                            # (diag_reduce_conv.py), then optimize --budget 150 on the dev problems
#                                            # whose convolution output is averaged (level2/44, 13), each then benched
#   DEV=dir bash benchmarks/gpu_batch.sh spares      # 1 GPU, ~9 min: reduce-conv's parts, a search's spare takes
#                                            # (optimize --budget 150 on level2/44, then bench), the GPU corpus
#   DEV=dir bash benchmarks/gpu_batch.sh held        # 1 GPU, ~9 min: the same search with spares held while timing,
#                                            # then the GPU tests
#   bash benchmarks/gpu_batch.sh check       # 2 GPUs, ~4 min: GPU 1 the GPU tests; GPU 0 torch.compile over the
#                                            # generated GEMM, then kept vs fresh baseline workers
#
# Then, here: python benchmarks/optimize_suite.py --merge part1.json part2.json part3.json --json results/...
# and benchmarks/fusion_rank.py over the unpacked out*.tgz (each holds <workload>/result.json, report.md).
# BUDGET (default 90) and LIMIT (seconds per suite process, default 540) override.
set -u
: "${OUT:?set OUT to the folder results go to}"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1

# each GPU's processes get their own half of the host's cores (the timed window includes host work:
# a compile or autotune in the other GPU's search must not slow this one's launches)
cores() {   # GPU index -> its core range, for taskset
    local n half
    n=$(nproc); half=$(( n / 2 ))
    if [ "$1" = 0 ]; then echo "0-$(( half - 1 ))"; else echo "$half-$(( n - 1 ))"; fi
}

pin() {     # GPU index, command...: the command on that GPU's cores (as is without taskset)
    local gpu=$1; shift
    if command -v taskset >/dev/null 2>&1; then taskset -c "$(cores "$gpu")" "$@"; else "$@"; fi
}

suite() {   # GPU, part number, comma list of workloads
    local CUDA_VISIBLE_DEVICES=$1
    export CUDA_VISIBLE_DEVICES
    pin "$1" timeout "${LIMIT:-540}" python benchmarks/optimize_suite.py --target cuda \
        --budget "${BUDGET:-90}" --out "/tmp/kg_s$1" --json "$OUT/part$2.json" --only "$3" > "$OUT/log$2.txt" 2>&1
    tar czf "$OUT/out$2.tgz" --exclude='*/candidates' -C /tmp "kg_s$1"
}

optbench() {    # optimize --budget 150 on the dev problem level2/$1, then bench of the module it emitted
    local f
    f=$(ls "${DEV:?set DEV}"/level2/"$1"_*.py)
    timeout 190 python -m kernelgate optimize "$f" --target cuda --budget 150 --out "/tmp/kg_o$1" --json \
        > "$OUT/opt$1.json" 2> "$OUT/opt$1.txt"
    timeout 50 python -m kernelgate bench "/tmp/kg_o$1/reference.py" "/tmp/kg_o$1/optimized.py" --target cuda \
        --json > "$OUT/bench$1.json" 2> "$OUT/bench$1.txt"
}

lowprec() {
    export CUDA_VISIBLE_DEVICES=1
    pin 1 timeout 150 python -m pytest -q -m gpu tests -p no:cacheprovider > "$OUT/pytest_gpu.txt" 2>&1
    pin 1 timeout 380 python benchmarks/lowprec_h200.py --out /tmp/kg_lowprec.json --budget "${BUDGET:-60}" \
        --only bf16_attention int8_linear_requant > "$OUT/lowprec_log.txt" 2>&1
    cp /tmp/kg_lowprec.json "$OUT/lowprec.json" 2>/dev/null
}

case "${1:-}" in
    suite-a) suite 0 1 elementwise_chain,linear_bias_gelu,avgpool,layernorm_residual &
             suite 1 2 conv_bn_relu,attention,softmax_scale,mlp & wait ;;
    suite-b) suite 0 3 gru,rms_norm,small_cnn,transformer_blocks & lowprec & wait ;;
    suite-all) suite 0 1 small_cnn,mlp,transformer_blocks,rms_norm,attention,elementwise_chain &
               suite 1 2 conv_bn_relu,avgpool,softmax_scale,linear_bias_gelu,gru,layernorm_residual & wait ;;
    check) ( export CUDA_VISIBLE_DEVICES=0
             pin 0 timeout 120 python benchmarks/diag_compile_over_gemm.py --out "$OUT/compile_over_gemm.json" \
               > "$OUT/compile_over_gemm.txt" 2>&1
             pin 0 timeout 300 python benchmarks/diag_baseline_worker.py --out "$OUT/baseline_worker.json" \
               > "$OUT/baseline_worker.txt" 2>&1 ) &
           ( export CUDA_VISIBLE_DEVICES=1; pin 1 timeout 300 python -m pytest -q -m gpu tests -p no:cacheprovider \
               > "$OUT/pytest_gpu.txt" 2>&1 ) & wait ;;
    trust) timeout 200 python tests/corpus/run_corpus.py --gpu-only --json "$OUT/corpus_gpu.json" \
               > "$OUT/corpus_gpu.txt" 2>&1
           timeout 390 python -m pytest -q -m gpu tests -p no:cacheprovider > "$OUT/pytest_gpu.txt" 2>&1 ;;
    honest) timeout 200 python tests/corpus/run_corpus.py --gpu-only --json "$OUT/corpus_gpu.json" \
               > "$OUT/corpus_gpu.txt" 2>&1
            timeout 300 python benchmarks/diag_gpu_honest.py --out "$OUT/honest_gpu.json" > "$OUT/honest_gpu.txt" 2>&1
            timeout 90 python benchmarks/diag_sdpa_nonfinite.py --out "$OUT/sdpa_nonfinite.json" \
               > "$OUT/sdpa_nonfinite.txt" 2>&1 ;;
    gputests) timeout 560 python -m pytest -q -m gpu tests -p no:cacheprovider > "$OUT/pytest_gpu.txt" 2>&1 ;;
    memory) timeout "${LIMIT:-580}" python benchmarks/memory_h200.py "${DEV:?set DEV}" --skip "${SKIP:-0}" \
               --largest "${N:-5}" --budget "${BUDGET:-90}" --out "$OUT/memory_part.json" > "$OUT/memory.txt" 2>&1 ;;
    lean) timeout 370 python benchmarks/diag_lean.py "${DEV:?set DEV}" --file benchmarks/suite/attention.py \
              --only "48_Mean*" --only "19_ReLU*" --timeout 150 --out "$OUT/lean.json" > "$OUT/lean.txt" 2>&1
          timeout 170 python -m pytest -q -m gpu tests -p no:cacheprovider > "$OUT/pytest_gpu.txt" 2>&1 ;;
    plans) # the same reduced check of an emitted baseline in the lean plan and in the full one, for each problem of
           # ONLY (file-name globs, comma-separated: "2_ConvTranspose2d*"): time and peak, for the 1 GiB rule (gate/memory.py LEAN_ABOVE); then the
           # memory plan's GPU tests
           IFS=, read -r -a globs <<< "${ONLY:?set ONLY}"
           only=(); for g in "${globs[@]}"; do only+=(--only "$g"); done
           for plan in lean full; do
               timeout 230 python benchmarks/diag_lean.py "${DEV:?set DEV}" "${only[@]}" --memory "$plan" --emitted compile \
                   --timeout 220 --out "$OUT/plan_$plan.json" > "$OUT/plan_$plan.txt" 2>&1
           done
           timeout 200 python -m pytest -q -m gpu tests/gate/test_memory.py -p no:cacheprovider > "$OUT/pytest_memory.txt" 2>&1 ;;
    window) python benchmarks/diag_timed_window.py --out "$OUT/window.json" > "$OUT/window.txt" 2>&1 ;;
    pallas) timeout 120 python -m pytest -q -m gpu tests/kernels/test_pallas.py -p no:cacheprovider \
                > "$OUT/pytest_pallas.txt" 2>&1
            timeout 400 python benchmarks/port_pallas.py --target cuda --budget "${BUDGET:-90}" --timeout 200 \
                --out "$OUT/port_pallas_h200.json" > "$OUT/port_pallas.txt" 2>&1 ;;
    jaxthreads) timeout 120 python benchmarks/diag_jax_threads.py --out "$OUT/jax_threads_h200.json" \
                > "$OUT/jax_threads.txt" 2>&1 ;;
    reduceconv) timeout 100 python benchmarks/diag_reduce_conv.py --out "$OUT/reduce_conv_parts.json" \
                    > "$OUT/reduce_conv_parts.txt" 2>&1
                for n in 44 13; do optbench "$n"; done ;;
    spares) # where a GPU search's worker start goes (phases' spare_takes), on level2/44 (a lean plan just over
            # 1 GiB), with rewrite:reduce-conv's parts first and the GPU red-team corpus after
            timeout 100 python benchmarks/diag_reduce_conv.py --out "$OUT/reduce_conv_parts.json" \
                > "$OUT/reduce_conv_parts.txt" 2>&1
            optbench 44
            timeout 200 python tests/corpus/run_corpus.py --gpu-only --json "$OUT/corpus_gpu.json" \
                > "$OUT/corpus_gpu.txt" 2>&1 ;;
    held) # a search's phases with spares primed ahead and held during measurements (level2/44 at --budget 150,
          # then bench), then the GPU tests
          optbench 44
          timeout 330 python -m pytest -q -m gpu tests -p no:cacheprovider > "$OUT/pytest_gpu.txt" 2>&1 ;;
    prebuild) timeout 300 python benchmarks/prebuild_cache.py --target cuda --out "$OUT/prebuild_cache_h200.json" \
                > "$OUT/prebuild.txt" 2>&1 ;;
    sample) { nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
              python -c "import sys, torch, triton; print(sys.version.split()[0], torch.__version__, torch.version.cuda, triton.__version__)"
            } > "$OUT/conditions.txt" 2>&1
            timeout "${LIMIT:-560}" python -m kernelgate suite "${KB:?set KB}" --target cuda --budget-per "${BUDGET:-90}" \
                --out "${SOUT:?set SOUT}" --resume ${RETRY:+--retry-failed} --only "${ONLY:?set ONLY}" --timeout-per "${TPER:-150}" --json \
                > "$OUT/summary.json" 2> "$OUT/suite.txt"
            tar czf "$OUT/suite.tgz" --exclude='*/candidates' "$SOUT" ;;
    *) echo "usage: bash benchmarks/gpu_batch.sh suite-a|suite-b|suite-all|check|trust|honest|gputests|memory|lean|plans|window|pallas|jaxthreads|prebuild|sample|reduceconv|spares|held" >&2; exit 2 ;;
esac
for f in "$OUT"/*.txt; do echo "== $f"; tail -n 6 "$f"; done
