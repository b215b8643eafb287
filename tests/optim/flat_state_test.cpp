// Flat optimizer state (UpdateOptions::flat_state): the PyTorch fixtures and hand cases run with
// the state in buckets must give torch's parameters and, cut back into parameters, the
// per-parameter layout's parameters and state bit for bit; the layout itself checked by hand.
#include <gtest/gtest.h>

#include "optim/fixture.h"
#include "optim/hand_cases.h"
#include "optim/stepper.h"
#include "support/error_of.h"

namespace tlaloc::optim {
namespace {
using namespace testing;

UpdateOptions flat(UpdateOptions o) {
  o.flat_state = true;
  return o;
}

// The flat stepper's state cut into parameters.
std::vector<Array> per_param(const Stepper& s) {
  return whole_state(*s.ts.flat, s.ts.state, [&](int j) { return s.state[size_t(j)]; });
}

void expect_bitwise(const std::vector<Array>& a, const std::vector<Array>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(a[i].bitwise_equal(b[i])) << what << " " << i;
}

int count_ops(const ir::Function& f, ir::Op op) {
  int n = 0;
  for (const ir::Node& nd : f.nodes) n += nd.op == op;
  return n;
}

class FlatState : public ::testing::TestWithParam<Engine> {};

TEST_P(FlatState, TorchFixturesGiveTorchsParametersAndThePerParameterBits) {
  for (const json& c : torch_fixtures().at("cases")) {
    const std::string name = c.at("name");
    SCOPED_TRACE(name);
    const Optimizer opt = optimizer_from(c);
    const std::vector<Shape> shapes = shapes_from(c);
    Stepper each(GetParam(), opt, options_from(c), arrays_from(c.at("init"), shapes));
    Stepper bucketed(GetParam(), opt, flat(options_from(c)), arrays_from(c.at("init"), shapes));
    ASSERT_TRUE(bucketed.ts.flat.has_value());
    // One update op per bucket, not per parameter.
    const int updates = count_ops(bucketed.ts.fn, ir::Op::adam_update) +
                        count_ops(bucketed.ts.fn, ir::Op::sgd_update);
    EXPECT_EQ(updates, int(bucketed.ts.flat->buckets.size()));
    EXPECT_LE(bucketed.ts.flat->buckets.size(), bucketed.ts.groups.size());
    const std::vector<double> lr = each.ts.group_lr();
    double vs_torch = 0;
    for (const json& s : c.at("steps")) {
      std::vector<Array> grads = arrays_from(s.at("grads"), shapes);
      EXPECT_FALSE(each.step(grads, lr));
      EXPECT_FALSE(bucketed.step(grads, lr));
      expect_bitwise(bucketed.params, each.params, "parameter");
      expect_bitwise(per_param(bucketed), each.state, "state slot");
      for (size_t i = 0; i < shapes.size(); ++i)
        vs_torch = std::max(vs_torch, max_rel_err(bucketed.params[i].to_doubles(),
                                                  s["params"][i].get<std::vector<double>>()));
      if (each.ts.has_grad_norm) {
        EXPECT_EQ(bucketed.last[size_t(bucketed.ts.grad_norm_output())].at(0),
                  each.last[size_t(each.ts.grad_norm_output())].at(0));
      }
    }
    EXPECT_LE(vs_torch, 1e-6);
  }
}

TEST_P(FlatState, HandCasesGiveTheirHandComputedParameters) {
  for (const HandCase& hc : hand_cases()) {
    SCOPED_TRACE(hc.name);
    std::vector<Array> init;
    for (const auto& v : hc.init)
      init.push_back(Array::from_doubles(DType::f32, Shape{int64_t(v.size())}, v));
    Stepper s(GetParam(), hc.opt, flat(hc.options), std::move(init));
    const std::vector<double> lr = s.ts.group_lr();
    for (const auto& g : hc.grads) {
      std::vector<Array> grads;
      for (const auto& v : g)
        grads.push_back(Array::from_doubles(DType::f32, Shape{int64_t(v.size())}, v));
      s.step(grads, lr, hc.grad_scale);
    }
    for (size_t i = 0; i < hc.expect.size(); ++i) {
      const std::vector<double> got = s.params[i].to_doubles();
      for (size_t k = 0; k < got.size(); ++k) EXPECT_NEAR(got[k], hc.expect[i][k], 1e-6);
    }
  }
}

TEST_P(FlatState, AnInfSkipsEveryBucketAndAnEmptyParameterIsKept) {
  // Params 0 and 2 in group "a", 1 (empty) and 3 in "b"; an inf in param 3's gradient.
  UpdateOptions o;
  o.flat_state = true;
  o.groups = {{"a", {0, 2}, 0.1, 0.0}, {"b", {1, 3}, 0.2, 0.5}};
  std::vector<Array> init{Array::from_doubles(DType::f32, Shape{2, 2}, {1, -2, 3, -4}),
                          Array(DType::f32, Shape{0, 3}),
                          Array::from_doubles(DType::f32, Shape{3}, {0.5, 0.25, -1}),
                          Array::from_doubles(DType::f32, Shape{2}, {7, 8})};
  Stepper s(GetParam(), AdamW{}, o, init);
  Stepper ref(
      GetParam(), AdamW{},
      [&] {
        UpdateOptions p = o;
        p.flat_state = false;
        return p;
      }(),
      init);
  auto grads = [](double last) {
    return std::vector<Array>{Array::from_doubles(DType::f32, Shape{2, 2}, {0.1, 0.2, 0.3, 0.4}),
                              Array(DType::f32, Shape{0, 3}),
                              Array::from_doubles(DType::f32, Shape{3}, {-1, 1, 2}),
                              Array::from_doubles(DType::f32, Shape{2}, {1, last})};
  };
  const std::vector<double> lr = s.ts.group_lr();
  EXPECT_FALSE(s.step(grads(3), lr));
  EXPECT_FALSE(ref.step(grads(3), lr));
  const std::vector<Array> params = s.params, state = s.state;
  EXPECT_TRUE(s.step(grads(INFINITY), lr));
  expect_bitwise(s.params, params, "parameter after a skipped step");
  expect_bitwise(s.state, state, "state after a skipped step");
  EXPECT_FALSE(s.step(grads(-2), lr));
  EXPECT_FALSE(ref.step(grads(-2), lr));
  expect_bitwise(s.params, ref.params, "parameter");
  expect_bitwise(per_param(s), ref.state, "state slot");
  EXPECT_EQ(s.params[1].shape(), (Shape{0, 3}));
}

INSTANTIATE_TEST_SUITE_P(Engines, FlatState, ::testing::Values(Engine::interpreter, Engine::host),
                         [](const auto& i) {
                           return i.param == Engine::host ? "host" : "interpreter";
                         });

TEST(FlatStateLayout, BucketsByGroupThenDtypeWithTheirOffsets) {
  const std::vector<ir::TensorType> masters{{DType::f32, Shape{2, 3}},
                                            {DType::f64, Shape{4}},
                                            {DType::f32, Shape{0}},
                                            {DType::f32, Shape{5}},
                                            {DType::f32, Shape{1}}};
  const std::vector<std::string> names{"w", "d", "e", "b", "n"};
  const std::vector<ParamGroup> groups{{"decay", {3, 0, 1}, 0.1, 0.1},
                                       {"no_decay", {2, 4}, 0.1, 0.0}};
  const Adam opt{.amsgrad = true};
  const optim::FlatState f = flat_state(opt, groups, masters, names);
  ASSERT_EQ(f.buckets.size(), 3u);
  EXPECT_EQ(f.buckets[0].name, "flat.decay");
  EXPECT_EQ(f.buckets[0].params, (std::vector<int>{3, 0}));  // the group's order
  EXPECT_EQ(f.buckets[0].offset, (std::vector<int64_t>{0, 5}));
  EXPECT_EQ(f.buckets[0].numel, 11);
  EXPECT_EQ(f.buckets[1].name, "flat.decay.f64");
  EXPECT_EQ(f.buckets[1].dtype, DType::f64);
  EXPECT_EQ(f.buckets[1].numel, 4);
  EXPECT_EQ(f.buckets[2].name, "flat.no_decay");  // the empty parameter is in no bucket
  EXPECT_EQ(f.buckets[2].params, (std::vector<int>{4}));
  EXPECT_EQ(f.buckets[2].group, 1);
  const StateLayout l = flat_layout(f);
  ASSERT_EQ(l.size(), 3 * 3 + 1);
  EXPECT_EQ(l.slots[0].name, "flat.decay.exp_avg");
  EXPECT_EQ(l.slots[2].name, "flat.decay.max_exp_avg_sq");
  EXPECT_EQ(l.slots[4].type, (ir::TensorType{DType::f64, Shape{4}}));
  EXPECT_EQ(l.find_bucket(2, StateKind::exp_avg_sq), 7);
  EXPECT_EQ(l.slots.back().kind, StateKind::step);
  EXPECT_EQ(l.find(-1, StateKind::exp_avg), -1);  // bucket slots belong to no parameter

  // Per-parameter -> flat -> per-parameter is the identity, every element placed by hand.
  std::vector<Array> whole = init_state(f.full);
  for (size_t j = 0; j < whole.size(); ++j) {
    std::vector<double> v(size_t(whole[j].numel()));
    for (size_t k = 0; k < v.size(); ++k) v[k] = double(100 * j + k);
    whole[j] = Array::from_doubles(whole[j].dtype(), whole[j].shape(), v);
  }
  const std::vector<Array> flat_values = flat_state_of(f, l, whole);
  // Slot 0 (flat.decay.exp_avg): b's exp_avg (full slot 9) then w's (full slot 0).
  EXPECT_EQ(flat_values[0].to_doubles(),
            (std::vector<double>{900, 901, 902, 903, 904, 0, 1, 2, 3, 4, 5}));
  const std::vector<Array> back = whole_state(f, l, [&](int j) { return flat_values[size_t(j)]; });
  expect_bitwise(back, whole, "round trip");
}

TEST(FlatStateLayout, WithZeroIsRefusedInOneLine) {
  UpdateOptions o;
  o.flat_state = true;
  o.zero = 1;
  o.replicas = 2;
  const std::string e =
      tlaloc::testing::error_of([&] { append_update(Adam{}, given_grads_fn({Shape{2}}), 1, o); });
  EXPECT_NE(e.find("flat optimizer state with ZeRO-1 is not built"), std::string::npos) << e;
}

}  // namespace
}  // namespace tlaloc::optim
