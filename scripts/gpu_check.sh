#!/usr/bin/env bash
# The project's GPU checks, in one run (see ../shared/GPU.md for how to bring the wheels):
# GPU-only tests, then the speed benchmark (beside mujoco-warp when its wheel was brought:
# GPU_EXTRA_PKGS="mujoco-warp==4.0.0") and the gradient benchmark on CUDA, each against
# MuJoCo on the same model in the same run. Long logs go to $OUT (or ./gpu_out).
set -u
OUT=${OUT:-gpu_out}
mkdir -p "$OUT"
PY=${PYTHON:-python}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu.txt"
$PY -c "import warp, torch, mujoco; print('warp', warp.__version__, 'torch', torch.__version__, 'mujoco', mujoco.__version__)" | tee -a "$OUT/gpu.txt"

echo "== GPU tests"
$PY -m pytest -q -p no:cacheprovider tests/test_gpu.py 2>&1 | tee "$OUT/tests.txt" | tail -5

echo "== speed: quadruped 4096-65536 worlds, simrl (CUDA graph) vs mujoco_warp (CUDA graph) vs mj_step on one core"
$PY scripts/benchmark.py --model quadruped --device cuda --worlds 4096,8192,16384,65536 \
  --engines simrl,mujoco_warp,mujoco --seconds 2 --repeats 2 --out "$OUT/bench_quadruped.json" \
  --markdown "$OUT/bench.md" --png "$OUT/bench_quadruped_cuda.png" 2>&1 | tail -14
echo "== speed: ant"
$PY scripts/benchmark.py --model ant --device cuda --worlds 4096,16384 --engines simrl,mujoco_warp,mujoco \
  --seconds 2 --repeats 2 --out "$OUT/bench_ant.json" --markdown "$OUT/bench.md" 2>&1 | tail -8

echo "== gradients: quadruped, H = 32"
$PY scripts/benchmark.py --model quadruped --device cuda --grad 32 --worlds 1024,4096 --repeats 2 \
  --out "$OUT/grad.json" --markdown "$OUT/bench.md" 2>&1 | tail -6
