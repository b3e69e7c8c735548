// AGTRACE_HD marks a function for both the host and the device under nvcc, and is empty for
// a plain C++ compiler, so headers shared by the kernels and the host (the pointwise
// formulas, Strided) compile in either.
#pragma once

#if defined(__CUDACC__)
#define AGTRACE_HD __host__ __device__
#else
#define AGTRACE_HD
#endif
