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
# two recorded models (`agtrace record`: torchvision's resnet18 and nanoGPT), the 10,000-op
# chain, whose figure is also given per op, and cold start (the two-op seed_walk, whose time is
# the process's start-up).
WORKLOADS = ["mlp_linear", "transformer_linear", "conv_block", "resnet18_b8", "nanogpt_step", "tiny_chain",
             "cold_start"]
OPS = {"tiny_chain": 10000}
# Workloads whose scenario is not in bench/scenarios, and the libtorch program of each.
SCENARIO = {"cold_start": os.path.join(bench.ROOT, "scenarios", "seed_walk.json")}
TORCH_NAME = {"cold_start": "seed_walk"}


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
    ap.add_argument("--update-readme", action="store_true", help="write the table into bench/README.md")
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
        scenario = SCENARIO.get(w, os.path.join(bench.BENCH, "scenarios", w + ".json"))
        r = {"text": [], "json": [], "quiet": [], "baseline": [], "torch_process": [], "torch_step": [],
             "text_cpu": [], "json_cpu": [], "baseline_cpu": [], "torch_step_cpu": [], "text_rss": []}
        for rnd in range(args.rounds):
            r["text"].append(wall_of([agtrace, "run", scenario], env, r["text_cpu"]))
            r["json"].append(wall_of([agtrace, "run", scenario, "--format", "json"], env, r["json_cpu"]))
            # -q: the run and the summary only; the difference to the others is the report.
            r["quiet"].append(wall_of([agtrace, "run", scenario, "-q"], env))
            if args.baseline:
                r["baseline"].append(wall_of([args.baseline, "run", scenario], env, r["baseline_cpu"]))
            t0 = time.perf_counter()
            steps = bench.json_lines([torch_exe, TORCH_NAME.get(w, w), "--threads", "1", "--reps", "1"], env)
            r["torch_process"].append(time.perf_counter() - t0)
            r["torch_step"].append(steps[0]["seconds"])
            r["torch_step_cpu"].append(steps[0]["cpu_seconds"])
            print(f"round {rnd} {w}: agtrace {r['text'][-1] * 1e3:.1f} ms, libtorch step {r['torch_step'][-1] * 1e3:.1f} ms",
                  file=sys.stderr)
        # Peak RSS from GNU time (bench/run.py's timed_process): a child forked by Python would
        # also count the pages it shared with Python before exec.
        r["text_rss"].append(bench.timed_process([agtrace, "run", scenario], env)[1])
        m = {k: statistics.median(v) if v else None for k, v in r.items()}
        # The report's share from the least time of each mode: the report is a few per cent of
        # a model's run, and a run now and then loses tens of per cent to the host (first
        # touches of fresh memory in the kernel), which moved the difference of two medians by
        # more than the report itself.
        m["json_least"], m["quiet_least"] = min(r["json"]), min(r["quiet"])
        rows.append((w, m))
    ms = lambda v: f"{v * 1e3:.1f} ms"  # noqa: E731
    lines = ["| workload | agtrace run (text) | peak RSS (text) | agtrace run --format json | agtrace run -q | "
             "report share (json, least times) | " + ("baseline agtrace run (text) | " if args.baseline else "") +
             "libtorch step | libtorch whole process | agtrace json / libtorch step, wall | the same, CPU time | "
             "target | met |",
             "|---|---|---|---|---|---|" + ("---|" if args.baseline else "") + "---|---|---|---|---|---|"]
    for w, m in rows:
        base = f"{ms(m['baseline'])} (CPU {ms(m['baseline_cpu'])}) | " if args.baseline else ""
        per_op = f" = {m['json'] / OPS[w] * 1e6:.2f} µs/op" if w in OPS else ""
        share = max(0.0, (m["json_least"] - m["quiet_least"]) / m["json_least"])
        ratio = m["json"] / m["torch_step"]
        ratio_text, cpu_text = f"{ratio:.2f}", f"{m['json_cpu'] / m['torch_step_cpu']:.2f}"
        if w == "cold_start":  # its libtorch step is 0.1 ms: the comparison is the whole process
            ratio_text, cpu_text = f"{m['json'] / m['torch_process']:.3f} (of the whole process)", "–"
        if w in OPS:
            target, met = "≤ 3 µs/op", m["json"] / OPS[w] <= 3e-6
        elif w == "cold_start":
            target, met = "< 10 ms, < 10 MiB", m["text"] < 0.010 and m["text_rss"] < 10 * 2 ** 20
        else:
            limit = 1.0 if w == "conv_block" else 0.9
            target, met = f"≤ {limit:.1f}× the step, report ≤ 10 %", ratio <= limit and share <= 0.10
        lines.append(f"| {w} | {ms(m['text'])} (CPU {ms(m['text_cpu'])}) | {m['text_rss'] / 2 ** 20:.1f} MiB | "
                     f"{ms(m['json'])}{per_op} | {ms(m['quiet'])} | {share * 100:.0f} % | {base}"
                     f"{ms(m['torch_step'])} (CPU {ms(m['torch_step_cpu'])}) | {m['torch_process'] * 1e3:.0f} ms | "
                     f"{ratio_text} | {cpu_text} | {target} | {'yes' if met else 'no'} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.update_readme:
        cmd = "python3 bench/whole_process.py " + " ".join(sys.argv[1:])
        bench.replace_readme_block(
            "whole", f"Machine: {bench.machine_description()}. Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. "
                     f"Command: `{cmd.strip()}`. Build: {bench.build_description(args.build_dir)}. "
                     f"Load average at the end: {os.getloadavg()[0]:.1f}.\n\n{text}")

if __name__ == "__main__":
    main()
