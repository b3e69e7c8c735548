// Nodes, edges, saved variables and version counters (lib/autograd/node.cpp), checked
// against PyTorch 1.13's SavedVariable and VariableVersion behaviour.
#include <catch2/catch.hpp>

#include "support/gradcheck.hpp"

#include <limits>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "autograd/grad_mode.hpp"
#include "autograd/node.hpp"
#include "errors.hpp"
#include "interp/value.hpp"
#include "ops/ops.hpp"
#include "tensor/events.hpp"
#include "tensor/tensor.hpp"

using agtrace::DType;
using agtrace::Event;
using agtrace::ScenarioError;
using agtrace::Shape;
using agtrace::Tensor;
using agtrace::Value;
using agtrace::autograd::AttrValue;
using agtrace::autograd::Node;
namespace ops = agtrace::ops;
namespace autograd = agtrace::autograd;

namespace {

Tensor A(const Shape& shape, bool requires_grad = true, DType dtype = DType::Float32) {
  return agtrace::test::linspace_leaf(shape, -1.0, 1.0, requires_grad, dtype);
}
Tensor num(double v) { return ops::wrap_number(Value::real(v)); }
Tensor one() { return ops::wrap_number(Value::integer(1)); }

// Records events while alive, then restores the previous sink.
struct RecordingSink : agtrace::EventSink {
  std::vector<Event> events;
  agtrace::EventSink* previous;
  RecordingSink() : previous(agtrace::event_sink()) { agtrace::set_event_sink(this); }
  ~RecordingSink() override { agtrace::set_event_sink(previous); }
  void on_event(const Event& e) override { events.push_back(e); }
  std::vector<Event> of(Event::Kind k) const {
    std::vector<Event> out;
    for (const auto& e : events)
      if (e.kind == k) out.push_back(e);
    return out;
  }
};

// Unpacks and returns the error it raised; fails the test if it did not raise.
ScenarioError unpack_error(Node& n, const std::string& attr) {
  try {
    n.unpack(attr);
  } catch (const ScenarioError& e) {
    return e;
  }
  FAIL("unpack of " << attr << " did not raise");
  return ScenarioError("", "");
}

}  // namespace

// ---------------------------------------------------------------- version counters

TEST_CASE("node: views and detach share the version counter - clone does not", "[node][version]") {
  Tensor a = A({2, 3}, false);
  Tensor v = ops::select(a, 0, 1);
  Tensor s = ops::slice(a, 1, 1, std::nullopt, 1);
  Tensor t = ops::t(a);
  Tensor d = ops::detach(a);
  Tensor c = ops::clone(a);
  for (const Tensor& x : {v, s, t, d}) CHECK(x->version == a->version);
  CHECK(c->version != a->version);

  ops::mul_(v, num(2.0));  // one in-place op through a view bumps the family once
  CHECK(a->version->version == 1);
  CHECK(s->version->version == 1);
  CHECK(d->version->version == 1);
  CHECK(c->version->version == 0);
  ops::zero_(d);
  CHECK(a->version->version == 2);
  CHECK(agtrace::to_values(a) == std::vector<double>(6, 0.0));
  ops::add_(c, one(), Value::integer(1));
  CHECK(a->version->version == 2);
  CHECK(c->version->version == 1);
}

TEST_CASE("node: every in-place op bumps the version once and announces it", "[node][version]") {
  Tensor x = A({2, 3});
  Tensor h = ops::mul(x, one());
  RecordingSink sink;
  ops::add_(h, one(), Value::integer(1));
  ops::exp_(h);
  ops::zero_(h);
  CHECK(h->version->version == 3);
  auto bumps = sink.of(Event::Kind::VersionBump);
  REQUIRE(bumps.size() == 3);
  CHECK(bumps[0].version == 1);
  CHECK(bumps[2].version == 3);
  CHECK(bumps[0].storage_id == h->storage->id);
}

// ---------------------------------------------------------------- edges

TEST_CASE("node: gradient edges point to grad_fn or to one AccumulateGrad per leaf", "[node][edge]") {
  Tensor x = A({2, 3}), c = A({2, 3}, false);
  autograd::Edge ex = autograd::gradient_edge(x);
  REQUIRE(ex.fn != nullptr);
  CHECK(ex.fn->name == "AccumulateGrad");
  CHECK(ex.fn->qualified_name() == "torch::autograd::AccumulateGrad");
  CHECK(ex.fn->variable == x);
  CHECK(ex.fn->sequence_nr() == std::numeric_limits<uint64_t>::max());
  // While the accumulator is alive, every edge to x reaches the same one.
  CHECK(autograd::gradient_edge(x).fn == ex.fn);
  CHECK(autograd::gradient_edge(c).fn == nullptr);
  Tensor z = ops::mul(x, c);
  CHECK(autograd::gradient_edge(z).fn == z->grad_fn);
  CHECK(z->grad_fn->next[0].fn == ex.fn);
  CHECK(z->grad_fn->next[1].fn == nullptr);
  CHECK(z->grad_fn->qualified_name() == "MulBackward0");
  // Nodes are numbered in creation order.
  Tensor w = ops::exp(z);
  CHECK(w->grad_fn->id > z->grad_fn->id);
  CHECK(w->grad_fn->sequence_nr() > z->grad_fn->sequence_nr());
  // input metadata is kept for backward formulas
  REQUIRE(z->grad_fn->input_meta.size() == 2);
  CHECK(z->grad_fn->input_meta[1].sizes == (Shape{2, 3}));
}

// ---------------------------------------------------------------- saved variables

TEST_CASE("node: save_input keeps the object, save_output only its data", "[node][saved]") {
  Tensor x = A({2, 3});
  Tensor out = ops::exp(x);
  auto node = autograd::make_node("TestBackward0", nullptr, {x});
  autograd::set_history(out, node);
  node->save_input("self", x);
  node->save_output("result", out, 0);
  node->save_input("unused", x, /*needed=*/false);
  node->save_attr("dim", AttrValue::integer(-1, true));

  CHECK(node->unpack("self") == x);
  Tensor r = node->unpack("result");
  CHECK(r != out);
  CHECK(r->storage == out->storage);
  CHECK(r->grad_fn == node);
  CHECK(node->unpack("unused") == nullptr);
  CHECK(node->unpack("no_such_attr") == nullptr);
  CHECK(attr_repr(node->attr("dim")) == "18446744073709551615");
  CHECK(node->attr("absent").kind == AttrValue::Kind::None);
  CHECK(node->saved_bytes() == 48);
  CHECK(node->find("unused")->var.nbytes() == 0);
  CHECK(node->find("self")->var.saved_version == 0);
}

TEST_CASE("node: attr_repr prints as Python does", "[node][saved]") {
  CHECK(attr_repr(AttrValue::integer(1)) == "1");
  CHECK(attr_repr(AttrValue::integer(-100)) == "-100");
  CHECK(attr_repr(AttrValue::integer(-100, true)) == "18446744073709551516");
  CHECK(attr_repr(AttrValue::real(2.0)) == "2.0");
  CHECK(attr_repr(AttrValue::real(0.1)) == "0.1");
  CHECK(attr_repr(AttrValue::real(1e-05)) == "1e-05");
  CHECK(attr_repr(AttrValue::boolean(false)) == "False");
  CHECK(attr_repr(AttrValue::ints({2, 3})) == "(2, 3)");
  CHECK(attr_repr(AttrValue::ints({1})) == "(1,)");
  CHECK(attr_repr(AttrValue::ints({})) == "()");
  CHECK(attr_repr(AttrValue::ints({0, -1}, true)) == "(0, 18446744073709551615)");
  CHECK(attr_repr(AttrValue::string("none")) == "'none'");
  CHECK(attr_repr(AttrValue::none()) == "None");
}

TEST_CASE("node: save and release are announced with their bytes", "[node][saved][events]") {
  RecordingSink sink;
  Tensor x = A({2, 3}), W = A({3, 4});
  Tensor y = ops::mm(x, W);
  auto saves = sink.of(Event::Kind::Save);
  REQUIRE(saves.size() == 2);
  CHECK(saves[0].what == "MmBackward0._saved_mat2");
  CHECK(saves[0].bytes == 48);
  CHECK(saves[0].storage_id == W->storage->id);
  CHECK(saves[1].what == "MmBackward0._saved_self");
  CHECK(saves[1].bytes == 24);
  CHECK(saves[1].node_id == y->grad_fn->id);

  y->grad_fn->release_saved(7);
  auto releases = sink.of(Event::Kind::Release);
  REQUIRE(releases.size() == 2);
  CHECK(releases[0].saved_id == saves[0].saved_id);
  CHECK(releases[1].bytes == 24);
  CHECK(y->grad_fn->released);
  CHECK(y->grad_fn->released_at == 7);
  CHECK(y->grad_fn->saved_bytes() == 0);
  // A second release announces nothing more.
  y->grad_fn->release_saved(8);
  CHECK(sink.of(Event::Kind::Release).size() == 2);
  // What was saved stays known for reports.
  CHECK(y->grad_fn->find("mat2")->var.shape == (Shape{3, 4}));
  // Non-tensor attributes stay readable; tensors raise.
  CHECK(attr_repr(y->grad_fn->attr("self_sym_sizes")) == "(2, 3)");
  ScenarioError e = unpack_error(*y->grad_fn, "self");
  CHECK(e.kind == "saved_tensors_freed");
  CHECK(std::string(e.what()).find("Trying to backward through the graph a second time") == 0);
}

TEST_CASE("node: a node's death releases what it saved", "[node][saved][events]") {
  RecordingSink sink;
  Tensor x = A({2, 3});
  {
    Tensor e = ops::exp(x);
    CHECK(sink.of(Event::Kind::Save).size() == 1);
  }
  auto releases = sink.of(Event::Kind::Release);
  REQUIRE(releases.size() == 1);
  CHECK(releases[0].bytes == 24);
}

// ---------------------------------------------------------------- version check at unpack

TEST_CASE("node: a saved output edited in place raises at unpack, naming the saving node", "[node][version]") {
  Tensor x = A({2, 3});
  Tensor e = ops::exp(x);
  Node& n = *e->grad_fn;
  CHECK_NOTHROW(n.unpack("result"));
  ops::add_(e, one(), Value::integer(1));
  CHECK(e->grad_fn->name == "AddBackward0");
  ScenarioError err = unpack_error(n, "result");
  CHECK(err.kind == "saved_tensor_modified");
  CHECK(err.facts["expected_version"] == 0);
  CHECK(err.facts["found_version"] == 1);
  CHECK(err.facts["tensor_type"] == "FloatTensor");
  CHECK(err.facts["node"] == "ExpBackward0");
  CHECK(err.facts["attribute"] == "_saved_result");
  CHECK(std::string(err.what()).find(
            "[torch.FloatTensor [2, 3]], which is output 0 of ExpBackward0, is at version 1; expected version 0 "
            "instead") != std::string::npos);
}

TEST_CASE("node: a saved leaf edited under no_grad raises without a 'which is output' part", "[node][version]") {
  Tensor x = A({2, 3});
  Tensor y = ops::mul(x, x);
  {
    autograd::GradModeGuard no_grad(false);
    ops::add_(x, one(), Value::integer(1));
  }
  ScenarioError err = unpack_error(*y->grad_fn, "self");
  CHECK(err.kind == "saved_tensor_modified");
  const std::string msg = err.what();
  CHECK(msg.find("[torch.FloatTensor [2, 3]] is at version 1; expected version 0 instead") != std::string::npos);
  CHECK(msg.find("which is output") == std::string::npos);
}

TEST_CASE("node: a saved non-leaf input names its current grad_fn", "[node][version]") {
  Tensor x = A({2, 3}, true, DType::Float64);
  SECTION("edited by add_: AddBackward0") {
    Tensor h = ops::mul(x, num(2.0));
    Tensor p = ops::pow_scalar(h, Value::integer(2));
    ops::add_(h, one(), Value::integer(1));
    ScenarioError err = unpack_error(*p->grad_fn, "self");
    CHECK(std::string(err.what()).find("[torch.DoubleTensor [2, 3]], which is output 0 of AddBackward0, is at "
                                       "version 1; expected version 0 instead") != std::string::npos);
    CHECK(err.facts["tensor_type"] == "DoubleTensor");
  }
  SECTION("edited through detach(): still MulBackward0") {
    Tensor h = ops::mul(x, num(2.0));
    Tensor p = ops::pow_scalar(h, Value::integer(2));
    ops::zero_(ops::detach(h));
    CHECK(h->version->version == 1);
    ScenarioError err = unpack_error(*p->grad_fn, "self");
    CHECK(std::string(err.what()).find("which is output 0 of MulBackward0, is at version 1; expected version 0") !=
          std::string::npos);
  }
  SECTION("two edits: found version 2") {
    Tensor h = ops::mul(x, num(2.0));
    Tensor p = ops::pow_scalar(h, Value::integer(2));
    ops::add_(h, one(), Value::integer(1));
    ops::mul_(h, num(3.0));
    ScenarioError err = unpack_error(*p->grad_fn, "self");
    CHECK(err.facts["found_version"] == 2);
    CHECK(err.facts["expected_version"] == 0);
    CHECK(std::string(err.what()).find("output 0 of MulBackward0") != std::string::npos);
  }
}

TEST_CASE("node: an in-place activation's saved result expects the bumped version", "[node][version]") {
  Tensor x = A({2, 3});
  Tensor h = ops::mul(x, one());
  ops::exp_(h);
  Node* first = h->grad_fn.get();
  CHECK(first->find("result")->var.saved_version == 1);
  CHECK_NOTHROW(first->unpack("result"));
  ops::exp_(h);  // PyTorch: the first ExpBackward0 now fails (expected 1, found 2)
  ScenarioError err = unpack_error(*first, "result");
  CHECK(err.facts["expected_version"] == 1);
  CHECK(err.facts["found_version"] == 2);
  CHECK_NOTHROW(h->grad_fn->unpack("result"));
}

// ---------------------------------------------------------------- saved-tensor hooks

namespace {
// Hooks whose pack raises (as a pack whose copy exceeds the memory budget does), after the
// first `good` packs.
struct FailingPack : autograd::SavedTensorHooks {
  int good = 0, packs = 0;
  std::string kind() const override { return "count"; }
  Tensor pack(autograd::SavedVariable&, const Tensor& t) override {
    if (packs++ >= good) throw ScenarioError("limit", "pack refused");
    return t;
  }
  Tensor unpack(autograd::SavedVariable& v) override { return v.packed(); }
};
}  // namespace

TEST_CASE("node: a pack that raises leaves no saved entry and announces no save", "[node][saved][hooks]") {
  RecordingSink sink;
  Tensor x = A({2, 3}), y = A({2, 3});
  auto hooks = std::make_shared<FailingPack>();
  hooks->good = 1;  // the first save is packed, the second raises
  auto node = autograd::make_node("MulBackward0", nullptr, {x, y}, 2);
  {
    autograd::SavedHooksGuard guard(hooks);
    node->save_input("other", y);
    REQUIRE(node->saved.size() == 1);
    CHECK_THROWS_AS(node->save_input("self", x), ScenarioError);
    CHECK_THROWS_AS(node->save_output("result", x, 0), ScenarioError);
  }
  // Only the entry whose pack succeeded is there, complete, and only its save was announced.
  REQUIRE(node->saved.size() == 1);
  CHECK(node->saved[0].name == "other");
  CHECK(node->saved[0].var.defined);
  CHECK(node->saved[0].var.packed() == y);
  CHECK(node->find("self") == nullptr);
  CHECK(node->find("result") == nullptr);
  auto saves = sink.of(Event::Kind::Save);
  REQUIRE(saves.size() == 1);
  CHECK(saves[0].what == "MulBackward0._saved_other");
  CHECK(node->saved_bytes() == 24);
  // Without hooks the node saves as usual afterwards.
  node->save_input("self", x);
  CHECK(node->saved.size() == 2);
  CHECK(sink.of(Event::Kind::Save).size() == 2);
}

TEST_CASE("EdgeList: two edges inside, more on the heap, in order either way", "[autograd][node]") {
  // Distinct nodes as edge targets, so that order and ownership can be told apart.
  std::vector<agtrace::Shared<Node>> targets;
  for (int i = 0; i < 7; ++i) targets.push_back(agtrace::make_shared_object<Node>());
  for (size_t count : {size_t{0}, size_t{1}, size_t{2}, size_t{3}, size_t{7}}) {
    for (bool reserve_first : {false, true}) {
      INFO("edges " << count << (reserve_first ? ", reserved" : ""));
      autograd::EdgeList edges;
      if (reserve_first) edges.reserve(count);
      for (size_t i = 0; i < count; ++i) edges.push_back({i % 3 == 2 ? nullptr : targets[i], static_cast<int>(i)});
      REQUIRE(edges.size() == count);
      CHECK(edges.empty() == (count == 0));
      size_t i = 0;
      for (const autograd::Edge& e : edges) {
        CHECK(e.input_nr == static_cast<int>(i));
        CHECK(e.fn == (i % 3 == 2 ? nullptr : targets[i]));
        CHECK(&edges[i] == &e);
        ++i;
      }
      CHECK(i == count);
      size_t back = count;
      for (auto it = edges.rbegin(); it != edges.rend(); ++it) CHECK(it->input_nr == static_cast<int>(--back));
      CHECK(back == 0);
      // The list holds its targets: one reference each besides `targets`.
      for (size_t k = 0; k < count; ++k)
        if (k % 3 != 2) CHECK(targets[k].use_count() == 2);
    }
    for (const auto& t : targets) CHECK(t.use_count() == 1);  // released with the list
  }
}

// ---------------------------------------------------------------- reference counts

// Tensors, storages, version counters and nodes are counted without atomics
// (lib/util/shared.hpp, issue #6). The counts must stay exact once the process has a second
// thread, which is when std::shared_ptr switches to locked instructions (OpenBLAS starts
// its workers at load).
TEST_CASE("node: tensor, storage and node counts stay exact after another thread started", "[node][shared]") {
  static_assert(std::is_same_v<Tensor, agtrace::Shared<agtrace::TensorImpl>>);
  static_assert(std::is_same_v<decltype(agtrace::TensorImpl::storage), agtrace::Shared<agtrace::Storage>>);
  static_assert(std::is_same_v<decltype(agtrace::TensorImpl::version), agtrace::Shared<agtrace::VersionCounter>>);
  static_assert(std::is_same_v<decltype(agtrace::TensorImpl::grad_fn), agtrace::Shared<Node>>);
  std::thread([] {}).join();
  Tensor x = A({2, 3});
  Tensor z = ops::mul(x, x);
  agtrace::Shared<Node> fn = z->grad_fn;
  CHECK(fn.use_count() == 2);
  const long x_refs = x.use_count();  // x itself and the inputs MulBackward0 saved
  CHECK(x_refs >= 2);
  {
    std::vector<Tensor> copies(1000, z);
    std::vector<agtrace::Shared<Node>> nodes(1000, fn);
    CHECK(z.use_count() == 1001);
    CHECK(fn.use_count() == 1002);
    CHECK(fn->shared_from_this() == fn);
  }
  CHECK(z.use_count() == 1);
  CHECK(fn.use_count() == 2);
  agtrace::Weak<Node> weak = fn;
  CHECK(weak.lock() == fn);
  z.reset();
  fn.reset();
  CHECK(weak.expired());  // the node went with its last owner, and its saved inputs with it
  CHECK(x.use_count() < x_refs);
}
