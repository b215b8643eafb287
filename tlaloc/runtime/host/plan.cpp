// Scheduling and buffer planning. Nodes are visited in order; each value is
//   materialized (it has storage), a view (broadcast_in_dim / transpose / slice / reshape of
//   stored data, read through an index map by fused loops and copied only when something else
//   needs it), or a member of an open elementwise group.
// An elementwise node joins (and merges) the open groups of its operands; a group closes when a
// value of it is needed outside the group, and is emitted as one kernel at that point. Because
// a group closes before anything outside it reads it, emission order is a valid schedule.
// Rematerialization: a member needed only by later elementwise nodes, cheap (add, multiply, ...)
// and computable from a few members from what is stored anyway, is not stored; the later
// group recomputes it (the same ops on the same values: the same bits). A gradient's backward
// then reads the forward's few stored inputs instead of every intermediate (GELU's plain-op
// forward group stored 7 of its 10 values for its backward, now 2).
#include "tlaloc/runtime/host/plan.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "tlaloc/ir/builder.h"
#include "tlaloc/runtime/host/elementwise.h"
#include "tlaloc/runtime/host/kernels.h"
#include "tlaloc/runtime/host/structural.h"

namespace tlaloc::runtime::host {

using ir::Op;
using ir::OpKind;

namespace {

enum class State : uint8_t { dead, stored, view, member, remat };

// Ops a later group recomputes rather than read from storage (remat).
bool cheap(Op op) {
  return op == Op::add || op == Op::subtract || op == Op::multiply || op == Op::negate ||
         op == Op::abs || op == Op::maximum || op == Op::minimum || op == Op::select ||
         op == Op::compare;
}
constexpr size_t kMaxRemat = 4;  // members recomputed for one value, at most

struct Group {
  int64_t n = 0;
  std::vector<int32_t> members;
  std::vector<int32_t> reduces;  // full reductions of members, computed in the same pass
  bool open = true;
};

class Planner {
 public:
  Planner(const ir::Function& f, const Options& o, Plan& p) : f_(f), fuse_(o.fuse), p_(p) {
    size_t nv = f.nodes.size();
    p.alias_of.assign(nv, {-1, 0});
    state_.assign(nv, State::dead);
    view_.resize(nv);
    group_.assign(nv, -1);
    users_.resize(nv);
    is_result_.assign(nv, false);
    live_.assign(nv, false);
    for (ir::ValueId r : f.results) is_result_[size_t(r)] = live_[size_t(r)] = true;
    donors_.resize(nv);
    fused_reduce_.assign(nv, false);
    epilogue_dot_.assign(nv, -1);
    remat_.resize(nv);
    for (const ir::Alias& a : f.aliases)
      donors_[size_t(f.results[size_t(a.output)])].push_back(f.inputs[size_t(a.input)]);
    for (size_t i = nv; i-- > 0;)
      if (live_[i])
        for (ir::ValueId o : kernel_operands(f, int32_t(i))) live_[size_t(o)] = true;
    for (size_t i = 0; i < nv; ++i)
      if (live_[i])
        for (ir::ValueId o : kernel_operands(f, int32_t(i)))
          users_[size_t(o)].push_back(int32_t(i));
  }

  void run() {
    for (size_t i = 0; i < f_.nodes.size(); ++i) {
      cursor_ = int32_t(i);
      if (live_[i]) visit(int32_t(i));
    }
    cursor_ = int32_t(f_.nodes.size());
    for (ir::ValueId r : f_.results) need(r);
    for (size_t g = 0; g < groups_.size(); ++g)
      if (groups_[g].open) close(int(g));
  }

 private:
  void emit(std::unique_ptr<Kernel> k, int32_t id = -1) {
    if (id >= 0)
      k->label =
          fmt::format("{} {}", ir::op_name(f_.nodes[size_t(id)].op), ir::to_string(f_.type(id)));
    p_.steps.push_back(std::move(k));
  }

  const View& view(int32_t v) {
    if (state_[size_t(v)] == State::stored) view_[size_t(v)] = dense_view(v, f_.type(v));
    return view_[size_t(v)];
  }

  // Makes v have storage.
  void need(int32_t v) {
    switch (state_[size_t(v)]) {
      case State::view: {
        const View& w = view_[size_t(v)];
        // A reshape of contiguous data, a slice of leading rows: read in place, not copied.
        if (w.dense() && !is_result_[size_t(v)]) {
          p_.alias_of[size_t(v)] = {w.src, w.offset * int64_t(size_of(w.dtype))};
        } else {
          emit(make_view_copy(w, v, p_.num_threads), v);
        }
        state_[size_t(v)] = State::stored;
        break;
      }
      case State::member:
        close(group_[size_t(v)]);
        break;
      case State::remat:  // close() rematerializes only values whose users are all elementwise
        fail("host runtime: internal error: value %{} was not stored", v);
      default:
        break;
    }
  }

  void visit(int32_t id) {
    const ir::Node& n = f_.nodes[size_t(id)];
    switch (op_kind(n.op)) {
      case OpKind::Parameter:
        state_[size_t(id)] = State::stored;
        return;
      case OpKind::Nullary:
        if (n.op == Op::iota) precompute(id);
        state_[size_t(id)] = State::stored;
        return;
      case OpKind::Unary:
      case OpKind::Binary:
      case OpKind::Ternary:
        return elementwise(id);
      case OpKind::Result:  // written by its composite's kernel
        state_[size_t(id)] = State::stored;
        return;
      case OpKind::Structural:
      case OpKind::Composite:
        break;
    }
    bool viewable = n.op == Op::broadcast_in_dim || n.op == Op::transpose || n.op == Op::slice ||
                    n.op == Op::reshape;
    if (fuse_ && viewable) {
      int32_t x = n.operands[0];
      if (fused_reduce_[size_t(x)]) need(x);
      if (n.op == Op::reshape && state_[size_t(x)] == State::member &&
          groups_[size_t(group_[size_t(x)])].open) {
        join(id, {group_[size_t(x)]});
        return;
      }
      need_if_member(x);
      auto v = view_of(n, view(x));
      if (!v) {
        need(x);
        v = view_of(n, view(x));
      }
      view_[size_t(id)] = *v;
      state_[size_t(id)] = State::view;
      return;
    }
    if (fuse_ && n.op == Op::reduce && n.type.shape.numel() == 1) {
      int32_t x = n.operands[0];
      if (state_[size_t(x)] == State::member && !fused_reduce_[size_t(x)] &&
          groups_[size_t(group_[size_t(x)])].open) {
        int g = group_[size_t(x)];
        groups_[size_t(g)].reduces.push_back(id);
        group_[size_t(id)] = g;
        state_[size_t(id)] = State::member;
        fused_reduce_[size_t(id)] = true;
        return;
      }
    }
    for (ir::ValueId o : kernel_operands(f_, id)) need(o);
    if (n.op == Op::reduce)
      emit(make_reduce(f_, id), id);
    else if (n.op == Op::reduce_window || n.op == Op::select_and_scatter)
      emit(make_window(f_, id), id);
    else if (ir::is_collective(n.op))
      emit(make_collective(f_, id), id);
    else if (n.op == Op::dot_general)
      emit(make_dot(f_, id, p_.num_threads), id);
    else if (n.op == Op::convolution)
      emit(make_conv(f_, id, p_.num_threads), id);
    else if (ir::is_composite(n.op))
      emit(make_composite(f_, id, p_.num_threads), id);
    else
      emit(make_structural(f_, id, p_.num_threads), id);
    state_[size_t(id)] = State::stored;
  }

  // A value that depends on no input (iota): computed once here by its kernel, then read
  // like a constant instead of recomputed every step.
  void precompute(int32_t id) {
    const ir::TensorType& t = f_.type(id);
    Array& a = p_.precomputed.emplace_back(id, Array(t.dtype, t.shape)).second;
    std::vector<void*> ptr(f_.nodes.size(), nullptr);
    ptr[size_t(id)] = a.raw();
    auto k = make_structural(f_, id, 1);
    k->run(*k, Frame{ptr.data(), nullptr, 1});
  }

  void need_if_member(int32_t v) {
    if (state_[size_t(v)] == State::member) need(v);
  }

  // An add right after a GEMM whose result nothing else reads: add(dot, a bias, an input [N]
  // broadcast along the rows) or add(dot, a stored value of the same type written before the
  // GEMM ran: a residual, another product of a gradient sum), also on a dot already given a
  // bias this way. The GEMM adds the addend to each tile it computes (dot_add_epilogue) and the
  // add is its result, read in place: no pass over the result (projections' biases, residual
  // adds, gradient sums).
  bool epilogue(int32_t id) {
    const ir::Node& n = f_.nodes[size_t(id)];
    if (!fuse_ || n.op != Op::add || is_result_[size_t(id)]) return false;
    if (conv_bias(id)) return true;
    for (int side = 0; side < 2; ++side) {
      const int32_t d = n.operands[size_t(side)], v = n.operands[size_t(1 - side)];
      const int32_t dot = f_.nodes[size_t(d)].op == Op::dot_general ? d : epilogue_dot_[size_t(d)];
      if (dot < 0 || state_[size_t(d)] != State::stored || is_result_[size_t(d)] ||
          users_[size_t(d)].size() != 1 || f_.type(d) != n.type || v == d)
        continue;
      const size_t s = step_writing(dot);
      if (s >= p_.steps.size()) continue;
      int32_t addend = -1;
      bool row = false;
      if (state_[size_t(v)] == State::view) {
        const View& w = view_[size_t(v)];
        const int64_t r = n.type.shape.rank();
        const ir::Op src = f_.nodes[size_t(w.src)].op;
        row = r >= 1 && w.offset == 0 && w.strides[size_t(r - 1)] == 1 &&
              f_.type(w.src).shape == Shape{n.type.shape[r - 1]} &&
              (src == Op::parameter || src == Op::constant);
        for (int64_t k = 0; row && k + 1 < r; ++k) row = w.strides[size_t(k)] == 0;
        addend = row ? w.src : -1;
      } else if (state_[size_t(v)] == State::stored && f_.type(v) == n.type &&
                 written_before(v, s)) {
        addend = v;
      }
      if (addend < 0 || !dot_add_epilogue(*p_.steps[s], addend, row)) continue;
      p_.alias_of[size_t(id)] = {dot, 0};
      epilogue_dot_[size_t(id)] = dot;
      state_[size_t(id)] = State::stored;
      return true;
    }
    return false;
  }

  // A convert whose operand is a kernel's result nothing else reads (autocast's cotangents
  // widened to f32, a cross-entropy gradient narrowed to bf16): that kernel writes the convert
  // itself (Kernel::write_converted), with its bits; no pass over the result.
  bool convert_epilogue(int32_t id) {
    const ir::Node& n = f_.nodes[size_t(id)];
    if (!fuse_ || n.op != Op::convert) return false;
    int32_t d = n.operands[0];
    if (is_result_[size_t(d)] || users_[size_t(d)].size() != 1) return false;
    // A reshape of the result, read by the convert alone: the same buffer.
    if (const ir::Node& r = f_.nodes[size_t(d)];
        state_[size_t(d)] == State::view && r.op == Op::reshape && view_[size_t(d)].contiguous() &&
        view_[size_t(d)].src == r.operands[0]) {
      d = r.operands[0];
      if (is_result_[size_t(d)] || users_[size_t(d)].size() != 1) return false;
    }
    if (state_[size_t(d)] != State::stored) return false;
    const size_t s = step_writing(d);
    if (s >= p_.steps.size()) return false;
    Kernel& k = *p_.steps[s];
    if (!k.write_converted || !k.write_converted(k, d, id, n.type.dtype)) return false;
    state_[size_t(id)] = State::stored;
    return true;
  }

  // add(convolution [N, C, H, W], a bias [C] input broadcast over N, H, W) right after the
  // convolution whose result nothing else reads: the oneDNN kernel adds it per chunk
  // (conv_add_epilogue) and the add is its result, read in place (a conv layer's bias).
  bool conv_bias(int32_t id) {
    const ir::Node& n = f_.nodes[size_t(id)];
    for (int side = 0; side < 2; ++side) {
      const int32_t c = n.operands[size_t(side)], v = n.operands[size_t(1 - side)];
      if (f_.nodes[size_t(c)].op != Op::convolution || state_[size_t(c)] != State::stored ||
          is_result_[size_t(c)] || users_[size_t(c)].size() != 1 || f_.type(c) != n.type ||
          n.type.dtype != DType::f32 || n.type.shape.rank() != 4 ||
          state_[size_t(v)] != State::view)
        continue;
      const View& w = view_[size_t(v)];
      const ir::Op src = f_.nodes[size_t(w.src)].op;
      if (w.offset != 0 || w.strides != std::vector<int64_t>{0, 1, 0, 0} ||
          f_.type(w.src).shape != Shape{n.type.shape[1]} ||
          (src != Op::parameter && src != Op::constant))
        continue;
      const size_t s = step_writing(c);
      if (s >= p_.steps.size() || !conv_add_epilogue(*p_.steps[s], w.src)) continue;
      p_.alias_of[size_t(id)] = {c, 0};
      state_[size_t(id)] = State::stored;
      return true;
    }
    return false;
  }

  // The last step writing value v, or steps.size() when none does.
  size_t step_writing(int32_t v) const {
    for (size_t s = p_.steps.size(); s-- > 0;) {
      const auto& wr = p_.steps[s]->writes;
      if (std::find(wr.begin(), wr.end(), v) != wr.end()) return s;
    }
    return p_.steps.size();
  }

  // Whether stored value v (through its aliases) is an input or constant or written by a step
  // before step s.
  bool written_before(int32_t v, size_t s) const {
    while (p_.alias_of[size_t(v)].first >= 0) v = p_.alias_of[size_t(v)].first;
    const ir::Op op = f_.nodes[size_t(v)].op;
    if (op == Op::parameter || op == Op::constant) return true;
    for (size_t k = 0; k < s; ++k) {
      const auto& wr = p_.steps[k]->writes;
      if (std::find(wr.begin(), wr.end(), v) != wr.end()) return true;
    }
    return false;
  }

  void elementwise(int32_t id) {
    if (convert_epilogue(id) || epilogue(id)) return;
    const ir::Node& n = f_.nodes[size_t(id)];
    int64_t size = n.type.shape.numel();
    std::vector<int> gs;
    for (ir::ValueId o : n.operands)
      if (state_[size_t(o)] == State::remat) rejoin(o);
    for (ir::ValueId o : n.operands)
      if (fused_reduce_[size_t(o)]) need(o);  // available only once its loop has finished
    for (ir::ValueId o : n.operands) {
      if (state_[size_t(o)] != State::member) continue;
      int g = group_[size_t(o)];
      if (!fuse_ || groups_[size_t(g)].n != size) {
        need(o);
        continue;
      }
      if (std::find(gs.begin(), gs.end(), g) == gs.end()) gs.push_back(g);
    }
    if (!fuse_)
      for (ir::ValueId o : n.operands) need(o);
    join(id, gs);
    if (!fuse_) close(group_[size_t(id)]);
  }

  // Recomputes the remat value v: its members join the open groups, as when first visited.
  void rejoin(int32_t v) {
    for (int32_t t : remat_[size_t(v)])
      if (state_[size_t(t)] != State::member || !groups_[size_t(group_[size_t(t)])].open)
        elementwise(t);
  }

  // Members of group g (in order) that recomputing v needs, v last, when they are all cheap
  // members not stored (members in `fate` stored or rematerialized are read, not recomputed).
  enum Fate : char { kInternal, kStore, kRemat };
  bool remat_tree(int32_t v, int g, const std::map<int32_t, Fate>& fate,
                  std::vector<int32_t>& tree) {
    if (!cheap(f_.nodes[size_t(v)].op)) return false;
    for (ir::ValueId o : f_.nodes[size_t(v)].operands) {
      if (state_[size_t(o)] != State::member || group_[size_t(o)] != g) continue;  // stored
      auto it = fate.find(o);
      if (it == fate.end()) return false;  // the group's own reduction: not read by a member
      if (it->second != kInternal || std::count(tree.begin(), tree.end(), o)) continue;
      if (!remat_tree(o, g, fate, tree)) return false;
    }
    tree.push_back(v);
    return tree.size() <= kMaxRemat;
  }

  // Adds id to the union of open groups gs (a new group if empty).
  void join(int32_t id, const std::vector<int>& gs) {
    int g;
    if (gs.empty()) {
      g = int(groups_.size());
      groups_.push_back({f_.type(id).shape.numel(), {}, {}, true});
    } else {
      g = gs[0];
      for (size_t k = 1; k < gs.size(); ++k) {
        for (int32_t m : groups_[size_t(gs[k])].members) {
          group_[size_t(m)] = g;
          groups_[size_t(g)].members.push_back(m);
        }
        for (int32_t r : groups_[size_t(gs[k])].reduces) {
          group_[size_t(r)] = g;
          groups_[size_t(g)].reduces.push_back(r);
        }
        groups_[size_t(gs[k])].members.clear();
        groups_[size_t(gs[k])].reduces.clear();
        groups_[size_t(gs[k])].open = false;
      }
      std::sort(groups_[size_t(g)].members.begin(), groups_[size_t(g)].members.end());
    }
    groups_[size_t(g)].members.push_back(id);
    group_[size_t(id)] = g;
    state_[size_t(id)] = State::member;
  }

  void close(int g) {
    Group& G = groups_[size_t(g)];
    if (!G.open) return;
    G.open = false;
    ProgramBuilder b(G.n, p_.num_threads);
    std::map<int32_t, int> reg;  // member or loaded value -> register
    auto operand_reg = [&](int32_t o) {
      auto it = reg.find(o);
      if (it != reg.end()) return it->second;
      int r = b.load(view(o));
      reg[o] = r;
      return r;
    };
    // Each member is internal, stored, or rematerialized by the later groups that read it.
    // Users before the cursor outside the group have run already.
    std::map<int32_t, Fate> fate;
    for (int32_t m : G.members) {
      bool outside = is_result_[size_t(m)], later_elementwise = !outside && fuse_;
      for (int32_t u : users_[size_t(m)]) {
        if (u < cursor_ || (state_[size_t(u)] == State::member && group_[size_t(u)] == g)) continue;
        outside = true;
        // The node being visited closes this group to read the value now: it is stored.
        later_elementwise &= u != cursor_ && ir::is_elementwise(f_.nodes[size_t(u)].op);
      }
      fate[m] = outside ? kStore : kInternal;
      std::vector<int32_t> tree;
      if (outside && later_elementwise && remat_tree(m, g, fate, tree)) {
        fate[m] = kRemat;
        remat_[size_t(m)] = std::move(tree);
      }
    }
    int stores = 0;
    for (int32_t m : G.members) {
      const ir::Node& n = f_.nodes[size_t(m)];
      std::vector<int> regs;
      std::vector<DType> dts;
      for (ir::ValueId o : n.operands) {
        regs.push_back(operand_reg(o));
        dts.push_back(f_.type(o).dtype);
      }
      reg[m] = n.op == Op::reshape ? b.alias(regs[0]) : b.op(n, regs, dts);
      if (fate[m] == kStore) {
        b.store(reg[m], m, n.type.dtype, donors_[size_t(m)]);
        ++stores;
      }
    }
    for (int32_t r : G.reduces) {
      const ir::Node& n = f_.nodes[size_t(r)];
      b.reduce(reg.at(n.operands[0]), n.attrs.reduce_kind, n.type.dtype, r);
      state_[size_t(r)] = State::stored;
    }
    // A value rematerialized earlier and only recomputed here stays so: nodes of other
    // values' recomputations, visited again later, read it.
    for (int32_t m : G.members) {
      const bool again = fate[m] == kInternal && !remat_[size_t(m)].empty();
      state_[size_t(m)] = fate[m] == kRemat || again ? State::remat : State::stored;
    }
    if (stores > 0 || !G.reduces.empty()) {
      auto k = b.finish();
      k->label = fmt::format("fused x{}{} n={} ({} stored):", G.members.size(),
                             G.reduces.empty() ? "" : fmt::format(" +{} reduce", G.reduces.size()),
                             G.n, stores);
      for (size_t i = 0; i < G.members.size() && i < 40; ++i)
        k->label += fmt::format(" {}", ir::op_name(f_.nodes[size_t(G.members[i])].op));
      emit(std::move(k));
    }
  }

  const ir::Function& f_;
  bool fuse_;
  Plan& p_;
  std::vector<State> state_;
  std::vector<View> view_;
  std::vector<int> group_;
  std::vector<std::vector<int32_t>> users_;
  std::vector<bool> is_result_, live_;
  std::vector<std::vector<int32_t>> donors_;  // inputs donated to outputs naming the value
  std::vector<bool> fused_reduce_;  // a reduce computed by its operand's group: no register
  std::vector<std::vector<int32_t>> remat_;  // State::remat: the members recomputing it, in order
  int32_t cursor_ = 0;                       // the node being visited
  std::vector<int32_t> epilogue_dot_;        // an add folded into a GEMM: that dot, else -1
  std::vector<Group> groups_;
};

}  // namespace

Plan make_plan(const ir::Function& f, const Options& o) {
  Plan p;
  p.num_threads = std::max(o.num_threads, 1);  // resolved by compile()
  Planner(f, o, p).run();
  assign_storage(f, p);
  return p;
}

}  // namespace tlaloc::runtime::host
