// fold_constants: constant evaluation, splat propagation and algebraic identities.
#include <optional>
#include <unordered_map>

#include "tlaloc/passes/evaluate.h"
#include "tlaloc/passes/passes.h"
#include "tlaloc/passes/rebuild.h"

namespace tlaloc::passes::detail {
namespace {

using ir::Node;
using ir::Op;
using ir::ValueId;

// A value whose elements all equal `v`; `scalar` is a rank-0 constant holding it, or -1.
struct Splat {
  double v;
  ValueId scalar;
};

class Folder {
 public:
  explicit Folder(ir::Function f) : rb_(std::move(f)) {}

  ir::Function run(bool* changed) {
    ir::Function& f = rb_.f;
    for (size_t i = 0; i < f.nodes.size(); ++i) {
      if (f.nodes[i].op == Op::parameter) {
        rb_.copy(ValueId(i));
        continue;
      }
      // A multi-result composite and its result nodes are kept as they are, adjacent.
      const bool multi = f.nodes[i].op == Op::result || ir::is_multi_result(f, ValueId(i));
      Node n = std::move(f.nodes[i]);
      for (auto& o : n.operands) o = rb_.map[size_t(o)];
      rb_.map[i] = multi ? rb_.emit(std::move(n)) : rewrite(std::move(n));
    }
    if (changed) *changed = changed_;
    return rb_.finish();
  }

 private:
  const Node& node(ValueId v) const { return rb_.out.nodes[size_t(v)]; }

  std::optional<Splat> splat(ValueId v) const {
    const Node& n = node(v);
    if (n.op == Op::broadcast_in_dim && node(n.operands[0]).op == Op::constant &&
        node(n.operands[0]).type.shape.rank() == 0)
      return Splat{node(n.operands[0]).attrs.value->at(0), n.operands[0]};
    if (n.op != Op::constant || n.attrs.value->numel() == 0) return std::nullopt;
    auto it = constant_splats_.find(v);  // scanned once per constant
    if (it != constant_splats_.end()) return it->second;
    const Array& a = *n.attrs.value;
    double v0 = a.at(0);
    std::optional<Splat> r = Splat{v0, a.shape().rank() == 0 ? v : -1};
    for (int64_t i = 1; i < a.numel() && r; ++i)
      if (!(a.at(i) == v0)) r.reset();
    if (v0 != v0) r.reset();  // NaN
    constant_splats_.emplace(v, r);
    return r;
  }
  bool is_splat_of(ValueId v, double x) const {
    auto s = splat(v);
    return s && s->v == x;
  }

  // The value of v as an array if it is a constant or a splat of at most kMaxFoldElements.
  std::optional<Array> materialize(ValueId v) const {
    const Node& n = node(v);
    if (n.op == Op::constant) return *n.attrs.value;
    if (n.type.shape.numel() > kMaxFoldElements) return std::nullopt;
    if (auto s = splat(v)) return Array::filled(n.type.dtype, n.type.shape, s->v);
    return std::nullopt;
  }

  ValueId emit(Node n) {
    changed_ = true;
    return rb_.emit(std::move(n));
  }
  ValueId same(ValueId v) {
    changed_ = true;
    return v;
  }
  ValueId emit_constant(Array a) {
    Node c{Op::constant, {a.dtype(), a.shape()}, {}, {}};
    c.attrs.value = std::make_shared<const Array>(std::move(a));
    return emit(std::move(c));
  }
  // A splat of `type` from a scalar constant (existing or new).
  ValueId emit_splat(const ir::TensorType& type, Array scalar, ValueId existing = -1) {
    ValueId s = existing >= 0 ? existing : emit_constant(std::move(scalar));
    if (type.shape.rank() == 0) return s;
    Node b{Op::broadcast_in_dim, type, {s}, {}};
    return emit(std::move(b));
  }

  // add(pad(a, 0), pad(b, 0)) where a and b lie side by side along one dim (the cotangents of
  // slices of one value, a fused projection's) -> pad(concatenate(a, b), 0): the same elements,
  // each x + 0 taken as x (as above). Interior padding and overlaps are left alone.
  std::optional<ValueId> pads_side_by_side(const Node& n) {
    if (node(n.operands[0]).op != Op::pad || node(n.operands[1]).op != Op::pad) return std::nullopt;
    const Node A = node(n.operands[0]), B = node(n.operands[1]);  // copies: emit() reallocates
    if (A.op != Op::pad || B.op != Op::pad || !is_splat_of(A.operands[1], 0) ||
        !is_splat_of(B.operands[1], 0))
      return std::nullopt;
    const ir::Attrs &a = A.attrs, &b = B.attrs;
    const int64_t rank = n.type.shape.rank();
    int64_t dim = -1;
    for (int64_t d = 0; d < rank; ++d) {
      const size_t i = size_t(d);
      if (a.interior_padding[i] != 0 || b.interior_padding[i] != 0) return std::nullopt;
      if (a.edge_padding_low[i] == b.edge_padding_low[i] &&
          a.edge_padding_high[i] == b.edge_padding_high[i])
        continue;
      if (dim >= 0) return std::nullopt;
      dim = d;
    }
    if (dim < 0) return std::nullopt;
    const size_t i = size_t(dim);
    const Node* first = &A;
    const Node* second = &B;
    if (a.edge_padding_low[i] + node(A.operands[0]).type.shape[dim] != b.edge_padding_low[i])
      std::swap(first, second);
    if (first->attrs.edge_padding_low[i] + node(first->operands[0]).type.shape[dim] !=
        second->attrs.edge_padding_low[i])
      return std::nullopt;
    ir::TensorType ct = node(first->operands[0]).type;
    ct.shape.dims[i] += node(second->operands[0]).type.shape[dim];
    Node c{Op::concatenate, ct, {first->operands[0], second->operands[0]}, {}};
    c.attrs.dimension = dim;
    Node p{Op::pad, n.type, {emit(std::move(c)), first->operands[1]}, first->attrs};
    p.attrs.edge_padding_high[i] = second->attrs.edge_padding_high[i];
    return emit(std::move(p));
  }

  // concatenate(..., concatenate(x, y), ...) along the same dim -> concatenate(..., x, y, ...).
  std::optional<ValueId> flatten_concatenate(const Node& n) {
    std::vector<ValueId> flat;
    bool nested = false;
    for (ValueId o : n.operands) {
      const Node& in = node(o);
      if (in.op == Op::concatenate && in.attrs.dimension == n.attrs.dimension) {
        flat.insert(flat.end(), in.operands.begin(), in.operands.end());
        nested = true;
      } else {
        flat.push_back(o);
      }
    }
    if (!nested) return std::nullopt;
    Node c{Op::concatenate, n.type, std::move(flat), n.attrs};
    return emit(std::move(c));
  }

  std::optional<ValueId> identity(const Node& n) {
    auto& ops = n.operands;
    auto keep = [&](ValueId v) -> std::optional<ValueId> {
      if (node(v).type != n.type) return std::nullopt;
      return same(v);
    };
    switch (n.op) {
      case Op::multiply:
        if (is_splat_of(ops[1], 1)) return keep(ops[0]);
        if (is_splat_of(ops[0], 1)) return keep(ops[1]);
        break;
      case Op::add:
        if (is_splat_of(ops[1], 0)) return keep(ops[0]);
        if (is_splat_of(ops[0], 0)) return keep(ops[1]);
        return pads_side_by_side(n);
      case Op::subtract:
        if (is_splat_of(ops[1], 0)) return keep(ops[0]);
        break;
      case Op::divide:
        if (is_splat_of(ops[1], 1)) return keep(ops[0]);
        break;
      case Op::negate:
        if (node(ops[0]).op == Op::negate) return keep(node(ops[0]).operands[0]);
        break;
      case Op::convert:
      case Op::reshape:
        if (node(ops[0]).type == n.type) return same(ops[0]);
        if (n.op == Op::reshape && node(ops[0]).op == Op::reshape) {
          ValueId inner = node(ops[0]).operands[0];
          if (node(inner).type == n.type) return same(inner);
          return emit(Node{Op::reshape, n.type, {inner}, {}});
        }
        break;
      case Op::transpose: {
        auto& p = n.attrs.permutation;
        bool ident = true;
        for (size_t i = 0; i < p.size(); ++i) ident = ident && p[i] == int64_t(i);
        if (ident) return keep(ops[0]);
        if (node(ops[0]).op == Op::transpose) {
          auto& p1 = node(ops[0]).attrs.permutation;
          Node t{Op::transpose, n.type, {node(ops[0]).operands[0]}, {}};
          for (int64_t d : p) t.attrs.permutation.push_back(p1[size_t(d)]);
          return emit(std::move(t));
        }
        break;
      }
      case Op::broadcast_in_dim: {
        auto& bd = n.attrs.broadcast_dimensions;
        bool ident = node(ops[0]).type == n.type;
        for (size_t i = 0; i < bd.size(); ++i) ident = ident && bd[i] == int64_t(i);
        if (ident) return same(ops[0]);
        const Node& in = node(ops[0]);
        if (in.op == Op::broadcast_in_dim) {
          Node b{Op::broadcast_in_dim, n.type, {in.operands[0]}, {}};
          for (int64_t d : in.attrs.broadcast_dimensions)
            b.attrs.broadcast_dimensions.push_back(bd[size_t(d)]);
          return emit(std::move(b));
        }
        break;
      }
      case Op::slice: {
        const Shape& s = node(ops[0]).type.shape;
        bool full = true;
        for (int64_t d = 0; d < s.rank(); ++d)
          full = full && n.attrs.start_indices[size_t(d)] == 0 &&
                 n.attrs.limit_indices[size_t(d)] == s[d] && n.attrs.strides[size_t(d)] == 1;
        if (full) return keep(ops[0]);
        break;
      }
      case Op::pad:
        if (node(ops[0]).type == n.type) return same(ops[0]);
        break;
      case Op::concatenate:
        return flatten_concatenate(n);
      case Op::select:
        if (ops[1] == ops[2]) return same(ops[1]);
        if (auto p = splat(ops[0])) return same(p->v != 0 ? ops[1] : ops[2]);
        break;
      default:
        break;
    }
    return std::nullopt;
  }

  ValueId rewrite(Node n) {
    // Collectives are not a function of their operand alone: never folded.
    if (n.op == Op::constant || n.op == Op::iota || ir::is_collective(n.op))
      return rb_.emit(std::move(n));
    if (auto r = identity(n)) return *r;
    // Splats in, splat out: elementwise ops and pure relayouts of a splat.
    bool relayout = n.op == Op::reshape || n.op == Op::transpose || n.op == Op::broadcast_in_dim;
    if (ir::is_elementwise(n.op) || relayout) {
      std::vector<Splat> s;
      for (ValueId o : n.operands)
        if (auto sp = splat(o)) s.push_back(*sp);
      if (s.size() == n.operands.size()) {
        if (relayout) {
          if (n.op == Op::broadcast_in_dim && node(n.operands[0]).type.shape.rank() == 0)
            return rb_.emit(std::move(n));  // already the canonical splat
          return emit_splat(n.type, Array::filled(n.type.dtype, {}, s[0].v), s[0].scalar);
        }
        std::vector<Array> scalars;
        for (size_t k = 0; k < s.size(); ++k)
          scalars.push_back(Array::filled(node(n.operands[k]).type.dtype, {}, s[k].v));
        std::vector<const Array*> ptrs;
        for (auto& a : scalars) ptrs.push_back(&a);
        Node scalar_node = n;
        scalar_node.type.shape = Shape{};
        return emit_splat(n.type, evaluate(scalar_node, ptrs));
      }
    }
    // All operands constant and the result small: evaluate.
    if (n.type.shape.numel() <= kMaxFoldElements && !n.operands.empty()) {
      std::vector<Array> vals;
      for (ValueId o : n.operands) {
        auto a = materialize(o);
        if (!a || a->numel() > kMaxFoldOperandElements) return rb_.emit(std::move(n));
        vals.push_back(std::move(*a));
      }
      std::vector<const Array*> ptrs;
      for (auto& a : vals) ptrs.push_back(&a);
      return emit_constant(evaluate(n, ptrs));
    }
    return rb_.emit(std::move(n));
  }

  Rebuild rb_;
  bool changed_ = false;
  mutable std::unordered_map<ValueId, std::optional<Splat>> constant_splats_;
};

}  // namespace

ir::Function fold(ir::Function f, bool* changed) { return Folder(std::move(f)).run(changed); }

}  // namespace tlaloc::passes::detail
