// Tensor: a symbolic value while a C++ function is being captured into an ir::Function.
// Operations append IR nodes to the capture's Builder. Binary operations broadcast as NumPy
// does (https://numpy.org/doc/stable/user/basics.broadcasting.html); scalars (double) become
// constants of the other operand's dtype. Errors are tlaloc::Error naming the op and shapes.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "tlaloc/ir/builder.h"

namespace tlaloc::trace {

class Tensor {
 public:
  Tensor() = default;
  Tensor(ir::Builder* b, ir::ValueId id) : b_(b), id_(id) {}

  ir::Builder& builder() const;
  ir::ValueId id() const { return id_; }
  bool valid() const { return b_ != nullptr; }
  // By value: a reference into the builder would dangle once another node is added.
  ir::TensorType type() const { return builder().type(id_); }
  DType dtype() const { return builder().type(id_).dtype; }
  Shape shape() const { return builder().type(id_).shape; }
  int64_t rank() const { return builder().type(id_).shape.rank(); }
  // Size of dimension i; negative i counts from the end.
  int64_t dim(int64_t i) const;
  int64_t numel() const { return builder().type(id_).shape.numel(); }

 private:
  ir::Builder* b_ = nullptr;
  ir::ValueId id_ = -1;
};

// --- Capture ------------------------------------------------------------------------------
// Runs `fn` once on symbolic inputs of the given types and returns the function whose
// parameters are those inputs (model parameters are inputs, never constants) and whose results
// are fn's outputs. Throws tlaloc::Error if fn returns tensors of another capture.
using TraceFn = std::function<std::vector<Tensor>(std::span<const Tensor>)>;
ir::Function capture(const TraceFn& fn, const std::vector<ir::TensorType>& inputs,
                     std::vector<std::string> input_names = {},
                     std::vector<std::string> output_names = {}, std::string name = "main");
// The builder of the innermost active capture; throws when none is active.
ir::Builder& current_builder();
// Makes `b` the current builder for the scope (used by capture and by IR transforms that
// build with Tensor helpers).
class BuilderScope {
 public:
  explicit BuilderScope(ir::Builder& b);
  ~BuilderScope();
  BuilderScope(const BuilderScope&) = delete;
  BuilderScope& operator=(const BuilderScope&) = delete;

 private:
  ir::Builder* prev_;
};

// --- Creation (in the current builder) ------------------------------------------------------
Tensor constant(const Array& value);
Tensor full(const Shape& shape, double value, DType dtype = DType::f32);
Tensor scalar(double value, DType dtype = DType::f32);
Tensor zeros_like(const Tensor& x);
Tensor ones_like(const Tensor& x);
Tensor full_like(const Tensor& x, double value);
// Values 0..shape[dimension]-1 along `dimension`.
Tensor iota(const Shape& shape, int64_t dimension = 0, DType dtype = DType::s32);

// --- Elementwise (broadcasting) -------------------------------------------------------------
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);
Tensor operator-(const Tensor& a);
// Comparisons give i1 tensors.
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, double b);
Tensor operator>(const Tensor& a, double b);
Tensor equal(const Tensor& a, const Tensor& b);
Tensor not_equal(const Tensor& a, const Tensor& b);
Tensor operator&(const Tensor& a, const Tensor& b);
Tensor operator|(const Tensor& a, const Tensor& b);
Tensor operator^(const Tensor& a, const Tensor& b);
Tensor operator<<(const Tensor& a, const Tensor& b);  // shift_left
Tensor shift_right_logical(const Tensor& a, const Tensor& b);

Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, double b);
Tensor remainder(const Tensor& a, const Tensor& b);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor log1p(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);  // logistic
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor sign(const Tensor& x);
Tensor floor(const Tensor& x);
Tensor cos(const Tensor& x);  // cosine
Tensor sin(const Tensor& x);  // sine
Tensor square(const Tensor& x);
// relu(x) = x where x > 0 or x is NaN, else +0: torch.relu's values (NaN propagates) except the
// sign of relu(-0), +0 here (torch keeps -0; one select instead of three, the CNN's hot path);
// its derivative is 1 where x > 0 or NaN and 0 elsewhere, 0 at 0 included (PyTorch's
// threshold_backward; JAX's convention at 0).
Tensor relu(const Tensor& x);
// where(pred, a, b): pred i1; all three broadcast.
Tensor where(const Tensor& pred, const Tensor& a, const Tensor& b);
Tensor clamp(const Tensor& x, double lo, double hi);
Tensor astype(const Tensor& x, DType t);  // convert

// --- Shape ----------------------------------------------------------------------------------
// Broadcasts to `shape` by NumPy rules (trailing alignment).
Tensor broadcast_to(const Tensor& x, const Shape& shape);
// One dimension may be -1 (inferred).
Tensor reshape(const Tensor& x, std::vector<int64_t> shape);
// Reverses the axes when `perm` is empty.
Tensor transpose(const Tensor& x, std::vector<int64_t> perm = {});
// x[start:limit:step] along one axis.
Tensor slice(const Tensor& x, int64_t axis, int64_t start, int64_t limit, int64_t step = 1);
Tensor concat(const std::vector<Tensor>& xs, int64_t axis);
// Inserts a size-1 axis at `axis`.
Tensor expand_dims(const Tensor& x, int64_t axis);

// --- Reductions (axes may be negative; empty axes = all) ------------------------------------
Tensor sum(const Tensor& x, std::vector<int64_t> axes = {}, bool keepdims = false);
Tensor mean(const Tensor& x, std::vector<int64_t> axes = {}, bool keepdims = false);
Tensor max(const Tensor& x, std::vector<int64_t> axes = {}, bool keepdims = false);
Tensor min(const Tensor& x, std::vector<int64_t> axes = {}, bool keepdims = false);

// --- Linear algebra -------------------------------------------------------------------------
// NumPy matmul: [..., n, k] @ [..., k, m] -> [..., n, m] with broadcast batch dims; 1-D
// operands are promoted as NumPy does.
Tensor matmul(const Tensor& a, const Tensor& b);

// --- Softmax family (over `axis`, max-subtracted for stability) -----------------------------
Tensor softmax(const Tensor& x, int64_t axis = -1);
Tensor log_softmax(const Tensor& x, int64_t axis = -1);
// log(sum(exp(x))) over axis, max-subtracted; -inf rows give -inf.
Tensor logsumexp(const Tensor& x, int64_t axis = -1, bool keepdims = false);

// --- Indexing -------------------------------------------------------------------------------
// Rows of x [N, d...] at indices s32 [i...] -> [i..., d...] (gather).
Tensor take_rows(const Tensor& x, const Tensor& indices);
// one_hot(labels s32 [...], n) -> f32 [..., n].
Tensor one_hot(const Tensor& labels, int64_t n, DType dtype = DType::f32);
// Dynamic slice with s32 scalar start tensors, one per dimension.
Tensor dynamic_slice(const Tensor& x, const std::vector<Tensor>& starts,
                     std::vector<int64_t> sizes);
Tensor dynamic_update_slice(const Tensor& x, const Tensor& update,
                            const std::vector<Tensor>& starts);

}  // namespace tlaloc::trace
