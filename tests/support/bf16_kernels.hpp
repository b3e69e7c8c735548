#pragma once
// Runs a test as PyTorch 1.13 runs on the named machine's bfloat16 CPU kernels (oneDNN on a CPU
// with AVX-512, cpublas elsewhere), restoring the host's choice when it ends.
#include "tensor/kernels.hpp"

struct Bf16KernelsOf {
  agtrace::kernels::Bf16CpuKernels saved = agtrace::kernels::bf16_cpu_kernels();
  explicit Bf16KernelsOf(agtrace::kernels::Bf16CpuKernels k) { agtrace::kernels::set_bf16_cpu_kernels(k); }
  ~Bf16KernelsOf() { agtrace::kernels::set_bf16_cpu_kernels(saved); }
  Bf16KernelsOf(const Bf16KernelsOf&) = delete;
  Bf16KernelsOf& operator=(const Bf16KernelsOf&) = delete;
};
