#include "tlaloc/runtime/host/program.h"

#include <algorithm>
#include <numeric>

namespace tlaloc::runtime::host {

namespace {

bool contains(const std::vector<int32_t>& v, int32_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// The registers an instruction reads, and those it writes.
std::vector<int> reads_of(const VInstr& v) {
  std::vector<int> r;
  for (int x : {v.a, v.b, v.c, v.e})
    if (x >= 0) r.push_back(x);
  return r;
}
std::vector<int> writes_of(const VInstr& v) {
  if (v.dst >= 0) return {v.dst};
  return {};
}

// Per register: how many times instructions read it, and the op instruction writing it (-1).
void count_uses(const Recording& rec, const std::vector<VInstr>& code, std::vector<int>& uses,
                std::vector<int>& writer) {
  uses.assign(size_t(rec.nvregs()), 0);
  writer.assign(size_t(rec.nvregs()), -1);
  for (size_t i = 0; i < code.size(); ++i) {
    for (int r : reads_of(code[i])) ++uses[size_t(r)];
    if (code[i].kind == VKind::op && code[i].dst >= 0) writer[size_t(code[i].dst)] = int(i);
  }
}

// Selects resolved, operands renamed, dead instructions dropped.
std::vector<VInstr> resolve(const Recording& rec, const std::vector<int>& preds, int mask) {
  std::vector<int> ren(size_t(rec.nvregs()));
  std::iota(ren.begin(), ren.end(), 0);
  std::vector<VInstr> code;
  for (VInstr v : rec.code) {
    for (int* r : {&v.a, &v.b, &v.c})
      if (*r >= 0) *r = ren[size_t(*r)];
    if (v.kind == VKind::select) {
      auto it = std::find(preds.begin(), preds.end(), v.a);
      if (it != preds.end()) {
        ren[size_t(v.dst)] = (mask >> (it - preds.begin())) & 1 ? v.b : v.c;
        continue;
      }
    }
    code.push_back(std::move(v));
  }
  // Registers are written once, except that a bf16 / f16 rounding rewrites its operand, whose
  // writer then stays live too: liveness is never cleared going backwards.
  std::vector<char> live(size_t(rec.nvregs()), 0), keep(code.size(), 0);
  for (size_t i = code.size(); i-- > 0;) {
    const VInstr& v = code[i];
    if (v.kind != VKind::store && v.kind != VKind::use && !(v.dst >= 0 && live[size_t(v.dst)]))
      continue;
    keep[i] = 1;
    for (int r : {v.a, v.b, v.c})
      if (r >= 0) live[size_t(r)] = 1;
  }
  std::vector<VInstr> out;
  for (size_t i = 0; i < code.size(); ++i)
    if (keep[i]) out.push_back(std::move(code[i]));
  return out;
}

bool chainable(const VInstr& v) {
  return v.kind == VKind::op && !v.once && v.dtype == DType::f32 && v.c < 0 &&
         (v.op == ir::Op::add || v.op == ir::Op::subtract || v.op == ir::Op::multiply ||
          v.op == ir::Op::divide);
}

// outer(.., inner(a, b), ..) -> one chained instruction when inner's result has no other use:
// the pair then makes one pass over the block instead of two.
void chain(const Recording& rec, std::vector<VInstr>& code) {
  std::vector<int> uses, writer;
  count_uses(rec, code, uses, writer);
  std::vector<char> gone(code.size(), 0);
  for (size_t j = 0; j < code.size(); ++j) {
    VInstr& o = code[j];
    if (!chainable(o) || o.a == o.b) continue;
    for (int right = 1; right >= 0; --right) {
      const int x = right ? o.b : o.a, c = right ? o.a : o.b;
      const int i = writer[size_t(x)];
      if (i < 0 || gone[size_t(i)] || uses[size_t(x)] != 1 || !chainable(code[size_t(i)])) continue;
      const VInstr& in = code[size_t(i)];
      auto once = [&](int r) { return rec.once[size_t(r)] != 0; };
      InstrFn fn = chain_fn(in.op, o.op, DType::f32, right, once(in.a), once(in.b), once(c));
      if (!fn) continue;
      o.fn = fn;
      o.fn_sa = o.fn_sb = nullptr;
      o.a = in.a;
      o.b = in.b;
      o.c = c;
      o.inner = in.op;
      o.right = right != 0;
      o.kind = VKind::chain;
      gone[size_t(i)] = 1;
      break;
    }
  }
  std::vector<VInstr> out;
  for (size_t i = 0; i < code.size(); ++i)
    if (!gone[i]) out.push_back(std::move(code[i]));
  code = std::move(out);
}

// chain(a, b, multiply(x, s)) -> chain(a, b, x scaled by s) when s is one broadcast value, x a
// block and the product has no other use: the multiply's pass over the block goes away.
void scale_chains(const Recording& rec, std::vector<VInstr>& code) {
  std::vector<int> uses, writer;
  count_uses(rec, code, uses, writer);
  auto once = [&](int r) { return rec.once[size_t(r)] != 0; };
  std::vector<char> gone(code.size(), 0);
  for (VInstr& o : code) {
    if (o.kind != VKind::chain || once(o.c) || uses[size_t(o.c)] != 1) continue;
    const int i = writer[size_t(o.c)];
    if (i < 0 || gone[size_t(i)]) continue;
    const VInstr& m = code[size_t(i)];
    if (!chainable(m) || m.op != ir::Op::multiply || once(m.a) || !once(m.b)) continue;
    InstrFn fn = chain_fn(o.inner, o.op, DType::f32, o.right, once(o.a), once(o.b), false, true);
    if (!fn) continue;
    o.fn = fn;
    o.c = m.a;
    o.e = m.b;
    gone[size_t(i)] = 1;
  }
  std::vector<VInstr> out;
  for (size_t i = 0; i < code.size(); ++i)
    if (!gone[i]) out.push_back(std::move(code[i]));
  code = std::move(out);
}

// The stores that run after the block (`lates`, indices into code) in an order where a store
// of a value read in place from an input's storage (a select passing an input through) comes
// before every store that may overwrite that storage; otherwise in recorded order. Stores in
// a cycle (x passed to the output donated from y, y to the one donated from x) keep their
// order and put the inputs they read into `cyclic`: those must not be overwritten in place.
std::vector<size_t> order_late_stores(const Recording& rec, const std::vector<VInstr>& code,
                                      const std::vector<size_t>& lates,
                                      std::vector<int32_t>& cyclic) {
  auto reads = [&](size_t i) { return rec.input_of[size_t(code[i].a)]; };  // -1: none
  auto before = [&](size_t u, size_t w) {                                  // u must run before w
    return u != w && reads(u) >= 0 && contains(code[w].may_alias, reads(u));
  };
  std::vector<size_t> out, left = lates;
  while (!left.empty()) {
    auto ready = std::find_if(left.begin(), left.end(), [&](size_t w) {
      return std::none_of(left.begin(), left.end(), [&](size_t u) { return before(u, w); });
    });
    if (ready == left.end()) {  // a cycle: the rest in recorded order
      for (size_t u : left)
        if (reads(u) >= 0) cyclic.push_back(reads(u));
      out.insert(out.end(), left.begin(), left.end());
      break;
    }
    out.push_back(*ready);
    left.erase(ready);
  }
  return out;
}

}  // namespace

Program compile_variant(const Recording& rec, const std::vector<LoadMap>& maps,
                        const std::vector<int>& preds, int mask) {
  std::vector<VInstr> code = resolve(rec, preds, mask);
  chain(rec, code);
  scale_chains(rec, code);
  const size_t nv = size_t(rec.nvregs());
  // Storage reads: which instruction reads which value's storage (position; late ones last).
  auto reads_storage = [&](const VInstr& v, const std::vector<int32_t>& values) {
    if (v.kind == VKind::load && contains(values, v.value)) return true;
    for (int r : reads_of(v))
      if (rec.input_of[size_t(r)] >= 0 && contains(values, rec.input_of[size_t(r)])) return true;
    return false;
  };
  // Stores: an op's result is written straight into the stored value's storage unless that
  // storage may be an input some later instruction still reads (then it is stored last).
  std::vector<int32_t> out_of(nv, -1);
  std::vector<char> drop(code.size(), 0), late(code.size(), 0);
  for (size_t i = 0; i < code.size(); ++i) {
    const VInstr& s = code[i];
    if (s.kind != VKind::store) continue;
    late[i] = !s.may_alias.empty();
    const int r = s.a;
    if (!s.plain || !rec.from_op[size_t(r)] || rec.once[size_t(r)] || out_of[size_t(r)] >= 0)
      continue;
    bool ok = true;
    if (!s.may_alias.empty()) {
      size_t k = 0;  // the last writer of r
      for (size_t j = 0; j < code.size(); ++j)
        if (code[j].kind != VKind::store && contains(writes_of(code[j]), r)) k = j;
      // Later instructions, and stores after the block wherever they are recorded.
      for (size_t j = 0; j < code.size() && ok; ++j) {
        const bool after_block =
            j != i && code[j].kind == VKind::store && !code[j].may_alias.empty();
        if (j > k || after_block) ok = !reads_storage(code[j], s.may_alias);
      }
    }
    if (ok) {
      out_of[size_t(r)] = s.value;
      drop[i] = 1;
    }
  }
  // Order: prologue, block body, stores after the block, reduce markers.
  std::vector<const VInstr*> order;
  std::vector<size_t> lates;
  for (int pass = 0; pass < 2; ++pass)
    for (size_t i = 0; i < code.size(); ++i) {
      const VInstr& v = code[i];
      if (drop[i] || v.once != (pass == 0) || v.kind == VKind::use) continue;
      if (late[i])
        lates.push_back(i);
      else
        order.push_back(&v);
    }
  std::vector<int32_t> cyclic;
  for (size_t i : order_late_stores(rec, code, lates, cyclic)) order.push_back(&code[i]);
  for (const VInstr& v : code)
    if (v.kind == VKind::use) order.push_back(&v);
  const size_t prologue =
      size_t(std::count_if(order.begin(), order.end(), [](const VInstr* v) { return v->once; }));
  // Slots: scratch by linear scan over liveness (once registers never freed), then bound ones.
  auto bound = [&](int r) { return rec.input_of[size_t(r)] >= 0 || out_of[size_t(r)] >= 0; };
  auto pooled = [&](int r) { return r >= 0 && !bound(r) && !rec.once[size_t(r)]; };
  std::vector<int> last(nv, -1);
  for (size_t i = 0; i < order.size(); ++i)
    for (int r : reads_of(*order[i])) last[size_t(r)] = int(i);
  std::vector<int> phys(nv, -1), free_regs;
  int nphys = 0;
  auto get = [&] {
    if (free_regs.empty()) return nphys++;
    int r = free_regs.back();
    free_regs.pop_back();
    return r;
  };
  for (size_t i = 0; i < order.size(); ++i) {
    const VInstr& v = *order[i];
    const std::vector<int> ops = reads_of(v), outs = writes_of(v);
    // Operands dying here are freed before the results are assigned (so one may reuse them)
    // only when their element size equals the results'; others after, since loops write d[i]
    // after reading a[i].
    std::vector<int> later;
    for (size_t j = 0; j < ops.size(); ++j) {
      int r = ops[j];
      bool dup =
          std::find(ops.begin(), ops.begin() + ptrdiff_t(j), r) != ops.begin() + ptrdiff_t(j);
      if (!pooled(r) || dup || last[size_t(r)] != int(i) || contains(outs, r)) continue;
      bool same = !outs.empty();
      for (int d : outs) same &= rec.vsize[size_t(r)] == rec.vsize[size_t(d)];
      if (same)
        free_regs.push_back(phys[size_t(r)]);
      else
        later.push_back(phys[size_t(r)]);
    }
    for (int d : outs)
      if (!bound(d) && phys[size_t(d)] < 0) {
        phys[size_t(d)] = get();
        if (last[size_t(d)] < 0 && pooled(d)) later.push_back(phys[size_t(d)]);
      }
    free_regs.insert(free_regs.end(), later.begin(), later.end());
  }
  Program p;
  p.nscratch = std::max(nphys, 1);
  int nslots = p.nscratch;
  for (size_t r = 0; r < nv; ++r) {
    bool used = last[r] >= 0 || out_of[r] >= 0;
    if (!bound(int(r)) || !used) continue;
    phys[r] = nslots;
    if (out_of[r] >= 0)
      p.bindings.push_back({nslots++, out_of[r], 0, rec.vsize[r]});
    else
      p.bindings.push_back({nslots++, rec.input_of[r], rec.input_offset[r], rec.vsize[r]});
  }
  p.nslots = nslots;
  auto slot = [&](int r) { return r >= 0 ? phys[size_t(r)] : -1; };
  for (size_t i = 0; i < order.size(); ++i) {
    const VInstr& v = *order[i];
    if (v.kind == VKind::use) continue;
    Instr in;
    in.fn = v.fn;
    const bool sa = v.a >= 0 && rec.once[size_t(v.a)], sb = v.b >= 0 && rec.once[size_t(v.b)];
    if (sa && !sb && v.fn_sa) in.fn = v.fn_sa;
    if (sb && !sa && v.fn_sb) in.fn = v.fn_sb;
    in.value = v.value;
    in.dst = slot(v.dst);
    in.a = slot(v.a);
    in.b = slot(v.b);
    in.c = slot(v.c);
    in.e = slot(v.e);
    if (v.map >= 0) in.map = &maps[size_t(v.map)];
    (i < prologue ? p.prologue : p.body).push_back(in);
  }
  p.cyclic_inputs = std::move(cyclic);
  for (FusedReduce r : rec.reduces) {
    r.slot = slot(r.slot);
    p.reduces.push_back(r);
  }
  return p;
}

}  // namespace tlaloc::runtime::host
