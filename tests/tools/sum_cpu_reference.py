#!/usr/bin/python3
"""References for tests/tensor/test_cascade_sum.cpp: torch 1.13's sums of contiguous float32
tensors on the CPU, as FNV-1a hashes of the result's bytes: over leading dims (x.sum(0), a bias
gradient's sum over batch and tokens), over trailing dims (row sums), and of every element on
one to four threads, and float64 sums of each kind. The inputs are integers over 63 times powers
of two, computed in double (and rounded to float32 for the float32 sums), which C++ reproduces
exactly; the powers spread the magnitudes so that the order of the additions shows. Prints the C++ case table, and on stderr
how many columns the exact sum rounded once gets wrong; checks that two threads give torch's
results unchanged.

    /usr/bin/python3 tests/tools/sum_cpu_reference.py
"""
import sys

import torch

from fnv_hash import fnv


def inputs(shape, dtype=torch.float32):
    n = 1
    for s in shape:
        n *= s
    i = torch.arange(n, dtype=torch.int64)
    scale = torch.pow(2.0, ((7 * i) % 13 - 6).to(torch.float64))
    return (((37 * i + 11) % 1009 - 504).to(torch.float64) / 63 * scale).to(dtype).reshape(shape)


# shape, reduced dims: whole groups of 32 columns, groups of 8 and a tail (row_sum), fewer than
# eight columns (groups of 4), row counts around the cascade's 16-row steps, leftover rows of
# row_sum's four partials, and a fifth cascade level (2^20 rows and more: p = 5).
CASES = [
    ((5, 10), (0,)),
    ((16, 32), (0,)),
    ((17, 100), (0,)),
    ((512, 384), (0,)),
    ((1000, 45), (0,)),
    ((33, 7), (0,)),
    ((100, 3), (0,)),
    ((64, 4), (0,)),
    ((9, 5), (0,)),
    ((3, 40), (0,)),
    ((1, 12), (0,)),
    ((4, 100, 96), (0, 1)),
    ((8, 64, 65), (0, 1)),
    ((2, 3, 50), (0,)),
    ((1048637, 4), (0,)),
    ((4194319, 2), (0,)),
]

# Row sums: eight elements or more (vectors, then the tail), fewer (row_sum over elements), a
# row of exactly one vector, and trailing dims coalesced into one row.
ROWS = [
    ((5, 10), (1,)),
    ((3, 7), (1,)),
    ((16, 3), (1,)),
    ((4, 100), (1,)),
    ((128, 512), (1,)),
    ((2, 8), (1,)),
    ((7, 33), (1,)),
    ((3, 4, 25), (1, 2)),
    ((6, 1), (1,)),
]

def print_case(shape, dims, what):
    x = inputs(shape)
    s = x.sum(dims)
    exact = x.to(torch.float64).sum(dims).to(torch.float32)
    wrong = int((s.view(torch.int32) != exact.view(torch.int32)).sum())
    torch.set_num_threads(2)  # torch splits columns at multiples of 32 and rows whole: the same bits
    assert torch.equal(x.sum(dims).view(torch.int32), s.view(torch.int32)), shape
    torch.set_num_threads(1)
    print("sum%s over %s: the exact sum rounded once differs in %d of %d %s" % (
        list(shape), list(dims), wrong, s.numel(), what), file=sys.stderr)
    print("      {{%s}, {%s}, 0x%016xull}," % (", ".join(map(str, shape)), ", ".join(map(str, dims)), fnv(s)))


torch.set_num_threads(1)
for shape, dims in CASES:
    print_case(shape, dims, "columns")
print("    // rows")
for shape, dims in ROWS:
    print_case(shape, dims, "rows")

# Sums of every element, on one to four threads (from 32,768 elements torch splits them
# between its threads).
print("    // every element: size, then the hash on 1, 2, 3 and 4 threads")
for n in (1, 3, 7, 8, 9, 31, 33, 1000, 4097, 32767, 32768, 32769, 100000, 262147, 1000001):
    x = inputs((n,))
    hashes = []
    for threads in (1, 2, 3, 4):
        torch.set_num_threads(threads)
        hashes.append(fnv(x.sum()))
    torch.set_num_threads(1)
    exact = x.to(torch.float64).sum().to(torch.float32)
    print("sum of %d elements: the exact sum rounded once %s torch's on one thread" % (
        n, "equals" if exact.view(torch.int32) == x.sum().view(torch.int32) else "differs from"), file=sys.stderr)
    print("      {%d, {%s}}," % (n, ", ".join("0x%016xull" % h for h in hashes)))

# float64: the same orders with vectors of four doubles (groups of 16 columns from four
# columns on); the inputs stay doubles.
print("    // float64: shape, reduced dims (empty: every element), then the hash on 1, 2, 3 and 4 threads")
for shape, dims in [((512, 384), (0,)), ((17, 3), (0,)), ((33, 7), (0,)), ((100, 17), (0,)), ((5, 10), (1,)),
                    ((9, 2), (1,)), ((100, 17), (1,)), ((3, 4, 25), (1, 2)), ((3,), ()), ((5,), ()),
                    ((1001,), ()), ((32769,), ()), ((300001,), ())]:
    x = inputs(shape, torch.float64)
    hashes = []
    for threads in (1, 2, 3, 4):
        torch.set_num_threads(threads)
        hashes.append(fnv(x.sum(dims) if dims else x.sum()))
    torch.set_num_threads(1)
    print("      {{%s}, {%s}, {%s}}," % (", ".join(map(str, shape)), ", ".join(map(str, dims)),
                                       ", ".join("0x%016xull" % h for h in hashes)))
