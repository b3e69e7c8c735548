// AGTRACE_GCC_PRAGMA(x): `#pragma x` under GCC only. The float32 kernels pin their
// floating-point contraction and pick vector targets per function with GCC's optimize and
// target pragmas; clang ignores those (with a -Wunknown-pragmas warning per line in the fuzz
// build) and compiles the functions as plain loops, which is what it did before this macro.
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#define AGTRACE_GCC_PRAGMA(x) _Pragma(#x)
#else
#define AGTRACE_GCC_PRAGMA(x)
#endif
