#!/usr/bin/python3
"""References for tests/ops/test_batch_norm_cpu.cpp: torch 1.13's native_batch_norm on the CPU
for contiguous float32 inputs (the channels-last kernels for one element per channel and
sample, on the given thread count), as FNV-1a hashes of each result's bytes (row-major,
float32): the output, the saved mean and inverse
standard deviation (training), the running mean and variance after the call, and
native_batch_norm_backward's input, weight and bias gradients for a contiguous gradient. The inputs
are integers divided by odd numbers in double, then rounded to float32, which C++ reproduces
exactly; odd divisors, so that sums round and their order shows. Prints the C++ case table.

    /usr/bin/python3 tests/tools/batch_norm_cpu_reference.py
"""
import torch

from fnv_hash import fnv


def inputs(batch, channels, inner, offset):
    i = torch.arange(batch * channels * inner, dtype=torch.int64)
    x = (((37 * i + 11) % 1009 - 504).to(torch.float64) / 63 + offset).reshape(batch, channels, inner)
    c = torch.arange(channels, dtype=torch.int64)
    w = 1 + ((7 * c) % 13 - 6).to(torch.float64) / 31
    b = ((5 * c) % 11 - 5).to(torch.float64) / 61
    rm = ((3 * c) % 7 - 3).to(torch.float64) / 29
    rv = 1 + ((5 * c) % 9).to(torch.float64) / 17
    g = ((7 * i) % 23 - 11).to(torch.float64) / 7
    return [t.to(torch.float32) for t in (x, w, b, rm, rv, g)]


# batch, channels, spatial sizes, training, parameters ("affine", "none"), offset, threads
CASES = [
    (4, 3, (3, 3), True, "affine", 0),     # 9 elements per plane: a vector and a tail
    (6, 4, (7,), True, "none", 2),         # a 3-d input, the tail alone
    (8, 16, (16, 16), True, "affine", 0),  # whole vectors
    (2, 5, (33, 31), True, "affine", 40),  # an offset mean: the variance's float differences
    (4, 3, (3, 3), False, "affine", 0),    # evaluation: the running statistics
    (3, 6, (5, 4), False, "none", 1),
    # One element per plane: the channels-last kernels, whose sums follow the threads' rows.
    (16, 5, (), True, "affine", 0, 1),
    (16, 5, (), True, "affine", 0, 2),
    (33, 12, (), True, "affine", 3, 3),
    (3, 8, (), True, "none", 0, 4),        # no more rows than threads: double sums
    (8, 6, (1, 1), True, "affine", 1, 2),  # [N, C, 1, 1]
    (10, 4, (), False, "affine", 0, 2),
]

for batch, channels, spatial, training, params, offset, *rest in CASES:
    threads = rest[0] if rest else 1
    torch.set_num_threads(threads)
    inner = 1
    for s in spatial:
        inner *= s
    x, w, b, rm, rv, g = inputs(batch, channels, inner, offset)
    x, g = x.reshape(batch, channels, *spatial), g.reshape(batch, channels, *spatial)
    weight = w if params == "affine" else None
    bias = b if params == "affine" else None
    out, mean, invstd = torch.native_batch_norm(x, weight, bias, rm, rv, training, 0.1, 1e-5)
    dx, dw, db = torch.ops.aten.native_batch_norm_backward(
        g, x, weight, rm, rv, mean, invstd, training, 1e-5, [True, weight is not None, bias is not None])
    hashes = [fnv(out), fnv(mean) if training else 0, fnv(invstd) if training else 0, fnv(rm), fnv(rv), fnv(dx),
              fnv(dw) if dw is not None else 0, fnv(db) if db is not None else 0]
    print("      {%d, %d, {%s}, %s, Params::%s, %d, {%s}, %d}," % (
        batch, channels, ", ".join(str(s) for s in spatial), "true" if training else "false",
        params.capitalize(), offset, ", ".join("0x%016xull" % h for h in hashes), threads))
