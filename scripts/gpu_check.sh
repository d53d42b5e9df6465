#!/usr/bin/env bash
# The project's GPU checks, in one run (see ../shared/GPU.md for how to bring the wheels):
# GPU-only tests, then the speed benchmark and the gradient benchmark on CUDA, each against
# MuJoCo on the same model in the same run. Long logs go to $OUT (or ./gpu_out).
set -u
OUT=${OUT:-gpu_out}
mkdir -p "$OUT"
PY=${PYTHON:-python}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu.txt"
$PY -c "import warp, torch, mujoco; print('warp', warp.__version__, 'torch', torch.__version__, 'mujoco', mujoco.__version__)" | tee -a "$OUT/gpu.txt"

echo "== GPU tests"
$PY -m pytest -q -p no:cacheprovider tests/test_gpu.py 2>&1 | tee "$OUT/tests.txt" | tail -5

echo "== speed: quadruped and ant, simrl on cuda vs mj_step on one core"
for model in quadruped ant; do
  $PY scripts/benchmark.py --model $model --device cuda --worlds 1024,4096,16384 --engines simrl,mujoco \
    --seconds 3 --repeats 2 --out "$OUT/bench_$model.json" --markdown "$OUT/bench.md" 2>&1 | tail -8
done

echo "== gradients: quadruped, H = 32"
$PY scripts/benchmark.py --model quadruped --device cuda --grad 32 --worlds 1024,4096 --repeats 2 \
  --out "$OUT/grad.json" --markdown "$OUT/bench.md" 2>&1 | tail -6
