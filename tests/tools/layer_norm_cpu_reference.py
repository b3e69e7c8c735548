#!/usr/bin/python3
"""References for tests/ops/test_layer_norm_cpu.cpp: torch 1.13's native_layer_norm and
native_layer_norm_backward, and native_group_norm, on the CPU, as FNV-1a hashes of each result's bytes (row-major,
the tensor's own dtype). The inputs are integers divided by odd numbers in double, then
rounded to the dtype, which C++ reproduces exactly; odd divisors, so that sums round and
their order shows. Prints the C++ case table.

    /usr/bin/python3 tests/tools/layer_norm_cpu_reference.py
"""
import torch

from fnv_hash import fnv


def inputs(rows, cols, offset, dtype):
    i = torch.arange(rows * cols, dtype=torch.int64)
    x = (((37 * i + 11) % 1009 - 504).to(torch.float64) / 63 + offset).reshape(rows, cols)
    c = torch.arange(cols, dtype=torch.int64)
    w = 1 + ((7 * c) % 13 - 6).to(torch.float64) / 31
    b = ((5 * c) % 11 - 5).to(torch.float64) / 61
    g = (((7 * i) % 23 - 11).to(torch.float64) / 7).reshape(rows, cols)
    return x.to(dtype), w.to(dtype), b.to(dtype), g.to(dtype)

# rows, cols, parameters ("affine": weight and bias, "weight", "none"), offset, dtype, threads
CASES = [
    (2, 5, "affine", 0, "Float32", 1),     # the scalar tail alone
    (3, 8, "none", 0, "Float32", 1),       # one vector per row
    (2, 20, "weight", 0, "Float32", 1),    # two vectors and a tail
    (4, 256, "affine", 0, "Float32", 1),   # two chunks of 16 vectors
    (3, 1100, "affine", 50, "Float32", 1), # the chunks' cascade, an offset mean
    (5, 300, "none", 3, "Float32", 1),
    (7, 64, "affine", 0, "Float32", 2),    # two threads: rows 0-3 and 4-6 summed apart
    (4, 130, "affine", 0, "Float64", 1),   # 4 double lanes
    (3, 1100, "weight", 50, "Float64", 1),
]

torch.set_num_threads(1)
for rows, cols, params, offset, dtype, threads in CASES:
    torch.set_num_threads(threads)
    x, w, b, g = inputs(rows, cols, offset, getattr(torch, dtype.lower()))
    weight = w if params != "none" else None
    bias = b if params == "affine" else None
    y, mean, rstd = torch.native_layer_norm(x, [cols], weight, bias, 1e-5)
    dx, dw, db = torch.ops.aten.native_layer_norm_backward(
        g, x, [cols], mean, rstd, weight, bias, [True, weight is not None, bias is not None])
    hashes = [fnv(y), fnv(mean), fnv(rstd), fnv(dx), fnv(dw) if dw is not None else 0, fnv(db) if db is not None else 0]
    print("      {%d, %d, Params::%s, %d, DType::%s, %d, {%s}}," % (
        rows, cols, params.capitalize(), offset, dtype, threads, ", ".join("0x%016xull" % h for h in hashes)))

# group_norm: batch, channels, HxW, groups, parameters, offset, dtype
GROUP_CASES = [
    (2, 6, 5, 3, "affine", 0, "Float32"),    # groups of 10: one vector and a tail
    (3, 4, 49, 2, "none", 2, "Float32"),     # groups of 98
    (2, 8, 64, 4, "weight", 0, "Float32"),   # groups of 128: a full chunk
    (1, 2, 700, 1, "affine", 50, "Float32"), # a group of 1,400: the cascade
    (2, 6, 33, 2, "affine", 0, "Float64"),
    (2, 4, 17, 4, "none", 3, "Float64"),
]
print("// group_norm")
torch.set_num_threads(1)
for n, c, hxw, groups, params, offset, dtype in GROUP_CASES:
    x, w, b, _ = inputs(n * c, hxw, offset, getattr(torch, dtype.lower()))
    w, b = inputs(1, c, 0, getattr(torch, dtype.lower()))[1:3]
    weight = w if params != "none" else None
    bias = b if params == "affine" else None
    y, mean, rstd = torch.native_group_norm(x.reshape(n, c, hxw), weight, bias, n, c, hxw, groups, 1e-5)
    print("      {%d, %d, %d, %d, Params::%s, %d, DType::%s, {0x%016xull, 0x%016xull, 0x%016xull}}," % (
        n, c, hxw, groups, params.capitalize(), offset, dtype, fnv(y), fnv(mean), fnv(rstd)))
