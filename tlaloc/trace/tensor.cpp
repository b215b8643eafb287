#include "tlaloc/trace/tensor.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "tlaloc/trace/autocast.h"

namespace tlaloc::trace {

using ir::Op;

namespace {
thread_local ir::Builder* g_current = nullptr;

int64_t norm_axis(int64_t axis, int64_t rank, const char* what) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) fail("{}: axis {} out of range for rank {}", what, axis, rank);
  return a;
}

ir::Builder& same_builder(const Tensor& a, const Tensor& b) {
  if (&a.builder() != &b.builder())
    fail("tensors {} and {} belong to different captures", to_string(a.type()),
         to_string(b.type()));
  return a.builder();
}

Shape broadcast_shapes(const Shape& a, const Shape& b, std::string_view op) {
  int64_t r = std::max(a.rank(), b.rank());
  Shape s;
  s.dims.resize(size_t(r));
  for (int64_t i = 0; i < r; ++i) {
    int64_t da = i < r - a.rank() ? 1 : a[i - (r - a.rank())];
    int64_t db = i < r - b.rank() ? 1 : b[i - (r - b.rank())];
    if (da != db && da != 1 && db != 1)
      fail("{}: shapes {} and {} do not broadcast", op, to_string(a), to_string(b));
    s[i] = da == 1 ? db : da;
  }
  return s;
}

Tensor binary(Op op, const Tensor& a, const Tensor& b) {
  ir::Builder& bl = same_builder(a, b);
  if (a.dtype() != b.dtype())
    fail("{}: dtypes differ: {} vs {} (convert one with astype)", ir::op_name(op),
         to_string(a.type()), to_string(b.type()));
  Shape s = broadcast_shapes(a.shape(), b.shape(), ir::op_name(op));
  Tensor x = broadcast_to(a, s), y = broadcast_to(b, s);
  return {&bl, bl.binary(op, x.id(), y.id())};
}

Tensor with_scalar(Op op, const Tensor& a, double v, bool scalar_first) {
  Tensor s{&a.builder(), a.builder().scalar(a.dtype(), v)};
  return scalar_first ? binary(op, s, a) : binary(op, a, s);
}

Tensor cmp(ir::Comparison c, const Tensor& a, const Tensor& b) {
  ir::Builder& bl = same_builder(a, b);
  if (a.dtype() != b.dtype())
    fail("compare: dtypes differ: {} vs {}", to_string(a.type()), to_string(b.type()));
  Shape s = broadcast_shapes(a.shape(), b.shape(), "compare");
  return {&bl, bl.compare(broadcast_to(a, s).id(), broadcast_to(b, s).id(), c)};
}

Tensor unary(Op op, const Tensor& x) { return {&x.builder(), x.builder().unary(op, x.id())}; }

std::vector<int64_t> norm_axes(std::vector<int64_t> axes, int64_t rank, const char* what) {
  if (axes.empty())
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  for (auto& a : axes) a = norm_axis(a, rank, what);
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) fail("{}: repeated axis", what);
  return axes;
}

Tensor reduce(const Tensor& x, ir::ReduceKind k, std::vector<int64_t> axes, bool keepdims,
              const char* what) {
  axes = norm_axes(std::move(axes), x.rank(), what);
  ir::Builder& b = x.builder();
  Tensor r{&b, b.reduce(x.id(), k, axes)};
  if (!keepdims) return r;
  std::vector<int64_t> s = x.shape().dims;
  for (int64_t a : axes) s[size_t(a)] = 1;
  return reshape(r, s);
}
}  // namespace

ir::Builder& Tensor::builder() const {
  if (!b_) fail("use of an empty Tensor (not produced by a capture)");
  return *b_;
}

int64_t Tensor::dim(int64_t i) const { return shape()[norm_axis(i, rank(), "dim")]; }

BuilderScope::BuilderScope(ir::Builder& b) : prev_(g_current) { g_current = &b; }
BuilderScope::~BuilderScope() { g_current = prev_; }

ir::Builder& current_builder() {
  if (!g_current) fail("no active capture: create tensors inside trace::capture");
  return *g_current;
}

ir::Function capture(const TraceFn& fn, const std::vector<ir::TensorType>& inputs,
                     std::vector<std::string> input_names, std::vector<std::string> output_names,
                     std::string name) {
  if (!input_names.empty() && input_names.size() != inputs.size())
    fail("capture: {} input names for {} inputs", input_names.size(), inputs.size());
  ir::Builder b(std::move(name));
  BuilderScope scope(b);
  std::vector<Tensor> args;
  for (size_t i = 0; i < inputs.size(); ++i)
    args.emplace_back(&b, b.parameter(inputs[i], input_names.empty() ? "" : input_names[i]));
  std::vector<Tensor> outs = fn(args);
  std::vector<ir::ValueId> ids;
  for (auto& t : outs) {
    if (&t.builder() != &b) fail("capture: an output was not produced by this capture");
    ids.push_back(t.id());
  }
  return b.build(std::move(ids), std::move(output_names));
}

Tensor constant(const Array& value) {
  ir::Builder& b = current_builder();
  return {&b, b.constant(value)};
}
Tensor scalar(double value, DType dtype) {
  ir::Builder& b = current_builder();
  return {&b, b.scalar(dtype, value)};
}
Tensor full(const Shape& shape, double value, DType dtype) {
  return broadcast_to(scalar(value, dtype), shape);
}
Tensor full_like(const Tensor& x, double value) {
  BuilderScope s(x.builder());
  return full(x.shape(), value, x.dtype());
}
Tensor zeros_like(const Tensor& x) { return full_like(x, 0.0); }
Tensor ones_like(const Tensor& x) { return full_like(x, 1.0); }
Tensor iota(const Shape& shape, int64_t dimension, DType dtype) {
  ir::Builder& b = current_builder();
  return {&b, b.iota({dtype, shape}, norm_axis(dimension, shape.rank(), "iota"))};
}

Tensor operator+(const Tensor& a, const Tensor& b) { return binary(Op::add, a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return binary(Op::subtract, a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return binary(Op::multiply, a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return binary(Op::divide, a, b); }
Tensor operator+(const Tensor& a, double b) { return with_scalar(Op::add, a, b, false); }
Tensor operator-(const Tensor& a, double b) { return with_scalar(Op::subtract, a, b, false); }
Tensor operator*(const Tensor& a, double b) { return with_scalar(Op::multiply, a, b, false); }
Tensor operator/(const Tensor& a, double b) { return with_scalar(Op::divide, a, b, false); }
Tensor operator+(double a, const Tensor& b) { return with_scalar(Op::add, b, a, true); }
Tensor operator-(double a, const Tensor& b) { return with_scalar(Op::subtract, b, a, true); }
Tensor operator*(double a, const Tensor& b) { return with_scalar(Op::multiply, b, a, true); }
Tensor operator/(double a, const Tensor& b) { return with_scalar(Op::divide, b, a, true); }
Tensor operator-(const Tensor& a) { return unary(Op::negate, a); }

Tensor operator<(const Tensor& a, const Tensor& b) { return cmp(ir::Comparison::LT, a, b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return cmp(ir::Comparison::LE, a, b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return cmp(ir::Comparison::GT, a, b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return cmp(ir::Comparison::GE, a, b); }
Tensor operator<(const Tensor& a, double b) { return a < full_like(a, b); }
Tensor operator>(const Tensor& a, double b) { return a > full_like(a, b); }
Tensor equal(const Tensor& a, const Tensor& b) { return cmp(ir::Comparison::EQ, a, b); }
Tensor not_equal(const Tensor& a, const Tensor& b) { return cmp(ir::Comparison::NE, a, b); }
Tensor operator&(const Tensor& a, const Tensor& b) { return binary(Op::and_, a, b); }
Tensor operator|(const Tensor& a, const Tensor& b) { return binary(Op::or_, a, b); }
Tensor operator^(const Tensor& a, const Tensor& b) { return binary(Op::xor_, a, b); }
Tensor operator<<(const Tensor& a, const Tensor& b) { return binary(Op::shift_left, a, b); }
Tensor shift_right_logical(const Tensor& a, const Tensor& b) {
  return binary(Op::shift_right_logical, a, b);
}

Tensor maximum(const Tensor& a, const Tensor& b) { return binary(Op::maximum, a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return binary(Op::minimum, a, b); }
Tensor pow(const Tensor& a, const Tensor& b) { return binary(Op::power, a, b); }
Tensor pow(const Tensor& a, double b) { return with_scalar(Op::power, a, b, false); }
Tensor remainder(const Tensor& a, const Tensor& b) { return binary(Op::remainder, a, b); }
Tensor exp(const Tensor& x) { return unary(Op::exponential, x); }
Tensor log(const Tensor& x) { return unary(Op::log, x); }
Tensor log1p(const Tensor& x) { return unary(Op::log_plus_one, x); }
Tensor tanh(const Tensor& x) { return unary(Op::tanh, x); }
Tensor sigmoid(const Tensor& x) { return unary(Op::logistic, x); }
Tensor sqrt(const Tensor& x) { return unary(Op::sqrt, x); }
Tensor rsqrt(const Tensor& x) { return unary(Op::rsqrt, x); }
Tensor abs(const Tensor& x) { return unary(Op::abs, x); }
Tensor sign(const Tensor& x) { return unary(Op::sign, x); }
Tensor floor(const Tensor& x) { return unary(Op::floor, x); }
Tensor cos(const Tensor& x) { return unary(Op::cosine, x); }
Tensor sin(const Tensor& x) { return unary(Op::sine, x); }
Tensor square(const Tensor& x) { return x * x; }
Tensor relu(const Tensor& x) {
  Tensor zero = zeros_like(x);
  return where((x > zero) | not_equal(x, x), x, zero);
}
Tensor where(const Tensor& pred, const Tensor& a, const Tensor& b) {
  ir::Builder& bl = same_builder(a, b);
  same_builder(pred, a);
  if (pred.dtype() != DType::i1) fail("where: pred must be i1, got {}", to_string(pred.type()));
  if (a.dtype() != b.dtype())
    fail("where: dtypes differ: {} vs {}", to_string(a.type()), to_string(b.type()));
  Shape s =
      broadcast_shapes(broadcast_shapes(pred.shape(), a.shape(), "where"), b.shape(), "where");
  return {&bl,
          bl.select(broadcast_to(pred, s).id(), broadcast_to(a, s).id(), broadcast_to(b, s).id())};
}
Tensor clamp(const Tensor& x, double lo, double hi) {
  ir::Builder& b = x.builder();
  return {&b, b.clamp(b.scalar(x.dtype(), lo), x.id(), b.scalar(x.dtype(), hi))};
}
Tensor astype(const Tensor& x, DType t) {
  if (x.dtype() == t) return x;
  return {&x.builder(), x.builder().convert(x.id(), t)};
}

Tensor broadcast_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  int64_t r = shape.rank(), xr = x.rank();
  if (xr > r)
    fail("broadcast_to: cannot broadcast {} to {}", to_string(x.shape()), to_string(shape));
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < xr; ++i) {
    int64_t d = i + r - xr;
    if (x.shape()[i] != 1 && x.shape()[i] != shape[d])
      fail("broadcast_to: cannot broadcast {} to {}", to_string(x.shape()), to_string(shape));
    dims.push_back(d);
  }
  return {&x.builder(), x.builder().broadcast_in_dim(x.id(), shape, dims)};
}

Tensor reshape(const Tensor& x, std::vector<int64_t> shape) {
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer >= 0) fail("reshape: more than one -1 in {}", to_string(Shape(shape)));
      infer = int64_t(i);
    } else {
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || x.numel() % known)
      fail("reshape: cannot reshape {} to {}", to_string(x.shape()), to_string(Shape(shape)));
    shape[size_t(infer)] = x.numel() / known;
  }
  if (Shape(shape) == x.shape()) return x;
  return {&x.builder(), x.builder().reshape(x.id(), Shape(shape))};
}

Tensor transpose(const Tensor& x, std::vector<int64_t> perm) {
  if (perm.empty())
    for (int64_t i = x.rank() - 1; i >= 0; --i) perm.push_back(i);
  for (auto& p : perm) p = norm_axis(p, x.rank(), "transpose");
  return {&x.builder(), x.builder().transpose(x.id(), perm)};
}

Tensor slice(const Tensor& x, int64_t axis, int64_t start, int64_t limit, int64_t step) {
  int64_t a = norm_axis(axis, x.rank(), "slice");
  std::vector<int64_t> st(size_t(x.rank()), 0), li = x.shape().dims, sd(size_t(x.rank()), 1);
  st[size_t(a)] = start;
  li[size_t(a)] = limit;
  sd[size_t(a)] = step;
  return {&x.builder(), x.builder().slice(x.id(), st, li, sd)};
}

Tensor concat(const std::vector<Tensor>& xs, int64_t axis) {
  if (xs.empty()) fail("concat: no tensors");
  std::vector<ir::ValueId> ids;
  for (auto& t : xs) {
    same_builder(xs[0], t);
    ids.push_back(t.id());
  }
  return {&xs[0].builder(),
          xs[0].builder().concatenate(ids, norm_axis(axis, xs[0].rank(), "concat"))};
}

Tensor expand_dims(const Tensor& x, int64_t axis) {
  int64_t a = axis < 0 ? axis + x.rank() + 1 : axis;
  if (a < 0 || a > x.rank()) fail("expand_dims: axis {} for rank {}", axis, x.rank());
  std::vector<int64_t> s = x.shape().dims;
  s.insert(s.begin() + a, 1);
  return reshape(x, s);
}

Tensor sum(const Tensor& x, std::vector<int64_t> axes, bool keepdims) {
  return reduce(x, ir::ReduceKind::sum, std::move(axes), keepdims, "sum");
}
Tensor max(const Tensor& x, std::vector<int64_t> axes, bool keepdims) {
  return reduce(x, ir::ReduceKind::max, std::move(axes), keepdims, "max");
}
Tensor min(const Tensor& x, std::vector<int64_t> axes, bool keepdims) {
  return reduce(x, ir::ReduceKind::min, std::move(axes), keepdims, "min");
}
Tensor mean(const Tensor& x, std::vector<int64_t> axes, bool keepdims) {
  auto ax = norm_axes(axes, x.rank(), "mean");
  int64_t n = 1;
  for (int64_t a : ax) n *= x.shape()[a];
  return sum(x, ax, keepdims) / double(n);
}

Tensor matmul(const Tensor& a0, const Tensor& b0) {
  same_builder(a0, b0);
  if (a0.rank() == 0 || b0.rank() == 0) fail("matmul: scalar operands");
  Tensor a = a0.rank() == 1 ? expand_dims(a0, 0) : a0;
  Tensor b = b0.rank() == 1 ? expand_dims(b0, 1) : b0;
  if (a.dim(-1) != b.dim(-2))
    fail("matmul: {} @ {}: inner dimensions {} and {} differ", to_string(a0.shape()),
         to_string(b0.shape()), a.dim(-1), b.dim(-2));
  Shape ab = a.shape(), bb = b.shape();
  ab.dims.resize(ab.dims.size() - 2);
  bb.dims.resize(bb.dims.size() - 2);
  Shape batch = broadcast_shapes(ab, bb, "matmul");
  int64_t nb = batch.rank();
  Tensor r;
  if (nb == 0) {
    r = dot_general(a, b, {{}, {}, {1}, {0}});
  } else if (b.rank() == 2) {
    // [..., n, k] @ [k, m]: contract directly, no broadcast of b.
    Shape as = batch;
    as.dims.push_back(a.dim(-2));
    as.dims.push_back(a.dim(-1));
    a = broadcast_to(a, as);
    r = dot_general(a, b, {{}, {}, {nb + 1}, {0}});
  } else {
    Shape as = batch, bs = batch;
    as.dims.insert(as.dims.end(), {a.dim(-2), a.dim(-1)});
    bs.dims.insert(bs.dims.end(), {b.dim(-2), b.dim(-1)});
    a = broadcast_to(a, as);
    b = broadcast_to(b, bs);
    std::vector<int64_t> bd;
    for (int64_t i = 0; i < nb; ++i) bd.push_back(i);
    r = dot_general(a, b, {bd, bd, {nb + 1}, {nb}});
  }
  if (a0.rank() == 1)
    r = reshape(r, [&] {
      auto s = r.shape().dims;
      s.erase(s.end() - 2);
      return s;
    }());
  if (b0.rank() == 1)
    r = reshape(r, [&] {
      auto s = r.shape().dims;
      s.pop_back();
      return s;
    }());
  return r;
}

namespace {
// x - max(x) along axis a (keepdims), with a row of -inf shifted by 0 so it stays -inf (no NaN).
Tensor shifted_by_max(const Tensor& x, int64_t a, Tensor* max_out) {
  Tensor m = max(x, {a}, true);
  Tensor finite_m = where(equal(m, full_like(m, -INFINITY)), zeros_like(m), m);
  if (max_out) *max_out = finite_m;
  return x - finite_m;
}
}  // namespace

Tensor logsumexp(const Tensor& x, int64_t axis, bool keepdims) {
  int64_t a = norm_axis(axis, x.rank(), "logsumexp");
  Tensor m;
  Tensor s = shifted_by_max(x, a, &m);
  Tensor r = log(sum(exp(s), {a}, true)) + m;
  if (keepdims) return r;
  auto dims = r.shape().dims;
  dims.erase(dims.begin() + a);
  return reshape(r, dims);
}

// (x - max) - log(sum(exp(x - max))): the shift is exact, so large logits lose no precision.
Tensor log_softmax(const Tensor& x, int64_t axis) {
  int64_t a = norm_axis(axis, x.rank(), "log_softmax");
  Tensor s = shifted_by_max(x, a, nullptr);
  return s - log(sum(exp(s), {a}, true));
}

Tensor softmax(const Tensor& x, int64_t axis) {
  int64_t a = norm_axis(axis, x.rank(), "softmax");
  Tensor e = exp(x - max(x, {a}, true));
  return e / sum(e, {a}, true);
}

Tensor take_rows(const Tensor& x, const Tensor& indices) {
  ir::Builder& b = same_builder(x, indices);
  return {&b, b.gather(x.id(), indices.id())};
}

Tensor one_hot(const Tensor& labels, int64_t n, DType dtype) {
  BuilderScope s(labels.builder());
  Shape sh = labels.shape();
  sh.dims.push_back(n);
  Tensor classes = iota(sh, -1, labels.dtype());
  Tensor l = broadcast_to(expand_dims(labels, -1), sh);
  return astype(astype(equal(l, classes), DType::s32), dtype);
}

Tensor dynamic_slice(const Tensor& x, const std::vector<Tensor>& starts,
                     std::vector<int64_t> sizes) {
  std::vector<ir::ValueId> ids;
  for (auto& t : starts) {
    same_builder(x, t);
    ids.push_back(t.id());
  }
  return {&x.builder(), x.builder().dynamic_slice(x.id(), ids, std::move(sizes))};
}

Tensor dynamic_update_slice(const Tensor& x, const Tensor& update,
                            const std::vector<Tensor>& starts) {
  std::vector<ir::ValueId> ids;
  for (auto& t : starts) {
    same_builder(x, t);
    ids.push_back(t.id());
  }
  return {&x.builder(), x.builder().dynamic_update_slice(x.id(), update.id(), ids)};
}

}  // namespace tlaloc::trace
