#!/usr/bin/env bash
# The project's GPU checks, in one run of about ten minutes (see ../shared/GPU.md for how to bring
# the wheels; mujoco-warp: GPU_EXTRA_PKGS="mujoco-warp==4.0.0"):
#   1. GPU-only tests: CUDA against CPU (both schedules, plain and differentiable), CUDA graphs;
#   2. speed: the quadruped at 1024-65536 worlds, simrl's two schedules beside mujoco_warp (each a
#      CUDA graph) and mj_step on one core, in the same run;
#   3. forward+backward: H = 32 rollouts, both schedules;
#   3b. speed and memory: quadruped_rough (terrain: the broadphase, the budgets) at 4096 and 8192
#      worlds, the wide schedule beside mujoco_warp, in the same run;
#   4. five PPO iterations of the quadruped on CUDA; quadruped_rough with and without task.ppo.sync_free.
# Each part has a time limit so that a slow part cannot take the others' time; each part's output
# goes to $OUT/NAME.txt (OUT: ./gpu_out unless set) and its last lines to the screen. The summary
# at the end names the parts that failed (the exit status is theirs: 0 when all passed);
# $OUT/bench.md holds the tables whose figures go into docs/BENCHMARKS.md, by topic.
#
# GPU_CHECK_DRY=1 runs every command on the CPU at the smallest sizes (8 worlds, one PPO
# iteration, no mujoco_warp): tests/test_scripts.py does, so that a changed flag or script shows
# here, not in the few minutes of a lent GPU.
set -u
OUT=${OUT:-gpu_out}
mkdir -p "$OUT"
PY=${PYTHON:-python}
START=$(date +%s)
elapsed() { echo "[$(( $(date +%s) - START )) s]"; }

DEVICE=cuda WORLDS=1024,4096,8192,16384,65536 GRAD_WORLDS=1024,4096 HORIZON=32 SECONDS=1 REPEATS=2
ENGINES=simrl,mujoco_warp,mujoco ITERATIONS=5 ENVS=() THREADS=() LIMIT_SCALE=1
ROUGH_WORLDS=4096,8192 ROUGH_ENGINES=simrl,mujoco_warp
if [ "${GPU_CHECK_DRY:-0}" = 1 ]; then
  # the limits are the GPU's budget; a dry run on a busy CPU with a cold Warp cache gets four times as long
  DEVICE=cpu WORLDS=8 GRAD_WORLDS=8 HORIZON=2 SECONDS=0.05 REPEATS=1 ENGINES=simrl,mujoco ITERATIONS=1
  ENVS=(num_envs=16) THREADS=(--threads 1) LIMIT_SCALE=4 ROUGH_WORLDS=8 ROUGH_ENGINES=simrl
fi

FAILED=()
# part NAME LIMIT_S LINES CMD...: CMD under a time limit, its output in $OUT/NAME.txt, the last LINES
# lines shown, a failure (or the limit reached: exit 124) remembered for the summary
part() {
  local name=$1 limit=$2 lines=$3
  shift 3
  timeout $(( limit * LIMIT_SCALE )) "$@" > "$OUT/$name.txt" 2>&1
  local rc=$?
  tail -n "$lines" "$OUT/$name.txt"
  [ "$rc" -eq 0 ] || FAILED+=("$name (exit $rc)")
}

if [ "$DEVICE" = cuda ]; then
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu.txt"
fi
$PY -c "import warp, torch, mujoco; print('warp', warp.__version__, 'torch', torch.__version__, 'mujoco', mujoco.__version__)" | tee -a "$OUT/gpu.txt"

echo "== GPU tests $(elapsed)"
part tests 240 5 $PY -m pytest -q -p no:cacheprovider tests/test_gpu.py

echo "== speed: quadruped, both schedules vs mujoco_warp vs mj_step (1 core) $(elapsed)"
part bench_quadruped 180 18 $PY scripts/benchmark.py --model quadruped --device $DEVICE --worlds $WORLDS \
  --schedule fused,wide --engines $ENGINES --seconds $SECONDS --repeats $REPEATS ${THREADS[@]+"${THREADS[@]}"} \
  --out "$OUT/bench_quadruped.json" --markdown "$OUT/bench.md" --png "$OUT/bench_quadruped_$DEVICE.png"

echo "== forward+backward: quadruped, H = $HORIZON $(elapsed)"
for s in wide fused; do
  part grad_$s 90 4 $PY scripts/benchmark.py --model quadruped --device $DEVICE --grad $HORIZON --worlds $GRAD_WORLDS \
    --repeats $REPEATS --schedule $s --out "$OUT/grad_$s.json" --markdown "$OUT/bench.md"
done

echo "== speed and memory: quadruped_rough, the wide schedule vs mujoco_warp $(elapsed)"
part bench_rough 150 14 $PY scripts/benchmark.py --model task:quadruped_rough --device $DEVICE --worlds $ROUGH_WORLDS \
  --schedule wide --engines $ROUGH_ENGINES --seconds $SECONDS --repeats $REPEATS ${THREADS[@]+"${THREADS[@]}"} \
  --out "$OUT/bench_rough.json" --markdown "$OUT/bench.md"

echo "== PPO on $DEVICE: quadruped, $ITERATIONS iterations $(elapsed)"
part ppo 120 4 $PY scripts/train.py task=quadruped device=$DEVICE max_iterations=$ITERATIONS ${ENVS[@]+"${ENVS[@]}"} \
  hydra.run.dir="$OUT/ppo"

echo "== PPO on $DEVICE without host synchronisation (task.ppo.sync_free): quadruped_rough, $ITERATIONS iterations each $(elapsed)"
for sf in false true; do
  part ppo_sync_free_$sf 150 3 $PY scripts/train.py task=quadruped_rough device=$DEVICE max_iterations=$ITERATIONS \
    ${ENVS[@]+"${ENVS[@]}"} +task.ppo.sync_free=$sf hydra.run.dir="$OUT/ppo_sync_free_$sf"
done

if [ ${#FAILED[@]} -eq 0 ]; then
  echo "== done $(elapsed): all parts passed; summary: $OUT/bench.md"
else
  echo "== done $(elapsed): FAILED: ${FAILED[*]} (their output: $OUT/NAME.txt); summary: $OUT/bench.md"
  exit 1
fi
