#include <catch2/catch.hpp>

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
