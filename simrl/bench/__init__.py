"""Benchmarks, the GPU report and the profilers, as a library; scripts/benchmark.py and
scripts/gpu_report.py are their command lines.

    models        the model every engine runs, its start states and controls
    engines       simrl, mujoco (mujoco.rollout) and mujoco_warp, each stepped by a timer
    speed         steps/s at every world count and thread count, ratios at equal threads
    instructions  instructions per world-step under perf or callgrind (--count-instructions)
    step_worlds   the child process the instruction counts run (by its path)
    lines         instructions per source line of simrl's step (--per-line)
    grad          the differentiable step's forward and backward (--grad)
    training      task models and PPO throughput (--model task:NAME, --train)
    launches      the Warp launches of one step, recorded on the CPU (GPU report)
    ptxas         registers, stack and spills of the launched kernels (GPU report)
    gpu_report    the GPU report of one step against its targets
    host, records the machine, the cores, and where the results go
    benchmark     the benchmark's modes, chosen from its command line
"""
