// Random programs of 1-3 Adam-like updates interleaved op by op in one fused group: operands
// drawn from the inputs and from earlier updates' m' / v', commutative operands in random
// order, decay or not, extra readers of m' / v' (outputs, products,
// max-reductions) at random points, outputs through a select on a scalar flag or a bf16 convert, a
// leaked intermediate now and then, random sizes (vectors / blocks / chunks / the 2-thread split)
// and random donations. Oracle: the unfused compile (run_all: fused == unfused bitwise on 1 and 2
// threads), and the donated runs equal the undonated ones. Values are kept positive (no NaN).
// Excluded here, each with its own test in adam_fusion_edges_test.cpp: an update reading its
// own m' / v', and donating an output that passes an input through a select.
#include <random>

#include "kernel_test_util.h"

namespace tlaloc::host_test {
namespace {
using ir::Op;
using ir::ValueId;

struct Update {
  int stage = 0;
  ValueId p, m, v, g, mn, vn, gc, q, pn;
  bool decay = false;
};

struct Gen {
  std::mt19937 rng;
  int64_t n;
  ir::Builder b{"random_adam"};
  std::vector<ValueId> pool, scalars, readable, inters, outs;
  std::vector<char> is_select;  // per output
  bool swap;
  ValueId flag;

  Gen(int seed, int64_t n_) : rng(unsigned(seed)), n(n_) { swap = rnd(2); }
  int rnd(int k) { return int(rng() % unsigned(k)); }
  ValueId S() {
    if (rnd(3) == 0) return scalars[size_t(rnd(int(scalars.size())))];
    return b.broadcast_in_dim(b.scalar(DType::f32, 0.1 + 0.008 * rnd(100)), {n}, {});
  }
  ValueId mul(ValueId x, ValueId y) {
    return swap && rnd(2) ? b.binary(Op::multiply, y, x) : b.binary(Op::multiply, x, y);
  }
  ValueId add(ValueId x, ValueId y) {
    return swap && rnd(2) ? b.binary(Op::add, y, x) : b.binary(Op::add, x, y);
  }
  ValueId pick() { return pool[size_t(rnd(int(pool.size())))]; }
  void out(ValueId x, bool select = false) {
    outs.push_back(x);
    is_select.push_back(select);
  }
  // An output of x: as is, through the flag (keeping `keep`), or converted to bf16.
  void wrapped(ValueId keep, ValueId x) {
    const int k = rnd(4);
    if (k == 0)
      out(b.select(b.broadcast_in_dim(flag, {n}, {}), keep, x), true);
    else
      out(k == 1 ? b.convert(x, DType::bf16) : x);
  }
  // One op of update u; false when u is complete.
  bool advance(Update& u) {
    switch (u.stage++) {
      case 0:
        u.m = pick();
        u.mn = add(mul(u.m, S()), mul(u.g, S()));
        readable.push_back(u.mn);
        return true;
      case 1:
        u.v = pick();
        u.gc = mul(u.g, S());
        u.vn = add(mul(u.v, S()), mul(u.gc, u.gc));
        readable.push_back(u.vn);
        return true;
      case 2:
        u.q = b.binary(Op::divide, u.mn, add(b.unary(Op::sqrt, u.vn), S()));
        inters.push_back(u.q);
        inters.push_back(u.gc);
        return true;
      case 3:
        u.p = pick();
        u.pn = b.binary(Op::subtract, u.decay ? mul(u.p, S()) : u.p, mul(S(), u.q));
        wrapped(u.p, u.pn);
        if (rnd(2)) pool.push_back(u.mn);  // later updates may read it
        if (rnd(2)) pool.push_back(u.vn);
        return true;
      default:
        return false;
    }
  }
};

TEST(HostAdamFusionEdges, RandomInterleavedUpdates) {
  const int64_t sizes[] = {8, 9, 255, 256, 257, 1000, 8193, 20000};
  int fused = 0;
  for (int seed = 0; seed < 150; ++seed) {
    SCOPED_TRACE(fmt::format("seed {}", seed));
    Gen G(seed, sizes[seed % 8]);
    const int64_t n = G.n;
    const int nin = 2 + G.rnd(4);
    for (int i = 0; i < nin; ++i)
      G.pool.push_back(G.b.parameter({DType::f32, {n}}, fmt::format("x{}", i)));
    for (int i = 0; i < 3; ++i)
      G.scalars.push_back(
          G.b.broadcast_in_dim(G.b.parameter({DType::f32, {}}, fmt::format("s{}", i)), {n}, {}));
    G.flag = G.b.parameter({DType::i1, {}}, "flag");
    std::vector<Update> us(static_cast<size_t>(1 + G.rnd(3)));
    for (Update& u : us) {
      u.g = G.pick();
      u.decay = G.rnd(2);
    }
    for (size_t live = us.size(); live > 0;) {
      Update& u = us[size_t(G.rnd(int(us.size())))];
      if (u.stage > 3) continue;
      G.advance(u);
      if (u.stage > 3) --live;
      if (!G.readable.empty() && G.rnd(6) == 0) {  // an extra reader of some m' or v'
        const ValueId x = G.readable[size_t(G.rnd(int(G.readable.size())))];
        const int k = G.rnd(3);
        G.out(k == 0 ? x : k == 1 ? G.mul(x, G.S()) : G.b.reduce(x, ir::ReduceKind::max, {0}));
      }
    }
    for (Update& u : us) {
      G.wrapped(u.m, u.mn);
      G.wrapped(u.v, u.vn);
    }
    if (!G.inters.empty() && G.rnd(8) == 0) G.out(G.inters[size_t(G.rnd(int(G.inters.size())))]);
    ir::Function f = G.b.build(G.outs);
    std::vector<Array> in;
    for (int i = 0; i < nin; ++i) {
      std::vector<double> x;
      for (int64_t k = 0; k < n; ++k)
        x.push_back(0.01 + 0.5 * (1 + std::sin(double(k) * (0.1 + i) + i)));
      in.push_back(Array::from_doubles(DType::f32, {n}, x));
    }
    for (int i = 0; i < 3; ++i) in.push_back(Array::scalar<float>(0.2f + 0.3f * float(i)));
    in.push_back(Array::scalar(G.rnd(2) != 0));
    fused += fused_adam_updates(f);
    const std::vector<Array> want = run_all(f, in);
    // Donate random f32 [n] outputs (not the selects) from distinct random inputs.
    std::vector<int> donors(static_cast<size_t>(nin));
    for (int i = 0; i < nin; ++i) donors[size_t(i)] = i;
    std::shuffle(donors.begin(), donors.end(), G.rng);
    for (int o = 0; o < f.num_outputs() && !donors.empty(); ++o) {
      const bool again = std::find(f.results.begin(), f.results.begin() + o,
                                   f.results[size_t(o)]) != f.results.begin() + o;
      if (f.output_type(o) != ir::TensorType{DType::f32, {n}} || G.is_select[size_t(o)] || again ||
          G.rnd(2))
        continue;
      f.aliases.push_back({o, donors.back()});
      donors.pop_back();
    }
    for (int threads : {1, 2}) {
      std::vector<Array> d = in;
      auto dout = runtime::host::compile(f, {.num_threads = threads})->run_donated(d);
      for (size_t k = 0; k < dout.size(); ++k)
        EXPECT_TRUE(dout[k].bitwise_equal(want[k]))
            << "donated output " << k << ", threads " << threads;
    }
  }
  EXPECT_GT(fused, 150);  // most updates fuse
}

}  // namespace
}  // namespace tlaloc::host_test
