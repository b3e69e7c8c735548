#!/usr/bin/env python3
"""agtrace's device bytes against what PyTorch's CUDA allocator reports for the same program.

    gpu_memory_compare.py --agtrace BIN [--json FILE] SCENARIO...

For each scenario:

- agtrace: `agtrace run S --format json --device cuda` (while agtrace refuses cuda, exit 2,
  the CPU run stands in, marked `cpu*`: its accounting is the same program's) gives the
  logical peak and live bytes at the end, and the accountant's allocator model (each
  allocation rounded up to 512 B, PyTorch's kMinBlockSize: README "The memory accountant").
- PyTorch: the scenario's exported script (`agtrace export --torch S`, which embeds
  tools/torch_runner.py) is loaded as a module (not run as __main__) and its TorchRun is run
  on cuda with one hook: after each statement, `torch.cuda.memory_allocated()` and
  `torch.cuda.max_memory_allocated()`, relative to what was allocated before the leaves.
  The program runs once first as a warm-up, so that what PyTorch allocates once per process
  (cuBLAS workspaces, cuDNN handles) is in the baseline, not in the scenario's figures. The
  runner itself is not changed; only the statement hook is added, by subclassing.

Without CUDA (a dry run) the PyTorch side still runs on the CPU, to check the export and the
hook (the statement count), and its memory columns read n/a.

The table is printed last; `difference` is agtrace's model minus PyTorch's measurement, for
the peak and for the end. Exit status 0 when every scenario gave both sides' figures, 1 when
one failed (its row says why), 2 bad usage. Needs PyTorch (2.x with CUDA on a GPU machine,
1.13 on the CPU).
"""

import argparse
import gc
import json
import os
import re
import runpy
import subprocess
import sys
import tempfile


def agtrace_figures(binary, scenario, device, timeout):
    """{'device', 'statements', 'peak', 'end', 'model_peak', 'model_end', 'by_statement', 'note'}."""
    note = ""
    for dev in (device, "cpu"):
        p = subprocess.run([binary, "run", scenario, "--format", "json", "--device", dev, "--color", "never"],
                           capture_output=True, text=True, timeout=timeout)
        if p.returncode == 2 and dev != "cpu":
            reason = (p.stderr.strip().splitlines() or ["exit 2"])[-1]
            note = "agtrace on %s: %s" % (dev, re.sub(r"\S+\.json: ", "", reason))
            continue
        if p.returncode not in (0, 1, 3):
            raise RuntimeError("agtrace run on %s: exit %d: %s" % (dev, p.returncode, p.stderr.strip()[-200:]))
        r = json.loads(p.stdout)
        stopped = [e for e in r.get("errors", [])
                   if e.get("kind") == "unsupported" and "has no %s kernel" % dev in e.get("message", "")]
        if stopped and dev != "cpu":
            # An op with no route on the device stopped the program: its figures would be
            # those of a shorter program. The CPU run's accounting stands in (marked *).
            note = "agtrace on %s: statement %s: %s" % (dev, stopped[0].get("statement"),
                                                       stopped[0]["message"].split(";")[0])
            continue
        mem, model = r["memory"], r.get("accountant", {}).get("model", {})
        measured = r.get("accountant", {}).get("device_memory", {})
        by = mem.get("by_statement", [])
        return {"device": dev if dev == device else dev + "*", "statements": len(r.get("statements", [])),
                "peak": mem["peak_bytes"], "end": by[-1]["live_after"] if by else None,
                "model_peak": model.get("peak_bytes"), "model_end": model.get("live_at_end"),
                # What agtrace's own device allocator counted (cuda runs): the figure to set
                # against torch.cuda.max_memory_allocated.
                "measured_peak": measured.get("block_peak"), "measured_end": measured.get("block_at_end"),
                "by_statement": [(e["statement"], e["live_after"]) for e in by], "note": note}
    raise RuntimeError(note)


def exported_module(binary, scenario):
    """The names the exported script defines (TorchRun, leaf_specs, SCENARIO, LEAF_VALUES)."""
    p = subprocess.run([binary, "export", "--torch", scenario], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError("agtrace export --torch: exit %d: %s" % (p.returncode, p.stderr.strip()[-200:]))
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(p.stdout)
        path = f.name
    try:
        return runpy.run_path(path, run_name="agtrace_export")  # not "__main__": main() is not called
    finally:
        os.unlink(path)


class CudaMeter:
    """PyTorch's CUDA allocator statistics (a stand-in object can replace it in a test)."""

    def __init__(self):
        import torch
        self.cuda = torch.cuda

    def sync(self):
        self.cuda.synchronize()

    def allocated(self):
        return self.cuda.memory_allocated()

    def max_allocated(self):
        return self.cuda.max_memory_allocated()

    def reset_peak(self):
        self.cuda.reset_peak_memory_stats()

    def release_cache(self):
        self.cuda.empty_cache()


def torch_figures(mod, device, meter=None):
    """Runs the exported program on `device`; with a meter, reads the allocator after every
    statement (without one, only the statements are counted)."""
    base_run = mod["TorchRun"]
    readings = []

    class Recording(base_run):
        """TorchRun plus a reading after each statement (checkpoint recomputations, which
        run inside another statement, are part of that statement's peak)."""
        base = 0

        def _run_statement(self, index, ns, in_try, local=None):
            if not readings:
                readings.append(self._reading(-1))  # the setup: the leaves
            ok = super()._run_statement(index, ns, in_try, local)
            readings.append(self._reading(index))
            return ok

        def _reading(self, index):
            if meter is None:
                return {"statement": index, "allocated": None, "max_allocated": None}
            meter.sync()
            return {"statement": index, "allocated": meter.allocated() - Recording.base,
                    "max_allocated": meter.max_allocated() - Recording.base}

    leaves = mod["leaf_specs"](mod["SCENARIO"], mod["LEAF_VALUES"], device)
    # Warm-up: the same program once, so that one-off allocations (cuBLAS workspace, cuDNN
    # handles) happen before the baseline; what they keep is reported apart (one_off), as is
    # the warm-up's own peak (cold_peak), for a side that counts such workspaces too.
    cold = {}
    if meter is not None:
        meter.sync()
        meter.reset_peak()
        cold["base"] = meter.allocated()
    warm = base_run(mod["SCENARIO"], leaves, device).run()
    del warm
    gc.collect()
    if meter is not None:
        meter.sync()
        cold["cold_peak"] = meter.max_allocated() - cold["base"]
        meter.release_cache()
        meter.reset_peak()
        Recording.base = meter.allocated()
        cold["one_off"] = Recording.base - cold["base"]
    run = Recording(mod["SCENARIO"], leaves, device).run()
    statuses = list(run.status)
    del run
    gc.collect()
    stmt = [r for r in readings if r["statement"] >= 0]
    out = {"statements": len(statuses), "statement_runs": len(stmt),
           "cold_peak": cold.get("cold_peak"), "one_off": cold.get("one_off"),
           "errors": sum(1 for s in statuses if s == "error"), "readings": readings}
    if meter is not None and readings:
        out["peak"] = max(r["max_allocated"] for r in readings)
        out["end"] = readings[-1]["allocated"]
    else:
        out["peak"] = out["end"] = None
    return out


def fmt_bytes(v):
    return "n/a" if v is None else "{:,}".format(v).replace(",", " ")


def fmt_diff(a, b):
    if a is None or b is None:
        return "n/a"
    d = a - b
    return ("+" if d > 0 else "") + fmt_bytes(d)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--agtrace", required=True, help="the agtrace binary")
    ap.add_argument("--device", default="cuda", help="device for both sides (default cuda)")
    ap.add_argument("--timeout", type=int, default=60, help="seconds per agtrace run (default 60)")
    ap.add_argument("--json", help="write every figure, per statement too, here")
    ap.add_argument("scenarios", nargs="+")
    args = ap.parse_args(argv)

    try:
        import torch
    except ImportError as e:
        print("gpu_memory_compare: needs PyTorch (%s)" % e, file=sys.stderr)
        return 2
    torch_device = args.device
    why_no_cuda = ""
    if args.device == "cuda" and not torch.cuda.is_available():
        torch_device = "cpu"
        why_no_cuda = "PyTorch %s here has no CUDA device: its side ran on the CPU (no memory figures)" % (
            torch.__version__)

    rows, failed, details = [], 0, {}
    for path in args.scenarios:
        name = os.path.splitext(os.path.basename(path))[0]
        row = {"scenario": name, "problem": ""}
        try:
            row["agtrace"] = agtrace_figures(args.agtrace, path, args.device, args.timeout)
        except Exception as e:  # noqa: BLE001  (a row says why; the table is still printed)
            row["agtrace"], row["problem"] = None, "agtrace: %s" % e
        try:
            row["torch"] = torch_figures(exported_module(args.agtrace, path), torch_device,
                                         CudaMeter() if torch_device == "cuda" else None)
        except Exception as e:  # noqa: BLE001
            row["torch"] = None
            row["problem"] = (row["problem"] + "; " if row["problem"] else "") + "torch: %s: %s" % (
                type(e).__name__, str(e).splitlines()[0] if str(e) else "")
        if row["problem"]:
            failed += 1
        rows.append(row)
        details[name] = row

    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch_version": torch.__version__, "device": torch_device,
                       "gpu": torch.cuda.get_device_name(0) if torch_device == "cuda" else None,
                       "rows": details}, f, indent=1)

    head = ["scenario", "statements (runs)", "agtrace on", "agtrace peak / end", "model peak / end (512 B)",
            "measured peak / end", "torch peak / end", "difference (model - torch)"]
    table = []
    for r in rows:
        a, t = r["agtrace"] or {}, r["torch"] or {}
        table.append([
            r["scenario"],
            "%s (%s)" % (t.get("statements", a.get("statements", "?")), t.get("statement_runs", "?")),
            a.get("device", "failed"),
            "%s / %s" % (fmt_bytes(a.get("peak")), fmt_bytes(a.get("end"))),
            "%s / %s" % (fmt_bytes(a.get("model_peak")), fmt_bytes(a.get("model_end"))),
            "%s / %s" % (fmt_bytes(a.get("measured_peak")), fmt_bytes(a.get("measured_end")))
            if a.get("measured_peak") is not None else "-",
            "%s / %s" % (fmt_bytes(t.get("peak")), fmt_bytes(t.get("end"))) if r["torch"] else "failed",
            "%s / %s" % (fmt_diff(a.get("model_peak"), t.get("peak")), fmt_diff(a.get("model_end"), t.get("end"))),
        ])
    widths = [max(len(x[i]) for x in [head] + table) for i in range(len(head))]
    line = lambda cells: "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    print(line(head))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for cells in table:
        print(line(cells))
    notes = sorted({r["agtrace"]["note"] for r in rows if r["agtrace"] and r["agtrace"]["note"]})
    if any(r["agtrace"] and r["agtrace"]["device"].endswith("*") for r in rows):
        notes.insert(0, "*: agtrace refused %s, so its CPU run stands in (same program, same accounting)" % (
            args.device))
    one_off = ["%s %s" % (r["scenario"], fmt_bytes(r["torch"]["one_off"])) for r in rows
               if r["torch"] and r["torch"].get("one_off")]
    if one_off:
        notes.append("PyTorch's one-off allocations kept after the warm-up run (cuBLAS workspace ...), in its "
                     "baseline, not in the table: " + ", ".join(one_off))
    if any(r["agtrace"] and r["agtrace"].get("measured_peak") is not None for r in rows):
        notes.append("measured: agtrace's device allocator in 512-byte blocks, cuBLAS's workspace (8.1 MiB, "
                     "on the first product) included, which PyTorch's column leaves in its baseline")
    if why_no_cuda:
        notes.append(why_no_cuda)
    for r in rows:
        if r["problem"]:
            notes.append("FAILED %s: %s" % (r["scenario"], r["problem"]))
    for n in notes:
        print("  " + n)
    print("memory: %d scenarios, %d failed%s" % (len(rows), failed, " (torch on %s)" % torch_device))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
