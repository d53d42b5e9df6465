"""Steps per second of every engine at every world count and thread count, in the same run.

Physics steps per second = worlds x steps / seconds, compile time excluded and reported on
its own. Every ratio is taken at equal threads: simrl on N threads (`Sim(cpu_threads=N)`)
against MuJoCo on N threads, for N = 1 and N = every core this process may use (`--threads`
chooses others; `--cores N` first pins the whole run, every thread of it, to N cores with
os.sched_setaffinity and measures N threads only). Each record carries its engine's thread
count (`threads` in the JSON, a column of the table) and the ratio (`vs_mujoco`, with the
MuJoCo thread count it divides by in `vs_mujoco_threads`).

Same states, same controls: every timed call starts all worlds from the same state (the
model's 'home' keyframe, else qpos0, zero warm start) under the same constant random controls
(one per world) and steps them `--horizon` steps, in every engine. MuJoCo's figure is
measured again beside every world count, in the same rounds as the others. Solver iterations
(mean/max per step) and contacts per world are those of the same steps, in the first 64
worlds. Where simrl's and MuJoCo's mean iterations differ by more than 2x (gymnasium's
humanoid: MuJoCo's PGS against simrl's Newton), the steps/s ratio compares unequal solver
work, so MuJoCo is also measured with its solver set to Newton (`mujoco_newton`, same
tolerance and iteration cap: the same optimality stop as simrl's) and the table gives that
ratio too ("vs mujoco Newton"), with a line that says why; where both already run Newton the
line says so and nothing more is measured.

`--settle S` starts every engine from the keyframe (or qpos0) after S simulated seconds of
mj_step at mid-range controls: the ant and gymnasium's humanoid start in the air, and their
first steps have no contacts; `--settle 2` puts them on the floor with theirs.

Memory: the table's "Sim KiB/world" is simrl's whole Sim per world (its Data and its Model's
arrays shared out over the worlds; on CUDA what the device lost to the Sim); a second table
gives every engine's simulation data per world side by side ("data KiB/world",
simrl.bench.engines), with MuJoCo Warp's budgets.

`--png PATH` draws steps/s against the world count, one line per engine, on log-log axes.

`--profile` also times each pass of simrl's step on its own (the wide schedule's launches, which
compute the same bits as the fused one) at every world count and prints a table of
microseconds per world per pass (appended to --markdown too, added to the simrl records
under "profile").
"""

import json
from pathlib import Path

import mujoco
import numpy as np
import warp as wp

from simrl import UnsupportedFeatureError
from simrl.bench.engines import (
    MujocoWarpFailure,
    import_mujoco_warp,
    measure,
    mujoco_runner,
    mujoco_warp_runner,
    simrl_runner,
)
from simrl.bench.host import machine, thread_counts, thread_cpus
from simrl.bench.models import integrator_name, solver_name, start_description, with_newton
from simrl.bench.records import append_markdown, command_line, data_table


def forward_benchmark(name, mjm, worlds, engines, schedules, args) -> list[dict]:
    """Steps/s of every engine at every world count and thread count, ratios at equal threads.
    `args`: the parsed command line of scripts/benchmark.py."""
    mjw, mjw_import_error = None, None
    if "mujoco_warp" in engines:
        mjw, mjw_import_error = import_mujoco_warp()
        if mjw is None and mjw_import_error is None:
            print("mujoco_warp is not installed (pip install mujoco-warp, or the project's 'bench' extra): "
                  "skipping it")
            engines.remove("mujoco_warp")
    threads = thread_counts(args.cores, args.threads)
    cpu = wp.get_device(args.device).is_cpu
    integrator, solver = integrator_name(mjm), solver_name(mjm)
    print(f"model {name}: nq={mjm.nq} nv={mjm.nv} nu={mjm.nu} timestep={mjm.opt.timestep} "
          f"integrator={integrator} solver={solver} (MuJoCo; simrl: Newton) iterations={mjm.opt.iterations} "
          f"tolerance={mjm.opt.tolerance:g}{' (contacts and constraints disabled)' if args.smooth else ''}")
    print(f"machine: {machine()}\n{start_description(mjm, args.settle)}\nthreads: {', '.join(map(str, threads))}; "
          f"{args.horizon} steps per timed call "
          "from the start states")
    newton = with_newton(mjm)
    records, profiles, notes = [], [], []

    def record(engine, num_worlds, rate, info):
        rec = {"engine": engine, "model": name, "num_worlds": num_worlds, "mode": "forward",
               "steps_per_second": rate, "timestep": mjm.opt.timestep, "integrator": integrator,
               "measured_with_batch": num_worlds, "repeats": args.repeats, "horizon": args.horizon,
               "settle_seconds": args.settle,
               "cpus": thread_cpus(), **info}
        records.append(rec)
        if rate is None:
            print(f"  {engine:15s} worlds={num_worlds:6d}  failed: {rec['error']}")
            return
        extra = f"  compile {rec['compile_seconds']:.1f} s" if "compile_seconds" in rec else ""
        threads_text = f"threads={rec['threads']}" if rec.get("threads") else "         "
        print(f"  {engine:15s} worlds={num_worlds:6d} {threads_text}  {rate:12,.0f} steps/s{extra}")

    for w in worlds:
        # thread counts that differ at this world count (an engine uses at most one thread per world)
        counts = sorted({min(t, w) for t in threads}) if cpu else [None]
        runners, worlds_of, stats = {}, {}, {}
        if "mujoco" in engines:
            for t in sorted({min(t, w) for t in threads}):
                runners[f"mujoco@{t}"], worlds_of[f"mujoco@{t}"] = mujoco_runner(mjm, w, t, args.horizon,
                                                                                   args.settle), w
        if "simrl" in engines:
            for schedule in schedules:
                key = "simrl" if len(schedules) == 1 else f"simrl-{schedule}"
                for t in counts:
                    try:
                        runners[f"{key}@{t}"] = simrl_runner(mjm, w, args.device, args.dtype, schedule, t,
                                                             args.horizon, args.settle)
                    except UnsupportedFeatureError as e:
                        raise SystemExit(f"simrl cannot simulate this model: {e}\n(--smooth disables contacts and "
                                         "constraints in every engine)") from e
                    worlds_of[f"{key}@{t}"] = w
        failures, mjw_memory = {}, {}  # mujoco_warp's data per world, for its record should it fail
        if "mujoco_warp" in engines:
            failures["mujoco_warp@1"] = mjw_import_error
            if mjw is not None:
                try:
                    runners["mujoco_warp@1"] = mujoco_warp_runner(mjw, mjm, w, args.device, args.horizon, args.settle)
                    worlds_of["mujoco_warp@1"] = w
                    mjw_memory["mujoco_warp@1"] = runners["mujoco_warp@1"][0].memory
                except MujocoWarpFailure as e:
                    failures["mujoco_warp@1"] = str(e)
                    mjw_memory["mujoco_warp@1"] = e.memory
        # iterations of the same steps: once per engine (they do not depend on the thread count)
        for key, (run, _) in runners.items():
            engine = key.split("@")[0]
            if engine not in stats:
                try:
                    stats[engine] = run.stats()
                except Exception as e:  # mujoco_warp failing on the device
                    stats[engine] = {"stats_error": f"{type(e).__name__}: {e}"}
        simrl_keys = [k for k in stats if k.startswith("simrl")]
        matched = None
        if simrl_keys and "mujoco" in stats:
            matched = solver_mismatch(stats[simrl_keys[0]], stats["mujoco"], mjm)
        if matched == "newton":
            for t in sorted({min(t, w) for t in threads}):
                runners[f"mujoco_newton@{t}"] = mujoco_runner(newton, w, t, args.horizon, args.settle)
                worlds_of[f"mujoco_newton@{t}"] = w
            stats["mujoco_newton"] = runners[f"mujoco_newton@{min(threads[0], w)}"][0].stats()
        if matched:
            notes.append(solver_note(matched, w, stats, simrl_keys[0], mjm))
        rates = measure(runners, worlds_of, args.seconds / args.repeats, args.repeats, failures)
        for key, rate in rates.items():
            engine = key.split("@")[0]
            record(engine, w, rate, {**runners[key][1](), **stats[engine]})
        simrl_key = next((k for k in rates if k.startswith("simrl")), None)
        if args.profile and simrl_key:
            per_world = profile_stages(runners[simrl_key][0].sim, args.repeats)
            next(r for r in reversed(records) if r["engine"] == simrl_key.split("@")[0]
                 )["profile_us_per_world"] = per_world
            profiles.append((w, per_world))
        for key, error in failures.items():
            if error is not None:
                record(key.split("@")[0], w, None, {"error": error, "device": args.device, "dtype": "float32",
                                                    "threads": None, **mjw_memory.get(key, {})})
    add_ratios(records)
    # a world count's rows by thread count: each ratio beside the MuJoCo figure it divides by
    rank = {"mujoco": 0, "mujoco_newton": 2, "mujoco_warp": 3}
    records.sort(key=lambda r: (worlds.index(r["num_worlds"]), r.get("threads") or 0, rank.get(r["engine"], 1)))
    table = summary_table(records)
    notes_text = "".join(f"\n{note}\n" for note in dict.fromkeys(notes))
    memory_text = data_table(records)
    memory_text = f"\n{memory_text}\n" if memory_text else ""
    print()
    print(table)
    print(notes_text)
    if memory_text:
        print(memory_text)
    profile_text = ""
    for w, per_world in profiles:
        from simrl.sim.profile import profile_table

        profile_text += (f"\nsimrl step by pass, {w} worlds, {args.dtype}, {args.device} "
                         f"(us per world, the wide schedule's launches on one thread; median of "
                         f"{args.repeats} rounds):\n\n{profile_table(per_world)}\n")
    if profile_text:
        print(profile_text)
    if args.out:
        Path(args.out).write_text(json.dumps(records, indent=2))
        print(f"wrote {len(records)} records to {args.out}")
    if args.png:
        plot_rates(records, f"{name}{', smooth' if args.smooth else ''}: physics steps/s", args.png)
        print(f"wrote the plot to {args.png}")
    if args.markdown:
        append_markdown(args.markdown, name,
                        f"- machine: {machine()}\n- command: `{command_line(args)}`\n"
                        f"- model: nq={mjm.nq} nv={mjm.nv} nu={mjm.nu}, timestep {mjm.opt.timestep}, "
                        f"{integrator}, MuJoCo's solver {solver}"
                        f"{', contacts and constraints disabled' if args.smooth else ''}\n\n"
                        f"{table}\n{notes_text}{memory_text}{profile_text}")
    return records


def solver_mismatch(simrl_stats: dict, mujoco_stats: dict, mjm) -> str | None:
    """None when simrl's and MuJoCo's mean solver iterations per step are within 2x of each
    other; else "newton" when MuJoCo's solver is not Newton (measure it with Newton too), or
    "same" when both already run Newton with the same tolerance and iteration cap."""
    a, b = simrl_stats.get("solver_niter_mean"), mujoco_stats.get("solver_niter_mean")
    if a is None or b is None or max(a, b) <= 2 * min(a, b):
        return None
    return "same" if mjm.opt.solver == mujoco.mjtSolver.mjSOL_NEWTON else "newton"


def solver_note(matched: str, worlds: int, stats: dict, simrl_key: str, mjm) -> str:
    """The line under the table that says why a ratio at matched accuracy is given (or is not)."""
    simrl_it, mujoco_it = stats[simrl_key]["solver_niter_mean"], stats["mujoco"]["solver_niter_mean"]
    low, high = sorted((simrl_it, mujoco_it))
    ratio = f"{high / low:.1f}x" if low > 0 else "more than 2x (one takes none)"
    head = (f"Solver iterations differ by {ratio} "
            f"({worlds} worlds): MuJoCo's {solver_name(mjm)} takes {mujoco_it:.1f} per step to tolerance "
            f"{mjm.opt.tolerance:g} (at most {mjm.opt.iterations}) in float64, simrl's Newton {simrl_it:.1f}")
    if matched == "newton":
        return (head + f", so 'vs mujoco' compares unequal solver work. 'vs mujoco Newton' divides by MuJoCo with "
                f"its solver set to Newton (mujoco_newton: {stats['mujoco_newton']['solver_niter_mean']:.1f} "
                "iterations per step), the same method, tolerance and iteration cap as simrl's, whose answer "
                "both reach (the problem is strictly convex).")
    return (head + "; both run Newton with the same tolerance and iteration cap, so the settings already match: "
            "simrl's float32 iterations also stop when the cost cannot decrease by more than its rounding error, "
            "which float64 MuJoCo does not need.")


def add_ratios(records) -> None:
    """Each record's `vs_mujoco`: its steps/s over MuJoCo's (mujoco.rollout) at the same world count
    and thread count (`vs_mujoco_threads`); on CUDA (no threads) over MuJoCo's with the most
    threads. `vs_mujoco_newton` likewise against mujoco_newton where that was measured."""
    for base_engine, key in (("mujoco", "vs_mujoco"), ("mujoco_newton", "vs_mujoco_newton")):
        bases = {(r["num_worlds"], r["threads"]): r["steps_per_second"] for r in records
                 if r["engine"] == base_engine and r["steps_per_second"] is not None}
        for r in records:
            if r["steps_per_second"] is None:
                continue
            t = r.get("threads")
            if t is None:  # not a CPU engine: the best MuJoCo figure at this world count
                t = max((bt for bw, bt in bases if bw == r["num_worlds"]), default=None)
            if (r["num_worlds"], t) in bases:
                r[key] = r["steps_per_second"] / bases[(r["num_worlds"], t)]
                r[f"{key}_threads"] = t


def summary_table(records) -> str:
    """Markdown table: steps/s per engine, world count and thread count, with the ratio to MuJoCo
    (mujoco.rollout) at the same world count and thread count, measured in the same rounds; a
    "vs mujoco Newton" column where MuJoCo was also measured with its solver set to Newton."""
    newton = any("vs_mujoco_newton" in r for r in records)
    head = ("| engine | device | dtype | threads | worlds | steps/s | vs mujoco, same threads "
            + ("| vs mujoco Newton, same threads " if newton else "")
            + "| compile s | NaN-free worlds | contacts/world | solver iters mean/max | Sim KiB/world |")
    lines = [head, "|---|---|---|---:|---:|---:|---:|" + ("---:|" if newton else "") + "---:|---:|---:|---:|---:|"]

    def ratio(r, key):
        if key not in r:
            return "-"
        text = f"{r[key]:.2f}x"
        return text if r.get("threads") is not None else f"{text} (vs {r[key + '_threads']} threads)"

    for r in records:
        threads = r.get("threads") if r.get("threads") is not None else "-"
        if r["steps_per_second"] is None:
            lines.append(f"| {r['engine']} | {r['device']} | {r['dtype']} | {threads} | {r['num_worlds']} | "
                         f"failed: {r['error'].replace('|', '/')} | - |" + (" - |" if newton else "")
                         + " - | - | - | - | - |")
            continue
        compile_s = f"{r['compile_seconds']:.1f}" if "compile_seconds" in r else "-"
        nan_free = f"{r['nan_free_worlds']}/{r['num_worlds']}" if "nan_free_worlds" in r else "-"
        contacts = f"{r['contacts_per_world']:.1f}" if "contacts_per_world" in r else "-"
        iters = f"{r['solver_niter_mean']:.1f}/{r['solver_niter_max']}" if "solver_niter_mean" in r else "-"
        per_world = r.get("device_bytes_per_world", r.get("state_bytes_per_world"))
        kib = f"{per_world / 1024:.1f}" if per_world is not None else "-"
        lines.append(f"| {r['engine']} | {r['device']} | {r['dtype']} | {threads} | {r['num_worlds']} | "
                     f"{r['steps_per_second']:,.0f} | {ratio(r, 'vs_mujoco')} | "
                     + (f"{ratio(r, 'vs_mujoco_newton')} | " if newton else "")
                     + f"{compile_s} | {nan_free} | {contacts} | {iters} | {kib} |")
    return "\n".join(lines)


def plot_rates(records, title: str, path: str) -> None:
    """Steps/s against the world count, one line per engine (and device, dtype, thread count), log-log."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lines = {}
    for r in records:
        if r["steps_per_second"] is None:
            continue
        threads = f", {r['threads']} thread{'s' if r['threads'] > 1 else ''}" if r.get("threads") else ""
        label = f"{r['engine']} ({r['device']}, {r['dtype']}{threads})"
        lines.setdefault(label, []).append((r["num_worlds"], r["steps_per_second"]))
    failed = sorted({r["engine"] for r in records if r["steps_per_second"] is None})
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, points in lines.items():
        points.sort()
        ax.plot([x for x, _ in points], [y for _, y in points], marker="o", label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    worlds = sorted({x for points in lines.values() for x, _ in points})
    if worlds:
        ax.set_xticks(worlds, [str(w) for w in worlds])
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel("worlds")
    ax.set_ylabel("physics steps / s (worlds x steps / s)")
    ax.set_title(title + (f"\n(failed, not drawn: {', '.join(failed)})" if failed else ""))
    ax.grid(True, which="both", alpha=0.3)
    if lines:
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def profile_stages(sim, rounds: int) -> dict:
    """Median over `rounds` of simrl.sim.profile's per-stage times (us per world)."""
    from simrl.sim.profile import StageProfiler

    profiler = StageProfiler(sim)
    steps = max(2, 8192 // sim.num_worlds)
    profiler.profile(1)  # warm-up
    runs = [profiler.profile(steps) for _ in range(rounds)]
    return {name: float(np.median([r[name] for r in runs])) for name in runs[0]}
