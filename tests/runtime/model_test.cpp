#include <catch2/catch.hpp>

#include <optional>
#include <string_view>
#include <utility>

#include <ingest/ingest.hpp>
#include <ingest/runtime/model.hpp>

using namespace ingest::detail;

TEST_CASE("iterators of the same stage share one node", "[runtime][model]") {
  Model m;
  StageNode* root = m.node(nullptr, "batch");
  StageNode* a = m.node(root, "map");
  StageNode* b = m.node(root, "map");
  StageNode* c = m.node(a, "range");
  CHECK(a == b);
  CHECK(a != c);
  CHECK(root->depth() == 0);
  CHECK(c->depth() == 2);
  CHECK(c->parent() == a);
  std::vector<std::string> order;
  m.for_each([&](StageNode& n) { order.push_back(n.name()); });
  CHECK(order == std::vector<std::string>{"batch", "map", "range"});
  CHECK(m.inputs(root) == std::vector<StageNode*>{a});
}

TEST_CASE("knobs are fixed or tunable, and the first iterator sets them", "[runtime][model]") {
  Knob fixed;
  configure_knob(fixed, 4, 1, 8, 2);
  CHECK_FALSE(fixed.tunable());
  CHECK(fixed.get() == 4);
  Knob tuned;
  configure_knob(tuned, -1, 1, 8, 20);
  CHECK(tuned.tunable());
  CHECK(tuned.get() == 8);  // clamped to the range
  tuned.value = 3;
  configure_knob(tuned, -1, 1, 8, 5);  // a second iterator of the stage
  CHECK(tuned.get() == 3);
}

TEST_CASE("buffer occupancy keeps its peak", "[runtime][model]") {
  StageNode n("prefetch", nullptr, 0);
  n.set_buffered(3);
  n.set_buffered(7);
  n.set_buffered(2);
  CHECK(n.buffered.load() == 2);
  CHECK(n.buffered_peak.load() == 7);
  n.sampled_bytes = 300;
  n.bytes_samples = 3;
  CHECK(n.bytes_per_element() == Approx(100));
}

TEST_CASE("the model records trace events up to a bound", "[runtime][model]") {
  Model m;
  CHECK_FALSE(m.tracing());
  m.enable_trace();
  m.trace({"map", 'X', 1, 2, thread_number(), {}});
  CHECK(m.trace_events().size() == 1);
  m.record_consumer(1000, 10);
  CHECK(m.consumer_ns_per_element() == Approx(100));
}

// ---- the control plane is open: a stage declares its own model ----------------

namespace {

// A made-up async stage's model: `parallelism` workers on the pool, each
// element costing its own time divided among them, plus a fixed hand-off of
// 1 us per element; its buffer is one element per worker.
class HandOffNode : public StageNode {
 public:
  using StageNode::StageNode;
  double modelled_time(double self_ns, KnobValues k, double consumer_ns,
                       const InputsTime& inputs) const override {
    return 1'000 + inputs(consumer_ns) + self_ns / static_cast<double>(k.parallelism);
  }
  double buffered_bytes(KnobValues k, double bytes) const override {
    return static_cast<double>(k.parallelism) * bytes;
  }
  double cpu_demand(KnobValues k) const override { return static_cast<double>(k.parallelism); }
  bool async() const noexcept override { return true; }
  bool shows_parallelism() const noexcept override { return true; }
};

// A pass-through stage declaring that model, with a fixed parallelism of 3.
template <class InputIt>
class HandOffIterator {
 public:
  using value_type = typename InputIt::value_type;
  explicit HandOffIterator(InputIt input) : input_(std::move(input)) {}
  std::optional<value_type> next() { return input_.next(); }

 private:
  InputIt input_;
};

template <class Input>
class HandOffDataset
    : public ingest::DatasetBase<HandOffDataset<Input>, typename Input::element_type> {
 public:
  static constexpr std::string_view stage_name = "hand_off";
  using model_node = HandOffNode;

  explicit HandOffDataset(Input input) : input_(std::move(input)) {}
  auto make_iterator(const ingest::IteratorContext& ctx) const {
    if (ctx.node) configure_knob(ctx.node->parallelism, 3, 1, 8, 3);
    return HandOffIterator<child_iterator_t<Input>>(child_iterator(input_, ctx));
  }

 private:
  Input input_;
};

}  // namespace

TEST_CASE("a stage's own node type is tuned and shown without touching the autotuner or stats",
          "[runtime][model]") {
  SECTION("the autotuner applies its formula, budget and buffers") {
    HandOffNode n("hand_off", nullptr, 0);
    configure_knob(n.parallelism, ingest::autotune, 1, 8, 1);
    NodeView v;
    v.node = &n;
    v.self_ns = 40'000;
    v.elements = 1000;
    v.bytes = 100;
    Optimizer optimizer({v}, 0);
    optimizer.optimize({.cpu = 4, .ram_bytes = 1e12});
    CHECK(optimizer.parallelism(0) == 4);  // the CPU budget: it uses the pool
    CHECK(optimizer.output_time() == Approx(1'000 + 40'000.0 / 4));
    CHECK(optimizer.buffered_bytes() == Approx(400));
    Optimizer tight({v}, 0);
    tight.optimize({.cpu = 8, .ram_bytes = 250});
    CHECK(tight.parallelism(0) == 2);  // the RAM budget: 2 x 100 bytes
  }
  SECTION("stats() shows its knob as its node type says") {
    auto it = HandOffDataset(ingest::range(100)).iterator();
    while (it.next()) {
    }
    const ingest::PipelineStats stats = it.stats();
    REQUIRE(stats.stages.size() == 2);
    CHECK(stats.stages[0].name == "hand_off");
    CHECK(stats.stages[0].parallelism == 3);
    CHECK(stats.stages[0].elements == 100);
    CHECK(stats.stages[1].name == "range");
    CHECK(stats.stages[1].parallelism == 0);
  }
}
