#!/usr/bin/python3
"""Peak memory: agtrace's reported peak for a CPU run vs the peak RSS PyTorch really uses.

Runs one scenario (default: an MLP of the 784-512-512-10 family at batch 8192, written to a
temporary file) twice:
  1. `agtrace run --format json`: memory.peak_bytes minus the live bytes after the setup
     (the leaves) = the peak the program adds;
  2. the same statements in real PyTorch 1.13 (exec; one warm-up pass, then a measured one
     with the peak RSS reset by /proc/self/clear_refs after the leaves exist): VmHWM minus
     the RSS after the leaves = what the program really added.
Also prints agtrace's own peak RSS (it keeps 8 bytes per element internally, whatever the
dtype, so it is not the figure to compare). Usage:
  /usr/bin/python3 bench/peak_memory.py --agtrace build/agtrace [--model mlp|transformer] [SCENARIO.json]
"""
import argparse, json, os, subprocess, sys, tempfile

DEFAULT = {
    "format": 1, "name": "peak_memory_mlp",
    "description": "784-512-512-10 MLP at batch 8192 (bench/peak_memory.py)",
    "seed": 1,
    "tensors": {
        "x": {"shape": [8192, 784], "init": {"uniform": [0, 1]}},
        "target": {"shape": [8192], "dtype": "int64", "init": {"randint": [0, 10]}},
        "W1": {"shape": [512, 784], "requires_grad": True, "init": {"uniform": [-0.03, 0.03]}},
        "b1": {"shape": [512], "requires_grad": True},
        "W2": {"shape": [512, 512], "requires_grad": True, "init": {"uniform": [-0.04, 0.04]}},
        "b2": {"shape": [512], "requires_grad": True},
        "W3": {"shape": [10, 512], "requires_grad": True, "init": {"uniform": [-0.04, 0.04]}},
        "b3": {"shape": [10], "requires_grad": True},
    },
    "program": ["h1 = F.linear(x, W1, b1).relu()", "h2 = F.linear(h1, W2, b2).relu()",
                "loss = F.cross_entropy(F.linear(h2, W3, b3), target)", "del h1, h2", "loss.backward()"],
}

def transformer_block(s=256, b=4, h=512, a=8):
    """scenarios/transformer_block_toy.json's program at s=256, b=4, h=512, a=8, with backward."""
    hd = h // a
    rg = lambda shape: {"shape": shape, "requires_grad": True, "init": {"uniform": [-0.05, 0.05]}}
    tensors = {"x": {"shape": [s, b, h], "init": {"normal": [0, 1]}}}
    for name, shape in [("ln1_w", [h]), ("ln1_b", [h]), ("W_qkv", [3 * h, h]), ("b_qkv", [3 * h]), ("W_o", [h, h]),
                        ("b_o", [h]), ("ln2_w", [h]), ("ln2_b", [h]), ("W_1", [4 * h, h]), ("b_1", [4 * h]),
                        ("W_2", [h, 4 * h]), ("b_2", [h])]:
        tensors[name] = rg(shape)
    program = [
        "h1 = F.layer_norm(x, (%d,), ln1_w, ln1_b)" % h,
        "qkv = F.linear(h1, W_qkv, b_qkv).view(%d, %d, %d, %d)" % (s, b, a, 3 * hd),
        "q, k, v = qkv.split(%d, dim=-1)" % hd,
        "q = q.reshape(%d, %d, %d).transpose(0, 1)" % (s, b * a, hd),
        "k = k.reshape(%d, %d, %d).transpose(0, 1)" % (s, b * a, hd),
        "v = v.reshape(%d, %d, %d).transpose(0, 1)" % (s, b * a, hd),
        "scores = torch.bmm(q, k.transpose(1, 2)) * %r" % (1 / hd ** 0.5),
        "probs = F.dropout(torch.softmax(scores, dim=-1), p=0.1, training=True)",
        "ctx = torch.bmm(probs, v).transpose(0, 1).reshape(%d, %d, %d)" % (s, b, h),
        "x2 = x + F.dropout(F.linear(ctx, W_o, b_o), p=0.1, training=True)",
        "h2 = F.layer_norm(x2, (%d,), ln2_w, ln2_b)" % h,
        "m = F.gelu(F.linear(h2, W_1, b_1))",
        "y = x2 + F.dropout(F.linear(m, W_2, b_2), p=0.1, training=True)",
        "del h1, qkv, q, k, v, scores, probs, ctx, x2, h2, m",
        "loss = y.sum()",
        "loss.backward()",
    ]
    return {"format": 1, "name": "peak_memory_transformer", "seed": 1, "tensors": tensors, "program": program}


TORCH_SIDE = r'''
import json, sys, torch
import torch.nn.functional as F
torch.set_num_threads(1)
sc = json.load(open(sys.argv[1]))
def status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
dt = {"float32": torch.float32, "float64": torch.float64, "int64": torch.int64}
def leaves():
    ns = {"torch": torch, "F": F}
    for name, spec in sc["tensors"].items():
        d = dt[spec.get("dtype", sc.get("dtype", "float32"))]
        t = torch.zeros(spec["shape"], dtype=d)
        if d == torch.int64:
            t.random_(0, 10)
        else:
            t.uniform_(-0.05, 0.05)
        ns[name] = t.requires_grad_(spec.get("requires_grad", False))
    return ns
# First pass: warms up kernels, the autograd engine and the allocator's free lists.
ns = leaves()
for stmt in sc["program"]:
    exec(stmt, ns)
del ns
# Second pass, measured: VmHWM is reset (clear_refs 5) after the leaves exist.
ns = leaves()
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
base = status("VmRSS")
for stmt in sc["program"]:
    exec(stmt, ns)
print(json.dumps({"base": base, "peak": status("VmHWM")}))
'''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--agtrace", required=True)
    ap.add_argument("--model", choices=["mlp", "transformer"], default="mlp",
                    help="built-in scenario when none is given (default: mlp)")
    ap.add_argument("scenario", nargs="?")
    args = ap.parse_args()
    path = args.scenario
    tmp = None
    if not path:
        tmp = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
        json.dump(DEFAULT if args.model == "mlp" else transformer_block(), tmp)
        tmp.close()
        path = tmp.name
    try:
        out = subprocess.run(["/usr/bin/time", "-f", "%M", args.agtrace, "run", path, "--format", "json",
                              "--device", "cpu"], capture_output=True, text=True)
        if out.returncode not in (0, 1):
            sys.exit("agtrace failed: " + out.stderr)
        rep = json.loads(out.stdout)
        own_rss = int(out.stderr.strip().splitlines()[-1]) * 1024
        setup = next(m["live_after"] for m in rep["memory"]["by_statement"] if m["statement"] == -1)
        ag_peak = rep["memory"]["peak_bytes"] - setup
        # Large blocks straight from mmap and back, so freed tensors leave the RSS at once
        # (glibc would otherwise raise its mmap threshold and keep freed blocks in the heap).
        env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", MALLOC_TRIM_THRESHOLD_="0")
        t = subprocess.run(["/usr/bin/python3", "-c", TORCH_SIDE, path], capture_output=True, text=True, env=env)
        if t.returncode != 0:
            sys.exit("torch side failed: " + t.stderr)
        tr = json.loads(t.stdout.strip().splitlines()[-1])
        torch_peak = tr["peak"] - tr["base"]
        mib = lambda b: "%.1f MiB" % (b / 2**20)
        print("scenario                 %s" % rep["scenario"])
        print("agtrace peak above setup %s (%d B; peak %s during statement %s)" % (
            mib(ag_peak), ag_peak, mib(rep["memory"]["peak_bytes"]), rep["memory"]["peak_statement"]))
        print("torch peak RSS above base %s (%d B)" % (mib(torch_peak), torch_peak))
        print("ratio torch / agtrace     %.3f" % (torch_peak / ag_peak if ag_peak else float("nan")))
        print("agtrace's own peak RSS    %s (8 bytes per element internally; not the modelled figure)" % mib(own_rss))
    finally:
        if tmp:
            os.unlink(tmp.name)


if __name__ == "__main__":
    main()
