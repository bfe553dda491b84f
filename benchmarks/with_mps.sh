#!/usr/bin/env bash
# Runs a command with NVIDIA's multi-process service (MPS) started for it, and stops the service after.
#
#   bash benchmarks/with_mps.sh COMMAND...     # e.g. the replicas of bench_remote.py on one GPU
#
# Without MPS, several processes on one GPU take turns in time slices: each llama-server replica's small
# kernels wait for the others' slices (docs/team-server.md). Under MPS their kernels share the GPU at once.
# The service is this run's own (its pipe and log folders are fresh ones, in the environment the command
# and its children inherit); the GPU's settings (compute mode, MIG) are left as they are.
set -u
command -v nvidia-cuda-mps-control > /dev/null || { echo "with_mps.sh: no nvidia-cuda-mps-control here" >&2; exit 3; }
export CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
CUDA_MPS_PIPE_DIRECTORY=$(mktemp -d) CUDA_MPS_LOG_DIRECTORY=$(mktemp -d)
stop() { echo quit | nvidia-cuda-mps-control; sleep 1; tail -n 5 "$CUDA_MPS_LOG_DIRECTORY/control.log" 2> /dev/null; }
trap stop EXIT
nvidia-cuda-mps-control -d || { echo "with_mps.sh: the MPS daemon did not start" >&2; trap - EXIT; exit 3; }
echo "MPS started (pipe $CUDA_MPS_PIPE_DIRECTORY)"
"$@" &
child=$!
trap 'kill -TERM $child 2> /dev/null' TERM INT  # a timeout stops the command, then the service stops
wait $child
rc=$?
wait $child 2> /dev/null
exit $rc
