#!/usr/bin/env bash
# The GPU checks of dualflow on a fresh CUDA machine that has python3 and this checkout:
#
#   bash tests/gpu/run_on_device.sh          # from the repository root; results in ./gpu-out
#   OUT=/some/dir bash tests/gpu/run_on_device.sh
#
# Stages: use the system python3 when it already has every dependency (the lent H200 image has
# cupy, numba, pytest... and no network), else make .venv and pip install '.[dev,cuda12]' (plus
# CUDA/NCCL wheels only if cupy cannot compile a kernel or load NCCL), print nvidia-smi and cupy's view of the device, run the
# gpu-marked tests, then two GPU benchmarks. Every stage runs under `timeout`, capped by a
# deadline so the whole run ends within 8 minutes; a failing stage does not stop the next one.
# Each stage logs to $OUT/<stage>.log; $OUT/summary.txt has one line per stage with its exit
# code (124: timed out). The script exits 1 when any stage failed.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.."
OUT="${OUT:-./gpu-out}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"
DEADLINE=$(($(date +%s) + ${GPU_RUN_SECONDS:-470})) # 8 minutes less a margin for the summary
FAILED=0
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" # the checkout's dualflow, installed or not
export PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONUNBUFFERED=1

# stage NAME SECONDS COMMAND...: run COMMAND under a timeout (capped by the deadline), log it
stage() {
    local name="$1" limit="$2" left start rc=0
    shift 2
    left=$((DEADLINE - $(date +%s)))
    if ((left < 15)); then
        echo "$name: skipped (out of time)" | tee -a "$SUMMARY"
        FAILED=1
        return 0
    fi
    if ((limit > left)); then
        limit=$left
    fi
    start=$(date +%s)
    echo "=== $name (timeout ${limit}s): $*" | tee "$OUT/$name.log"
    timeout --kill-after=10 "$limit" "$@" 2>&1 | tee -a "$OUT/$name.log" || rc=$?
    echo "$name: exit $rc ($(($(date +%s) - start))s)" | tee -a "$SUMMARY"
    if ((rc != 0)); then
        FAILED=1
    fi
}

python_bin() { # the venv's python once it exists, else the system's
    if [[ -x .venv/bin/python ]]; then echo .venv/bin/python; else command -v python3; fi
}

# The probes are files, so no Python goes through shell quoting.
cat >"$OUT/probe_cuda.py" <<'PY'
# cupy must compile a kernel (NVRTC) and call cuBLAS; the [ctk] extra brings both as wheels
import cupy

a = cupy.ones((64, 64), cupy.float32)
k = cupy.ElementwiseKernel("float32 x", "float32 y", "y = tanhf(x)", "dualflow_probe")
print("cuda probe:", float((a @ a).sum()), float(k(a).sum()))
PY
cat >"$OUT/probe_nccl.py" <<'PY'
from cupy.cuda import nccl

assert nccl.available, "cupy cannot load libnccl"
print("nccl probe: version", nccl.get_version())
PY
cat >"$OUT/device_info.py" <<'PY'
import cupy

cupy.show_config()
props = cupy.cuda.runtime.getDeviceProperties(0)
free, total = cupy.cuda.runtime.memGetInfo()
capability = "%d.%d" % (props["major"], props["minor"])
print("devices:", cupy.cuda.runtime.getDeviceCount(), "| device 0:", props["name"].decode(),
      "| compute capability", capability,
      "| memory free/total GiB", round(free / 2**30, 1), round(total / 2**30, 1))
PY
{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)"
    echo "python3: $(python3 --version 2>&1)"
} >"$OUT/env.txt"

stage install 180 bash -c '
    set -euo pipefail
    needed="cupy, numpy, numba, networkx, pytest, hypothesis, tqdm, matplotlib"
    if python3 -c "import $needed" 2>/dev/null; then
        echo "python3 has $needed: no install, dualflow from PYTHONPATH=$PWD"
        exit 0
    fi
    [[ -x .venv/bin/python ]] || python3 -m venv --system-site-packages .venv
    # fail fast where there is no network rather than retry for minutes
    .venv/bin/python -m pip install --retries 1 --timeout 15 -e ".[dev,cuda12]"'
PY="$(python_bin)"
stage cuda-libs 120 bash -c "
    rc=0
    '$PY' '$OUT/probe_cuda.py' ||
        { '$PY' -m pip install --retries 1 --timeout 15 'cupy-cuda12x[ctk]' &&
            '$PY' '$OUT/probe_cuda.py'; } || rc=1
    '$PY' '$OUT/probe_nccl.py' ||
        { '$PY' -m pip install --retries 1 --timeout 15 'nvidia-nccl-cu12>=2.18.1,<3' &&
            '$PY' '$OUT/probe_nccl.py'; } ||
        rc=1
    exit \$rc"
stage device-info 30 bash -c "nvidia-smi; '$PY' '$OUT/device_info.py'"
stage pytest-gpu 250 "$PY" -m pytest -o addopts=--strict-markers -m gpu tests/gpu tests/runtime \
    tests/kernels/test_fused_kernels_cuda.py \
    -v -rs --durations=20 -p no:cacheprovider --junitxml "$OUT/pytest-gpu.xml"
stage bench 60 "$PY" -m dualflow bench --device cuda:0 --quick --out "$OUT/bench"
stage bench-gpu 60 "$PY" -m dualflow bench --device cuda:0 --quick \
    --workloads elementwise-64m,resnet50 --out "$OUT/bench-gpu"

echo "--- summary ($SUMMARY)"
cat "$SUMMARY"
exit "$FAILED"
