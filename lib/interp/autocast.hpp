// `with torch.autocast(device_type, dtype=...)` regions and the casts PyTorch 1.13 makes in
// them (aten/src/ATen/autocast_mode.cpp): per-op cast policies (ops/autocast_policy.hpp), the
// cast cache of float32 leaves, cleared when the outermost region exits.
#pragma once
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ops/autocast_policy.hpp"
#include "ops/table.hpp"
#include "tensor/tensor.hpp"

namespace agtrace {

class AutocastState {
 public:
  // The device type a tensor is eligible for: its device, meta counting as cuda (spec: a
  // meta run accounts what the CUDA policy would do).
  static std::string device_type_of(const Tensor& t);

  AutocastState() = default;
  AutocastState(const AutocastState&) = delete;
  AutocastState& operator=(const AutocastState&) = delete;
  ~AutocastState();  // the queries read the defaults again

  void enter(const std::string& device_type, DType dtype);
  void exit();  // clears the cache when the outermost region exits
  bool active() const { return !regions_.empty(); }

  // Casts the tensors among an op's arguments as the op's policy says, before it runs.
  void cast_arguments(const std::string& op, const std::string& spelling, ops::Args& args);
  // The same for an operator's operands (`@`, `**`, number / tensor).
  void cast_operands(const std::string& op, std::vector<Tensor*> operands);

  // Storage ids of every cast copy made so far (the accountant's "autocast copies").
  const std::set<int64_t>& cast_storages() const { return cast_storages_; }
  // Of those, the cached casts of float32 leaves that require grad (weights, in a model).
  const std::set<int64_t>& leaf_cast_storages() const { return leaf_cast_storages_; }
  // The innermost region's dtype for a device type, or nullptr when none is active.
  const DType* dtype_for(const std::string& device_type) const;

 private:
  struct Region {
    std::string device_type;
    DType dtype;
  };
  // cached_cast: an eligible tensor of another dtype cast with .to(); a float32 leaf that
  // requires grad and is not a view, cast to the region's low dtype, is cast once per
  // outermost region (the cache key is the tensor object, as TensorImpl* is in PyTorch).
  Tensor cached_cast(DType to, const Tensor& t, const std::string& device_type, DType low);
  Tensor make_cast(DType to, const Tensor& t);
  bool eligible(const Tensor& t, const std::string& device_type) const;
  // Applies `policy` of a device type to the given tensors (first: the first tensor argument).
  DType target_dtype(ops::CastPolicy policy, const std::vector<Tensor*>& ts, const std::string& device_type,
                     DType low) const;
  void publish() const;  // sets ops::autocast_query() from the regions
  void refuse(const std::string& op, const std::string& spelling, const std::string& device_type,
              ops::CastPolicy policy) const;

  std::vector<Region> regions_;
  std::map<const TensorImpl*, std::pair<Weak<TensorImpl>, Tensor>> cache_;
  std::set<int64_t> cast_storages_;
  std::set<int64_t> leaf_cast_storages_;
};

}  // namespace agtrace
