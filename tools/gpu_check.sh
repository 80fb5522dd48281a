#!/bin/sh
# CuPy conformance tests + an MLP gradient timing (NumPy vs CuPy); installs nothing.
# Run from anywhere on a machine with CuPy and a CUDA GPU: sh tools/gpu_check.sh
cd "$(dirname "$0")/.." && PYTHONPATH="$PWD" exec python tools/gpu_check.py "$@"
