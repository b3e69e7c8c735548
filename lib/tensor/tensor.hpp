// Storage, version counters and tensor objects.
//
// Mirrors PyTorch's split between a Storage (bytes; shared by every view of it) and a
// TensorImpl (sizes, strides, offset, autograd metadata). A Python-level tensor object
// is a Shared<TensorImpl>: `a is b` compares the pointers, and the tensor's
// id (creation order) names it in reports.
//
// Element data is computed in double and rounded to the tensor's dtype after every write
// (round_to_dtype), so float32 results match PyTorch to float precision while every op
// is written once. A float32 storage holds float (4 bytes an element: half the memory
// traffic, and BLAS sgemm reads and writes it in place, issue #6); every other dtype holds
// double, already rounded to the dtype. Bytes are always accounted at the dtype's real
// element size.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tensor/dtype.hpp"
#include "tensor/interned_shape.hpp"
#include "util/shared.hpp"
#include "util/interned_string.hpp"

namespace agtrace {

namespace autograd {
struct Node;
}

// "cpu", interned once: every storage starts there (read inline, no guard; issue #6).
namespace detail {
extern const InternedString g_interned_cpu_device;
}  // namespace detail
inline const InternedString& interned_cpu_device() { return detail::g_interned_cpu_device; }

// Laid out small (issue #6): a storage is made per tensor and kept while anything holds it,
// so its bytes are graph memory on a long chain (a saved value's storage is read again in
// backward): 192 -> 128 bytes, with its shared_ptr block the pool's 160-byte class, not 224.
struct Storage {
  int64_t id = 0;
  int64_t numel = 0;
  InternedString device = interned_cpu_device();  // "cpu" or "cuda" (allocation_device() when made)
  DType dtype = DType::Float32;
  bool meta = false;          // meta device: no element data

  // zero_fill false: the elements start undefined and the caller writes every one before
  // anything reads them (op results: the zero-fill cost ~5% of mlp_step, issue #6).
  // Made on allocation_device() (tensor/device_backend.hpp): a cuda storage's elements are
  // in a buffer of the run's DeviceBackend, not in host memory.
  Storage(DType d, int64_t n, bool is_meta, bool zero_fill = true);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  int64_t nbytes() const { return numel * dtype_size(dtype); }

  // Which representation holds the elements: float for float32, double otherwise, on the
  // host. The accessors check it: a wrong-typed access aborts instead of reading garbage (a
  // bug), and host access to a cuda storage raises `unsupported` naming the op (an op with
  // no CUDA kernel, as PyTorch raises NotImplementedError). Meta storages have no elements
  // (null pointers).
  bool holds_float() const { return dtype == DType::Float32; }
  bool on_device() const { return rep_ == Rep::Device; }
  float* f32() { check(Rep::Float); return static_cast<float*>(data_); }
  const float* f32() const { check(Rep::Float); return static_cast<const float*>(data_); }
  double* f64() { check(Rep::Double); return static_cast<double*>(data_); }
  const double* f64() const { check(Rep::Double); return static_cast<const double*>(data_); }
  // The device buffer of a cuda storage (null for an empty one); null on the host.
  void* device_data() const { return device_data_; }
  // Elements held (numel unless meta) and bytes they take in this process's memory (a
  // cuda storage takes none: its bytes are the device allocator's).
  int64_t held_elements() const { return meta ? 0 : numel; }
  int64_t held_bytes() const;
  // Element i as double / set to v rounded to the dtype (per-element; loops use f32()/f64()).
  double get(int64_t i) const {
    if (rep_ == Rep::Float) return static_cast<double>(static_cast<const float*>(data_)[static_cast<size_t>(i)]);
    if (rep_ != Rep::Double) not_on_host();
    return static_cast<const double*>(data_)[static_cast<size_t>(i)];
  }
  void set(int64_t i, double v) {
    if (rep_ == Rep::Float) {
      static_cast<float*>(data_)[static_cast<size_t>(i)] = static_cast<float>(v);
      return;
    }
    if (rep_ != Rep::Double) not_on_host();
    static_cast<double*>(data_)[static_cast<size_t>(i)] = round_to_dtype(v, dtype);
  }

 private:
  enum class Rep : unsigned char { Float, Double, Device };
  void check(Rep want) const {
    if (want != rep_) wrong_representation(want);
  }
  [[noreturn]] void wrong_representation(Rep want) const;
  [[noreturn]] void not_on_host() const;
  // The constructor's rare paths, out of line so that its common one (a host storage
  // within budget) saves and restores fewer registers (issue #6).
  void make_on_device(bool zero_fill);
  void release_heap() noexcept;
  Rep rep_ = Rep::Float;
  bool large_ = false;
  // The host elements (null when meta): float32 as float, other dtypes as double (rep_
  // says which).
  void* data_ = nullptr;
  void* device_data_ = nullptr;     // cuda: the backend's buffer
  // Elements of up to kInlineBytes live in the storage object itself (issue #6): a small
  // tensor's values are read right after its storage (backward reads a saved value's storage,
  // then its data), and in their own heap block that was a second cache miss waiting on the
  // first, and one more allocation per tensor. Larger ones are in heap_: from operator new
  // below large_blocks::kMinBytes, from the large-block arena (util/large_blocks.hpp) from
  // there on (large_ says which).
  void* heap_ = nullptr;
  static constexpr size_t kInlineBytes = 64;
  alignas(16) unsigned char inline_data_[kInlineBytes];
};

// PyTorch keeps one version counter per view family: views and detach() share it, and
// every in-place op bumps it once (c10::VariableVersion).
struct VersionCounter {
  int64_t version = 0;
  int last_bump_statement = -1;
  void bump();
};

struct TensorImpl;
using Tensor = Shared<TensorImpl>;

struct TensorImpl {
  int64_t id = 0;
  Shared<Storage> storage;
  InternedShape sizes, strides;  // one pointer each (tensor/interned_shape.hpp)
  int64_t offset = 0;
  Shared<VersionCounter> version;

  // Autograd metadata (torch::autograd::AutogradMeta).
  bool requires_grad_flag = false;          // for leaves
  // The object observer's index of this tensor (HolderTracker's recycled state slot), kept
  // here so that its state is found without a table indexed by every tensor id ever made
  // (issue #6). In the padding after the flag: the object does not grow.
  uint32_t observer_slot = UINT32_MAX;
  Shared<autograd::Node> grad_fn;  // null for leaves
  int output_nr = 0;
  Weak<autograd::Node> grad_accumulator;  // AccumulateGrad of a leaf (weak, as PyTorch)
  Tensor grad;
  Tensor base;  // _base of a view (the tensor the view family started from)
  int64_t grad_fn_version = 0;  // version counter value when grad_fn was last set (views)
  // Set on the outputs of a function that returns several views (split, chunk, unbind):
  // PyTorch refuses in-place edits of them while they take part in autograd. Interned: 8
  // bytes in every tensor, not a string's 32 (issue #6).
  InternedString multi_output_node;
  bool is_view() const { return base != nullptr; }
  bool is_wrapped_number = false;  // a Python scalar turned into a 0-d tensor
  // t.retain_grad() on a non-leaf: backward fills its .grad (a retained gradient).
  bool retains_grad = false;
  // A view made with grad mode off (PyTorch's CreationMeta::NO_GRAD_MODE): its grad_fn is
  // never regenerated after an in-place edit of its family.
  bool view_made_in_no_grad = false;
  size_t registry_slot = 0;        // position in the live-tensor registry (O(1) removal)

  TensorImpl();
  ~TensorImpl();

  DType dtype() const { return storage->dtype; }
  int64_t dim() const { return static_cast<int64_t>(sizes.size()); }
  int64_t numel() const;
  // A view requires grad when its base does, even with no grad_fn of its own (a view taken
  // before its base joined a graph, or in no_grad; torch 1.13 VariableHooks::requires_grad,
  // measured: b = a[:]; a.requires_grad_() gives b.requires_grad True, b.grad_fn None).
  bool requires_grad() const { return requires_grad_flag || grad_fn != nullptr || (base && base->requires_grad()); }
  bool is_leaf() const { return grad_fn == nullptr; }
  bool is_contiguous() const;
  bool is_meta() const { return storage->meta; }
  int64_t nbytes() const { return numel() * dtype_size(dtype()); }
};

// Registry of live tensor objects, in creation order, for the accountant's holder scan.
const std::vector<TensorImpl*>& live_tensors();
// Stops listing the tensors alive now: a run starts with none of an earlier run's objects
// in view. Objects a reference cycle keeps alive after their run (h.mul_(h): the node saves
// h, whose grad_fn is that node) would otherwise carry ids the new run gives again, and the
// new run's node snapshots and holder scans would read them (measured: `check` of
// measured_mul_inplace_by_itself.json then a create_graph scenario reported the first
// scenario's MulBackward0 in the second's walk).
void forget_live_tensors();

// Told when tensor objects and backward nodes are created or destroyed and when a tensor's
// .grad is replaced, so the interpreter's holder index (lib/interp/holder_tracker) keeps
// what holds each storage up to date from changes alone. Walking every live tensor and
// node after every statement instead made a program that keeps its graph quadratic in its
// length (issue #6: chains of 1,000/2,000/4,000 ops took 0.55/2.2/12 s).
class ObjectObserver {
 public:
  virtual ~ObjectObserver() = default;
  virtual void tensor_created(TensorImpl& t) = 0;
  virtual void tensor_destroyed(TensorImpl& t) = 0;
  virtual void tensor_grad_changed(TensorImpl& t) = 0;
  virtual void node_created(autograd::Node& n) = 0;
  virtual void node_destroyed(autograd::Node& n) = 0;
  // What a node holds changed without a new node (an AccumulateGrad whose leaf took new data).
  virtual void node_changed(autograd::Node& n) = 0;
};
// The observer of the run in progress (single-threaded, one run at a time); null = none.
namespace detail {
extern ObjectObserver* g_object_observer;  // read inline: every tensor and node asks (issue #6)
}  // namespace detail
inline ObjectObserver* object_observer() { return detail::g_object_observer; }
void set_object_observer(ObjectObserver* observer);
// Call after assigning or clearing t->grad.
inline void notify_grad_changed(TensorImpl& t) {
  if (ObjectObserver* o = object_observer()) o->tensor_grad_changed(t);
}

Shape contiguous_strides(const Shape& sizes);
// Whether elements laid out with these sizes and strides are contiguous (size-1 dims: any stride).
bool is_contiguous_layout(const Shape& sizes, const Shape& strides);
int64_t shape_numel(const Shape& s);
std::string shape_str(const Shape& s);  // "[2, 3]"

// A new contiguous tensor with its own storage (zero-filled). Sizes taken as an interned
// shape: a result shaped as an operand (`a->sizes`) copies its pointer instead of hashing
// the dimensions again (issue #6: a lookup per tensor made); a Shape converts.
Tensor empty_tensor(const InternedShape& sizes, DType dtype, bool meta);
// The same with undefined elements, for a kernel that writes every element of its result.
Tensor uninitialized_tensor(const InternedShape& sizes, DType dtype, bool meta);
Tensor tensor_from_values(const Shape& sizes, DType dtype, const std::vector<double>& values);
Tensor scalar_tensor(double v, DType dtype);
// A new tensor on `device` ("cpu" or "cuda") with t's elements converted to `dtype`
// (Tensor.to's copy, rounding as PyTorch's casts do), contiguous or with `strides` (dense,
// over a storage of t's numel): the one place elements cross between host and device
// memory. Meta in, meta out (no elements).
Tensor copy_to(const Tensor& t, DType dtype, const std::string& device, const Shape* strides = nullptr);
// t's elements, row-major, as double, wherever they live: a device tensor is copied to the
// host (what PyTorch does to print a CUDA tensor or read .item()). For reports and
// printing, never for an op's arithmetic (ops use to_values, which refuses device data).
std::vector<double> host_values(const Tensor& t);
// A new tensor object over the same storage (a view or an alias), sharing the version counter.
Tensor make_alias(const Tensor& src, const Shape& sizes, const Shape& strides, int64_t offset);

// Element values in row-major order (gathers through strides). Meta: empty.
std::vector<double> to_values(const Tensor& t);
double item(const Tensor& t);
// Writes row-major values through the tensor's strides, rounding to its dtype.
void write_values(const Tensor& t, const std::vector<double>& values);
// write_values(dst, to_values(src)) for src of dst's shape: when both are on the host with
// one dtype, element for element in the storage's own type, with no double round trip (the
// same bits: a value of a dtype rounds to itself); otherwise through doubles.
void copy_values(const Tensor& dst, const Tensor& src);
// What allocating a tensor of `sizes` would raise, without allocating it: PyTorch's
// "Storage size calculation overflowed" and the memory budget's `limit` (a creation op that
// computes its values first calls it before building them).
void check_allocation(const Shape& sizes, DType dtype);
// The storage's elements as double: its own array when it holds double, else a copy of
// the whole storage in `copy` (same offsets). Meta: null.
const double* storage_as_double(const Storage& s, std::vector<double>& copy);

// Calls f(linear_index, storage_offset) for every element in row-major order.
template <typename F>
void for_each_offset(const Shape& sizes, const Shape& strides, int64_t offset, F&& f) {
  const int64_t n = shape_numel(sizes);
  const size_t nd = sizes.size();
  std::vector<int64_t> idx(nd, 0);
  int64_t off = offset;
  for (int64_t i = 0; i < n; ++i) {
    f(i, off);
    for (size_t d = nd; d-- > 0;) {
      if (++idx[d] < sizes[d]) {
        off += strides[d];
        break;
      }
      off -= strides[d] * (sizes[d] - 1);
      idx[d] = 0;
    }
  }
}

}  // namespace agtrace
