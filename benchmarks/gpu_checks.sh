#!/usr/bin/env bash
# The GPU measurements of docs/gpu.md in one short run, most valuable first, each step under its own limit.
#
#   bash benchmarks/gpu_checks.sh OUT_DIR        # on a machine whose llama.cpp is a CUDA build
#
# After every step, OUT_DIR/gpu_checks.tgz holds every result so far (logs, JSON, plots), so a run
# cut short still brings back what it measured. CASES, SECONDS_PER_RUN and GPU_LAYERS shorten or move
# it (GPU_LAYERS=0 CASES=3 SECONDS_PER_RUN=2 checks the script itself on a CPU); STEPS="server typing"
# runs only the steps it names.
set -u
out=${1:?usage: gpu_checks.sh OUT_DIR}
cases=${CASES:-40}
seconds=${SECONDS_PER_RUN:-10}
layers=${GPU_LAYERS:--1}
ngl=$([ "$layers" = 0 ] && echo 0 || echo 99)
py=${PYTHON:-python3}
work=$(mktemp -d)
mkdir -p "$out"

step() {  # step NAME SECONDS COMMAND...: run it, log it, pack what there is
    local name=$1 limit=$2; shift 2
    case " ${STEPS:-$name} " in *" $name "*) ;; *) return ;; esac
    local began=$SECONDS
    echo "== $name (limit ${limit} s)"
    timeout "$limit" "$@" > "$work/$name.log" 2>&1
    echo "rc $? after $((SECONDS - began)) s"
    tail -n 25 "$work/$name.log"
    tar czf "$out/gpu_checks${STEPS:+_${STEPS// /_}}.tgz" -C "$work" .
}

{ git rev-parse HEAD 2>/dev/null; nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader 2>&1; nproc; } \
    > "$work/machine.txt"
cat "$work/machine.txt"
step server 170 $py benchmarks/bench_server.py --set gpuLayers=$layers --prompt short --cases "$cases" --modes cpc,naive \
    --engine-later --json "$work/server.json"
step remote_replay 300 $py benchmarks/bench_remote.py --only throughput --replay --record-wave 8 \
    --server-args "-ngl $ngl" --editors 1,8,32 --seconds "$seconds" --replicas 1,4,8 \
    --recording "$work/calls.json" --json "$work/remote_replay.json"
step remote_mps 240 bash benchmarks/with_mps.sh $py benchmarks/bench_remote.py --only throughput --replay \
    --record-wave 8 --server-args "-ngl $ngl" --editors 8,32 --seconds "$seconds" --replicas 4,8,16 \
    --recording "$work/calls.json" --json "$work/remote_mps.json"  # the calls remote_replay recorded, if it ran
step remote_lines 120 $py benchmarks/bench_remote_lines.py --server-args "-ngl $ngl" --cases "$cases" \
    --json "$work/remote_lines.json"
step typing 70 $py benchmarks/bench_lsp.py --only typing --set gpuLayers=$layers --json "$work/typing.json"
step profile 60 $py benchmarks/profile_request.py --gpu-layers "$layers" --cases 30 --json "$work/profile.json"
step profile_fused 60 $py benchmarks/profile_request.py --gpu-layers "$layers" --cases 30 --fusion \
    --json "$work/profile_fused.json"
step profile_no_cuda_graphs 60 env GGML_CUDA_DISABLE_GRAPHS=1 $py benchmarks/profile_request.py --gpu-layers "$layers" \
    --cases 30 --json "$work/profile_no_cuda_graphs.json"  # what CUDA graphs save per decode, beside step profile
step keystrokes 60 $py benchmarks/profile_keystrokes.py --gpu-layers "$layers" --lines $((cases < 10 ? cases : 10)) \
    --json "$work/keystrokes.json"
step drafts_cost 45 $py benchmarks/bench_drafts.py --gpu-layers "$layers" --only cost --json "$work/drafts_cost.json"
step drafts_lines 60 $py benchmarks/bench_drafts.py --gpu-layers "$layers" --only lines --cases "$cases" \
    --json "$work/drafts_lines.json"
step remote 180 $py benchmarks/bench_remote.py --only throughput --server-args "-ngl $ngl" --editors 1,8,32 \
    --seconds "$seconds" --replicas 1,2 --json "$work/remote.json"
step remote_per_token 120 $py benchmarks/bench_remote.py --only throughput --server-args "-ngl $ngl" --editors 32 \
    --seconds "$seconds" --replicas 1,2 --per-token --json "$work/remote_per_token.json"
rm -rf "$work"
