// Hostile inputs for flat optimizer state (UpdateOptions::flat_state): every case runs the same
// train step twice, once with the state in buckets and once per parameter (flat_state = false,
// the oracle), on the interpreter and the host lane, and compares parameters, state (buckets
// cut into parameters), found_inf and grad_norm bit for bit after every step. Shapes, groups,
// dtypes and gradients are chosen to hit the bucket bookkeeping: groups out of order and
// interleaved, rank-0 and empty parameters, groups of only empty parameters, f64 mixed with f32,
// f16 / bf16 parameters with f32 masters, loss scaling, clipping that triggers, NaN / inf in one
// bucket, sizes that straddle vector and thread chunks; plus the conversion functions' checks.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include <fmt/ranges.h>

#include "optim/stepper.h"
#include "support/error_of.h"
#include "tlaloc/optim/flat_state.h"

namespace tlaloc::optim {
namespace {
using namespace testing;

// G(grads..., [scale], params...) = (loss, grads...): parameter i of type params[i] (any float
// dtype; the step's parameter input is its master type), gradient i of gdtype[i].
ir::Function mixed_grads_fn(const std::vector<ir::TensorType>& params,
                            const std::vector<DType>& gdtype, bool scale_input) {
  std::vector<ir::TensorType> in;
  for (size_t i = 0; i < params.size(); ++i) in.push_back({gdtype[i], params[i].shape});
  if (scale_input) in.push_back({DType::f32, Shape{}});
  for (const auto& p : params) in.push_back(p);
  const size_t n = params.size();
  return trace::capture(
      [n, scale_input](std::span<const Tensor> x) {
        const size_t first = n + size_t(scale_input);
        Tensor loss = trace::scalar(0.0);
        for (size_t i = 0; i < n; ++i)
          loss = loss + sum(astype(x[i], DType::f32) * astype(x[first + i], DType::f32));
        if (scale_input) loss = loss * x[n];
        std::vector<Tensor> out{loss};
        for (size_t i = 0; i < n; ++i) out.push_back(x[i]);
        return out;
      },
      in);
}

struct Case {
  std::string name;
  Optimizer opt;
  UpdateOptions options;
  std::vector<ir::TensorType> params;  // as G takes them (f16 / bf16: f32 masters)
  std::vector<DType> gdtype;           // empty: each parameter's dtype
};

// A train step over mixed_grads_fn, run by an engine.
struct Mixed {
  TrainStep ts;
  std::unique_ptr<Runner> run;
  std::vector<Array> params, state, last;
  Mixed(Engine e, const Case& c, bool flat, const std::vector<Array>& init) {
    UpdateOptions o = c.options;
    o.flat_state = flat;
    std::vector<DType> gd = c.gdtype;
    if (gd.empty())
      for (const auto& p : c.params) gd.push_back(p.dtype);
    ts = append_update(c.opt, mixed_grads_fn(c.params, gd, o.loss_scaling.has_value()),
                       int(c.params.size()), o);
    run = std::make_unique<Runner>(e, ts.fn);
    params = init;
    state = init_state(ts.state);
  }
  bool step(const std::vector<Array>& grads, std::span<const double> lr, int64_t sstep) {
    std::vector<Array> in = ts.inputs(grads, params, state, lr, 1.0, sstep);
    last = (*run)(ts.fn, in);
    ts.take_updated(last, params, state);
    return last[size_t(ts.found_inf_output())].at(0) != 0;
  }
  std::vector<Array> per_param_state() const {
    if (!ts.flat) return state;
    return whole_state(*ts.flat, ts.state, [&](int j) { return state[size_t(j)]; });
  }
};

// Deterministic values, distinct per (seed, element); `bad` (if finite-free) put at element 0.
Array values(DType dt, const Shape& s, int seed, double amp = 1.0) {
  std::vector<double> v(size_t(s.numel()));
  for (size_t k = 0; k < v.size(); ++k)
    v[k] = amp * std::sin(0.37 * double(k + 1) + 1.3 * seed) * (1 + 0.01 * double(k % 7));
  return Array::from_doubles(dt, s, v);
}

ir::TensorType master(const ir::TensorType& t) { return master_type(t); }

// Runs c with flat and per-parameter state side by side for `steps` steps; gradients of step s
// from grad(s, i) (a null Array: generated values).
void expect_same_bits(Engine e, const Case& c, int steps,
                      const std::function<Array(int, int)>& grad = nullptr, double amp = 1.0) {
  SCOPED_TRACE(c.name);
  std::vector<Array> init;
  for (size_t i = 0; i < c.params.size(); ++i)
    init.push_back(values(master(c.params[i]).dtype, c.params[i].shape, int(i) + 11));
  Mixed flat(e, c, true, init), each(e, c, false, init);
  ASSERT_TRUE(flat.ts.flat.has_value());
  ASSERT_FALSE(each.ts.flat.has_value());
  ASSERT_EQ(flat.ts.full_state().size(), each.ts.state.size());
  for (int j = 0; j < each.ts.state.size(); ++j)
    EXPECT_EQ(flat.ts.full_state().slots[size_t(j)].name, each.ts.state.slots[size_t(j)].name);
  const std::vector<double> lr = each.ts.group_lr();
  for (int s = 0; s < steps; ++s) {
    SCOPED_TRACE("step " + std::to_string(s));
    std::vector<Array> grads;
    for (size_t i = 0; i < c.params.size(); ++i) {
      const DType gd = c.gdtype.empty() ? c.params[i].dtype : c.gdtype[i];
      grads.push_back(grad ? grad(s, int(i))
                           : values(gd, c.params[i].shape, 100 * s + int(i), amp));
    }
    const bool fi_flat = flat.step(grads, lr, s), fi_each = each.step(grads, lr, s);
    EXPECT_EQ(fi_flat, fi_each);
    ASSERT_EQ(flat.params.size(), each.params.size());
    for (size_t i = 0; i < each.params.size(); ++i)
      EXPECT_TRUE(flat.params[i].bitwise_equal(each.params[i]))
          << "parameter " << i << ": flat " << fmt::format("{}", flat.params[i].to_doubles())
          << " per-parameter " << fmt::format("{}", each.params[i].to_doubles());
    const std::vector<Array> fs = flat.per_param_state();
    ASSERT_EQ(fs.size(), each.state.size());
    for (size_t j = 0; j < fs.size(); ++j)
      EXPECT_TRUE(fs[j].bitwise_equal(each.state[j]))
          << "state " << each.ts.state.slots[j].name << ": flat "
          << fmt::format("{}", fs[j].to_doubles()) << " per-parameter "
          << fmt::format("{}", each.state[j].to_doubles());
    if (each.ts.has_grad_norm) {
      EXPECT_TRUE(flat.last[size_t(flat.ts.grad_norm_output())].bitwise_equal(
          each.last[size_t(each.ts.grad_norm_output())]));
    }
  }
}

ir::TensorType f32(Shape s) { return {DType::f32, std::move(s)}; }
ir::TensorType f64(Shape s) { return {DType::f64, std::move(s)}; }

class HostileFlat : public ::testing::TestWithParam<Engine> {};

TEST_P(HostileFlat, InterleavedOutOfOrderGroupsWithScalarAndEmptyParameters) {
  // Groups list parameters out of order, interleaved; a rank-0 parameter, a [1], an empty one
  // in the middle of a group.
  const std::vector<ir::TensorType> ps{f32(Shape{3, 1, 2}), f32(Shape{}),     f32(Shape{0, 5}),
                                       f32(Shape{1}),       f32(Shape{4, 3}), f32(Shape{7})};
  UpdateOptions o;
  o.groups = {{"b", {5, 2, 0}, 0.03, 0.2}, {"a", {4, 1, 3}, 0.1, 0.0}};
  for (const Optimizer& opt : std::vector<Optimizer>{
           AdamW{.lr = 0.01, .amsgrad = true, .maximize = true},
           Adam{.lr = 0.02, .weight_decay = 0.1, .amsgrad = true},
           SGD{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.05, .nesterov = true},
           SGD{.lr = 0.1, .momentum = 0.5, .dampening = 0.3, .maximize = true}, SGD{.lr = 0.1}})
    expect_same_bits(GetParam(), {name(opt), opt, o, ps, {}}, 4);
}

TEST_P(HostileFlat, GroupsOfOnlyEmptyParametersAndEmptyGroups) {
  UpdateOptions o;
  o.groups = {{"empty", {0, 2}, 0.5, 0.5},
              {"none", {}, 0.7, 0.0},
              {"one", {1}, 0.1, 0.01},
              {"also_empty", {3}, 0.2, 0.2}};
  const std::vector<ir::TensorType> ps{f32(Shape{0}), f32(Shape{2, 2}), f64(Shape{3, 0}),
                                       f64(Shape{0})};
  for (const Optimizer& opt :
       std::vector<Optimizer>{AdamW{.amsgrad = true}, SGD{.lr = 0.1, .momentum = 0.9}, SGD{}})
    expect_same_bits(GetParam(), {name(opt), opt, o, ps, {}}, 3);
  // Every parameter empty: no bucket at all.
  UpdateOptions all;
  expect_same_bits(GetParam(), {"all empty", Adam{}, all, {f32(Shape{0}), f64(Shape{0, 2})}, {}},
                   2);
  // No parameters.
  expect_same_bits(GetParam(), {"no parameters", AdamW{}, all, {}, {}}, 2);
}

TEST_P(HostileFlat, MixedF64AndF32InEveryGroupWithClippingThatTriggers) {
  const std::vector<ir::TensorType> ps{f64(Shape{3}),    f32(Shape{2, 2}), f64(Shape{}),
                                       f32(Shape{5}),    f64(Shape{2, 3}), f32(Shape{1}),
                                       f64(Shape{0, 1}), f32(Shape{0})};
  UpdateOptions o;
  o.groups = {{"x", {3, 0, 5, 6}, 0.05, 0.1}, {"y", {4, 7, 1, 2}, 0.02, 0.0}};
  o.max_norm = 0.05;  // gradients here have norm ~3
  for (const Optimizer& opt : std::vector<Optimizer>{
           Adam{.lr = 0.01, .weight_decay = 0.1, .amsgrad = true}, AdamW{.maximize = true},
           SGD{.lr = 0.1, .momentum = 0.9, .nesterov = true}})
    expect_same_bits(GetParam(), {name(opt), opt, o, ps, {}}, 3);
  // bf16 gradients into f64 and f32 masters.
  std::vector<DType> gd(ps.size(), DType::bf16);
  expect_same_bits(GetParam(), {"bf16 grads", AdamW{.amsgrad = true}, o, ps, gd}, 3);
}

TEST_P(HostileFlat, GroupNameThatCollidesWithAnotherGroupsF64Bucket) {
  // Group "a" holds an f64 parameter (bucket "flat.a.f64"); group "a.f64" holds f32 ones
  // (bucket "flat.a.f64" too).
  const std::vector<ir::TensorType> ps{f64(Shape{2}), f32(Shape{3}), f32(Shape{4})};
  UpdateOptions o;
  o.groups = {{"a", {0, 1}, 0.01, 0.0}, {"a.f64", {2}, 0.1, 0.3}};
  const Case c{"collide", AdamW{.amsgrad = true}, o, ps, {}};
  expect_same_bits(GetParam(), c, 3);
}

TEST_P(HostileFlat, NonFiniteGradientInOneBucketSkipsEveryBucketBitwise) {
  const std::vector<ir::TensorType> ps{f32(Shape{4}), f64(Shape{3}), f32(Shape{2, 2}),
                                       f64(Shape{1})};
  UpdateOptions o;
  o.groups = {{"p", {2, 1}, 0.05, 0.1}, {"q", {3, 0}, 0.1, 0.0}};
  o.max_norm = 1.0;
  // Step 1: NaN in the f64 parameter 3's gradient; step 2: -inf in parameter 2; step 3: inf
  // whose square overflows nothing but the value itself; step 4: a huge f64 gradient whose f32
  // square would overflow (finite in f64: not skipped).
  auto grad = [&](int s, int i) -> Array {
    Array g = values(ps[size_t(i)].dtype, ps[size_t(i)].shape, 100 * s + i);
    auto put = [&](double x) {
      std::vector<double> v = g.to_doubles();
      v.back() = x;
      g = Array::from_doubles(g.dtype(), g.shape(), v);
    };
    if (s == 1 && i == 3) put(NAN);
    if (s == 2 && i == 2) put(-INFINITY);
    if (s == 3 && i == 0) put(INFINITY);
    if (s == 4 && i == 1) put(1e200);
    return g;
  };
  for (const Optimizer& opt :
       std::vector<Optimizer>{Adam{.amsgrad = true}, AdamW{}, SGD{.lr = 0.1, .momentum = 0.9}}) {
    const Case c{name(opt), opt, o, ps, {}};
    expect_same_bits(GetParam(), c, 6, grad);
    // The skipped steps keep every bucket: check against the flat run itself before / after.
    std::vector<Array> init;
    for (size_t i = 0; i < ps.size(); ++i)
      init.push_back(values(master(ps[i]).dtype, ps[i].shape, int(i) + 11));
    Mixed flat(GetParam(), c, true, init);
    const auto lr = flat.ts.group_lr();
    std::vector<Array> g0;
    for (int i = 0; i < 4; ++i) g0.push_back(grad(0, i));
    EXPECT_FALSE(flat.step(g0, lr, 0));
    const std::vector<Array> p = flat.params, st = flat.state;
    std::vector<Array> g1;
    for (int i = 0; i < 4; ++i) g1.push_back(grad(1, i));
    EXPECT_TRUE(flat.step(g1, lr, 1));
    for (size_t i = 0; i < p.size(); ++i) EXPECT_TRUE(flat.params[i].bitwise_equal(p[i]));
    for (size_t j = 0; j < st.size(); ++j)
      EXPECT_TRUE(flat.state[j].bitwise_equal(st[j])) << flat.ts.state.slots[j].name;
  }
}

TEST_P(HostileFlat, F16ParametersWithLossScalingBackoffAndGrowth) {
  const std::vector<ir::TensorType> ps{{DType::f16, Shape{3, 2}},
                                       {DType::f16, Shape{5}},
                                       {DType::bf16, Shape{2}},
                                       {DType::f16, Shape{0}}};
  UpdateOptions o;
  o.groups = {{"h", {1, 3, 0}, 0.01, 0.01}, {"b", {2}, 0.02, 0.0}};
  o.loss_scaling = UpdateOptions::LossScaling{.init_scale = 1024, .growth_interval = 2};
  o.max_norm = 0.5;
  // f16 gradients (scaled): an inf at steps 2 and 5 (the scaler backs off; growth after two
  // finite steps in a row).
  const std::vector<DType> gd{DType::f16, DType::f16, DType::f16, DType::f16};
  auto grad = [&](int s, int i) -> Array {
    Array g = values(DType::f16, ps[size_t(i)].shape, 100 * s + i, 300.0);
    if ((s == 2 || s == 5) && i == 1) {
      std::vector<double> v = g.to_doubles();
      v[0] = INFINITY;
      g = Array::from_doubles(DType::f16, g.shape(), v);
    }
    return g;
  };
  for (const Optimizer& opt :
       std::vector<Optimizer>{AdamW{.amsgrad = true}, SGD{.lr = 0.1, .momentum = 0.9}})
    expect_same_bits(GetParam(), {name(opt), opt, o, ps, gd}, 8, grad);
}

TEST_P(HostileFlat, ScheduleInTheProgramWithSeveralGroups) {
  const std::vector<ir::TensorType> ps{f32(Shape{2}), f32(Shape{3}), f64(Shape{2})};
  UpdateOptions o;
  o.groups = {{"slow", {2, 0}, 0.001, 0.0}, {"fast", {1}, 0.1, 0.1}};
  o.schedule = parse_schedule("warmup-cosine", 6, 2);
  expect_same_bits(GetParam(), {"schedule", AdamW{.amsgrad = true}, o, ps, {}}, 7);
}

TEST_P(HostileFlat, SizesThatStraddleVectorAndThreadChunks) {
  // Offsets that are odd and not multiples of any vector width; a bucket of ~200k elements.
  const std::vector<ir::TensorType> ps{f32(Shape{1}),     f32(Shape{1023}), f32(Shape{7, 13}),
                                       f32(Shape{65537}), f32(Shape{3}),    f32(Shape{129, 1031})};
  UpdateOptions o;
  o.groups = {{"g", {5, 0, 3, 1, 4, 2}, 0.01, 0.01}};
  o.max_norm = 10.0;
  expect_same_bits(GetParam(), {"big", AdamW{.amsgrad = true}, o, ps, {}}, 2);
}

INSTANTIATE_TEST_SUITE_P(Engines, HostileFlat, ::testing::Values(Engine::interpreter, Engine::host),
                         [](const auto& i) {
                           return i.param == Engine::host ? "host" : "interpreter";
                         });

// The flat program against the host reference step (f64 per element): close, independently of
// the per-parameter program.
TEST(HostileFlatReference, MixedGroupsAgreeWithReferenceStep) {
  const std::vector<ir::TensorType> ps{f32(Shape{3}), f32(Shape{2, 2}), f32(Shape{0}),
                                       f32(Shape{})};
  UpdateOptions o;
  o.groups = {{"b", {3, 1}, 0.05, 0.1}, {"a", {2, 0}, 0.01, 0.0}};
  o.max_norm = 0.3;
  const Optimizer opt = AdamW{.amsgrad = true};
  std::vector<Array> init;
  for (size_t i = 0; i < ps.size(); ++i) init.push_back(values(DType::f32, ps[i].shape, int(i)));
  const Case c{"ref", opt, o, ps, {}};
  Mixed flat(Engine::host, c, true, init);
  std::vector<Array> rp = init;
  std::vector<Array> rs = init_state(state_layout(opt, std::vector<ir::TensorType>(ps)));
  const auto lr = flat.ts.group_lr();
  for (int s = 0; s < 4; ++s) {
    std::vector<Array> g;
    for (size_t i = 0; i < ps.size(); ++i)
      g.push_back(values(DType::f32, ps[i].shape, 7 * s + int(i)));
    flat.step(g, lr, s);
    reference_step(opt, o, rp, g, rs, lr);
    for (size_t i = 0; i < ps.size(); ++i) {
      const auto a = flat.params[i].to_doubles(), b = rp[i].to_doubles();
      for (size_t k = 0; k < a.size(); ++k) EXPECT_NEAR(a[k], b[k], 1e-6) << i << " " << k;
    }
  }
  const std::vector<Array> fs = flat.per_param_state();
  ASSERT_EQ(fs.size(), rs.size());
  for (size_t j = 0; j < fs.size(); ++j) {
    const auto a = fs[j].to_doubles(), b = rs[j].to_doubles();
    for (size_t k = 0; k < a.size(); ++k) EXPECT_NEAR(a[k], b[k], 1e-6 + 1e-5 * std::abs(b[k]));
  }
}

// Bucket (program input) names must be distinct: two program inputs named alike are ambiguous in
// the exported StableHLO (tlaloc.name) and in anything that looks state up by name.
TEST(HostileFlatLayout, BucketNamesAreDistinct) {
  const std::vector<ir::TensorType> ps{f64(Shape{2}), f32(Shape{3}), f32(Shape{4})};
  const std::vector<ParamGroup> groups{{"a", {0, 1}, 0.1, 0.0}, {"a.f64", {2}, 0.1, 0.0}};
  const std::vector<std::string> names{"p0", "p1", "p2"};
  const FlatState f = flat_state(Adam{}, groups, ps, names);
  const StateLayout l = flat_layout(f);
  std::set<std::string> seen;
  for (const StateSlot& s : l.slots)
    EXPECT_TRUE(seen.insert(s.name).second) << "two state slots named '" << s.name << "'";
}

// flat_state_of takes a per-parameter state list (a checkpoint's): a tensor of the wrong shape or
// dtype must be refused naming it, not copied by its byte count.
TEST(HostileFlatLayout, FlatStateOfRefusesAWrongShapeOrDtype) {
  const std::vector<ir::TensorType> ps{f32(Shape{4}), f32(Shape{2})};
  const std::vector<ParamGroup> groups{{"all", {0, 1}, 0.1, 0.0}};
  const std::vector<std::string> names{"w", "b"};
  const FlatState f = flat_state(Adam{}, groups, ps, names);
  const StateLayout l = flat_layout(f);
  {
    std::vector<Array> st = init_state(f.full);
    st[0] = Array(DType::f32, Shape{3});  // w.exp_avg: 3 elements for 4
    const std::string e = tlaloc::testing::error_of([&] { flat_state_of(f, l, st); });
    EXPECT_NE(e.find("w.exp_avg"), std::string::npos) << e;
  }
  {
    std::vector<Array> st = init_state(f.full);
    st[1] = Array(DType::f64, Shape{2});  // w.exp_avg_sq: f64 [2], as many bytes as f32 [4]
    const std::string e = tlaloc::testing::error_of([&] { flat_state_of(f, l, st); });
    EXPECT_NE(e.find("w.exp_avg_sq"), std::string::npos) << e;
  }
}

// A group naming a parameter twice (in itself) or an index past the end: refused before any
// bucket is laid out, as resolve_groups refuses it for the per-parameter layout.
TEST(HostileFlatLayout, AGroupNamingAParameterTwiceIsRefused) {
  UpdateOptions o;
  o.flat_state = true;
  o.groups = {{"dup", {0, 1, 0}, 0.1, 0.0}};
  const std::string e = tlaloc::testing::error_of([&] {
    append_update(Adam{}, given_grads_fn({Shape{2}, Shape{3}}), 2, o);
  });
  EXPECT_NE(e.find("parameter 0 is in groups"), std::string::npos) << e;
}

// ZeRO-1 on a single replica is no ZeRO: flat state is accepted and gives the same bits.
TEST(HostileFlatLayout, ZeroOneOnOneReplicaIsAccepted) {
  UpdateOptions o;
  o.flat_state = true;
  o.zero = 1;
  o.replicas = 1;
  EXPECT_EQ(
      tlaloc::testing::error_of([&] { append_update(Adam{}, given_grads_fn({Shape{2}}), 1, o); }),
      "(no error)");
  o.replicas = 3;
  const std::string e =
      tlaloc::testing::error_of([&] { append_update(Adam{}, given_grads_fn({Shape{2}}), 1, o); });
  EXPECT_NE(e.find("flat optimizer state with ZeRO-1 is not built"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

}  // namespace
}  // namespace tlaloc::optim
