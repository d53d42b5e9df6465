#!/usr/bin/env bash
# The project's GPU checks, in one run of about ten minutes (see ../shared/GPU.md for how to bring
# the wheels; mujoco-warp: GPU_EXTRA_PKGS="mujoco-warp==4.0.0"):
#   1. GPU-only tests: CUDA against CPU (both schedules, plain and differentiable), CUDA graphs;
#   2. speed: the quadruped at 1024-65536 worlds, simrl's two schedules beside mujoco_warp (each a
#      CUDA graph) and mj_step on one core, in the same run;
#   3. forward+backward: H = 32 rollouts, both schedules;
#   4. five PPO iterations of the quadruped on CUDA; quadruped_rough with and without task.ppo.sync_free.
# Each part has a time limit so that a slow part cannot take the others' time. Long logs go to
# $OUT (or ./gpu_out); the summary at the end is what docs/BENCHMARKS.md records.
set -u
OUT=${OUT:-gpu_out}
mkdir -p "$OUT"
PY=${PYTHON:-python}
START=$(date +%s)
elapsed() { echo "[$(( $(date +%s) - START )) s]"; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu.txt"
$PY -c "import warp, torch, mujoco; print('warp', warp.__version__, 'torch', torch.__version__, 'mujoco', mujoco.__version__)" | tee -a "$OUT/gpu.txt"

echo "== GPU tests $(elapsed)"
timeout 240 $PY -m pytest -q -p no:cacheprovider tests/test_gpu.py 2>&1 | tee "$OUT/tests.txt" | tail -5

echo "== speed: quadruped, both schedules vs mujoco_warp vs mj_step (1 core) $(elapsed)"
timeout 180 $PY scripts/benchmark.py --model quadruped --device cuda --worlds 1024,4096,8192,16384,65536 \
  --schedule fused,wide --engines simrl,mujoco_warp,mujoco --seconds 1 --repeats 2 \
  --out "$OUT/bench_quadruped.json" --markdown "$OUT/bench.md" --png "$OUT/bench_quadruped_cuda.png" 2>&1 \
  | tee "$OUT/bench_quadruped.txt" | tail -18

echo "== forward+backward: quadruped, H = 32 $(elapsed)"
for s in wide fused; do
  timeout 90 $PY scripts/benchmark.py --model quadruped --device cuda --grad 32 --worlds 1024,4096 --repeats 2 \
    --schedule $s --out "$OUT/grad_$s.json" --markdown "$OUT/bench.md" 2>&1 | tee "$OUT/grad_$s.txt" | tail -4
done

echo "== PPO on CUDA: quadruped, 5 iterations $(elapsed)"
timeout 120 $PY scripts/train.py task=quadruped device=cuda max_iterations=5 hydra.run.dir="$OUT/ppo" 2>&1 \
  | tee "$OUT/ppo.txt" | tail -4

echo "== PPO on CUDA without host synchronisation (task.ppo.sync_free): quadruped_rough, 5 iterations each $(elapsed)"
for sf in false true; do
  timeout 150 $PY scripts/train.py task=quadruped_rough device=cuda max_iterations=5 +task.ppo.sync_free=$sf \
    hydra.run.dir="$OUT/ppo_sync_free_$sf" 2>&1 | tee "$OUT/ppo_sync_free_$sf.txt" | tail -3
done

echo "== done $(elapsed); summary: $OUT/bench.md"
