#!/usr/bin/env python3
"""Whole-process timings: `agtrace run SCENARIO` against the libtorch program written the same way.

    python3 bench/whole_process.py --build-dir build-rel --no-build --rounds 11
    python3 bench/whole_process.py --baseline OTHER/agtrace     # also times another agtrace binary

Each round runs, one after the other: `agtrace run bench/scenarios/W.json` (the default text
report, to /dev/null), the same with `--format json`, the baseline binary if given, and
`libtorch_bench W --reps 1` (bench/libtorch_bench.cpp). agtrace's figure is the process's
wall time from start to exit: parsing, leaf creation, the program with accounting, the
report. libtorch's figures are its whole process (start-up and library loading included)
and the step alone as the program times it after a warm-up, parameters made before the
clock starts. Figures are medians over the rounds; one thread on both sides.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as bench  # noqa: E402  (bench/run.py: build, env_for, json_lines)

# The programs as users write them (F.linear with [out, in] weights, F.conv2d, F.cross_entropy),
# and the 10,000-op chain, whose figure is also given per op.
WORKLOADS = ["mlp_linear", "transformer_linear", "conv_block", "tiny_chain"]
OPS = {"tiny_chain": 10000}


def wall_of(cmd, env, cpu=None):
    """Wall seconds of the process, start to exit; its CPU seconds (user + system) appended
    to `cpu` when given (less disturbed by other jobs on a shared machine)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{cmd} failed")
    if cpu is not None:
        cpu.append(usage.ru_utime + usage.ru_stime)
    return wall


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--build-dir", default=os.path.join(bench.ROOT, "build-bench"))
    ap.add_argument("--no-build", action="store_true", help="use the binaries already in --build-dir")
    ap.add_argument("--baseline", help="another agtrace binary to time the same way (e.g. a build of main)")
    args = ap.parse_args()
    agtrace, _, torch_exe = bench.build(args.build_dir, args.no_build)
    if not os.path.exists(torch_exe):
        src = os.path.join(bench.BENCH, "libtorch_bench.cpp")
        bench.sh(["g++", "-O2", "-std=c++17", "-D_GLIBCXX_USE_CXX11_ABI=1", src, "-o", torch_exe]
                 + [f"-I{p}" for p in bench.TORCH_INCLUDES] + bench.TORCH_LIBS + ["-lpthread"])
    env = bench.env_for(1)
    env["AGTRACE_THREADS"] = "1"
    rows = []
    for w in args.workloads.split(","):
        scenario = os.path.join(bench.BENCH, "scenarios", w + ".json")
        r = {"text": [], "json": [], "quiet": [], "baseline": [], "torch_process": [], "torch_step": [],
             "text_cpu": [], "json_cpu": [], "baseline_cpu": [], "torch_step_cpu": []}
        for rnd in range(args.rounds):
            r["text"].append(wall_of([agtrace, "run", scenario], env, r["text_cpu"]))
            r["json"].append(wall_of([agtrace, "run", scenario, "--format", "json"], env, r["json_cpu"]))
            # -q: the run and the summary only; the difference to the others is the report.
            r["quiet"].append(wall_of([agtrace, "run", scenario, "-q"], env))
            if args.baseline:
                r["baseline"].append(wall_of([args.baseline, "run", scenario], env, r["baseline_cpu"]))
            t0 = time.perf_counter()
            steps = bench.json_lines([torch_exe, w, "--threads", "1", "--reps", "1"], env)
            r["torch_process"].append(time.perf_counter() - t0)
            r["torch_step"].append(steps[0]["seconds"])
            r["torch_step_cpu"].append(steps[0]["cpu_seconds"])
            print(f"round {rnd} {w}: agtrace {r['text'][-1] * 1e3:.1f} ms, libtorch step {r['torch_step'][-1] * 1e3:.1f} ms",
                  file=sys.stderr)
        m = {k: statistics.median(v) if v else None for k, v in r.items()}
        rows.append((w, m))
    ms = lambda v: f"{v * 1e3:.1f} ms"  # noqa: E731
    print("| workload | agtrace run (text) | agtrace run --format json | agtrace run -q | report share (json) | " +
          ("baseline agtrace run (text) | " if args.baseline else "") +
          "libtorch step | libtorch whole process | agtrace json / libtorch step, wall | the same, CPU time |")
    print("|---|---|---|---|---|" + ("---|" if args.baseline else "") + "---|---|---|---|")
    for w, m in rows:
        base = f"{ms(m['baseline'])} (CPU {ms(m['baseline_cpu'])}) | " if args.baseline else ""
        per_op = f" = {m['json'] / OPS[w] * 1e6:.2f} µs/op" if w in OPS else ""
        share = max(0.0, (m["json"] - m["quiet"]) / m["json"])
        print(f"| {w} | {ms(m['text'])} (CPU {ms(m['text_cpu'])}) | {ms(m['json'])}{per_op} | {ms(m['quiet'])} | "
              f"{share * 100:.0f} % | {base}"
              f"{ms(m['torch_step'])} (CPU {ms(m['torch_step_cpu'])}) | {m['torch_process'] * 1e3:.0f} ms | "
              f"{m['json'] / m['torch_step']:.2f} | {m['json_cpu'] / m['torch_step_cpu']:.2f} |")


if __name__ == "__main__":
    main()
