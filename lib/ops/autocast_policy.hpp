// PyTorch 1.13's autocast cast policy, op by op, for the two device types torch.autocast
// accepts ("cpu", "cuda"). The lists are aten/src/ATen/autocast_mode.cpp's registrations for
// the AutocastCPU and AutocastCUDA dispatch keys; the set of ops registered under each key was
// checked against the installed PyTorch 1.13 (torch._C._dispatch_get_registrations_for_dispatch_key).
#pragma once
#include <string>

#include "tensor/dtype.hpp"

namespace agtrace::ops {

enum class CastPolicy {
  None,             // not on a list, and does not decompose into listed ops: runs as written
  LowerPrecision,   // every eligible floating input cast to the block's dtype
  Fp32,             // every eligible floating input cast to float32
  Fp32SetOptDtype,  // CUDA softmax, sum, ...: dtype=torch.float32 when the first input is eligible and dtype is unset
  Promote,          // eligible inputs cast to the widest of them and the block's dtype
  Banned,           // CUDA binary_cross_entropy: PyTorch raises
  Unknown,          // agtrace does not know what PyTorch does under autocast: unsupported
};

// The policy of the table entry `op` (its canonical name) for device type "cpu" or "cuda".
CastPolicy autocast_policy(const std::string& op, const std::string& device_type);
// "lower", "fp32", "fp32 (dtype=float32)", "promote", "banned", "none", "unknown".
const char* cast_policy_name(CastPolicy p);
// The line `agtrace ops` prints: "cpu lower, cuda lower".
std::string autocast_policy_text(const std::string& op);

// What torch.is_autocast_enabled(), is_autocast_cpu_enabled(), get_autocast_cpu_dtype() and
// get_autocast_gpu_dtype() read: the innermost autocast region of each device type the
// program is in (the interpreter's AutocastState keeps it), else 1.13's defaults (measured:
// False, False, torch.bfloat16, torch.float16). A cuda region counts as enabled, as on a
// machine with CUDA (a CUDA-less PyTorch disables it with a warning).
struct AutocastQuery {
  bool cpu_enabled = false, cuda_enabled = false;
  DType cpu_dtype = DType::BFloat16, gpu_dtype = DType::Float16;
};
AutocastQuery& autocast_query();

}  // namespace agtrace::ops
