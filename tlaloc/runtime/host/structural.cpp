// Data-movement kernels. Semantics: StableHLO (https://openxla.org/stablehlo/spec), with the
// narrowings documented in ir/builder.h (row gather / row scatter-add along axis 0).
#include "tlaloc/runtime/host/structural.h"

#include <algorithm>
#include <cstring>

#include "tlaloc/runtime/host/copy.h"

namespace tlaloc::runtime::host {

using ir::Op;

std::optional<View> view_of(const ir::Node& n, const View& x) {
  View v;
  v.src = x.src;
  v.dtype = x.dtype;
  v.shape = n.type.shape;
  v.offset = x.offset;
  const int64_t r = v.shape.rank();
  v.strides.assign(size_t(r), 0);
  switch (n.op) {
    case Op::broadcast_in_dim: {
      auto& bd = n.attrs.broadcast_dimensions;
      for (size_t i = 0; i < bd.size(); ++i)
        if (x.shape[int64_t(i)] != 1) v.strides[size_t(bd[i])] = x.strides[i];
      return v;
    }
    case Op::transpose:
      for (int64_t i = 0; i < r; ++i)
        v.strides[size_t(i)] = x.strides[size_t(n.attrs.permutation[size_t(i)])];
      return v;
    case Op::slice:
      for (int64_t i = 0; i < r; ++i) {
        v.offset += n.attrs.start_indices[size_t(i)] * x.strides[size_t(i)];
        v.strides[size_t(i)] = x.strides[size_t(i)] * n.attrs.strides[size_t(i)];
      }
      return v;
    case Op::reshape: {
      if (std::all_of(x.strides.begin(), x.strides.end(), [](int64_t s) { return s == 0; }))
        return v;  // a broadcast scalar stays one
      View dense = x;
      dense.offset = 0;
      if (!dense.contiguous()) return std::nullopt;
      v.strides = v.shape.strides();
      return v;
    }
    default:
      return std::nullopt;
  }
}

namespace {

struct CopyKernel : Kernel {
  CopyPlan plan;
  int32_t src = -1, dst = -1;
  static void exec(const Kernel& k, const Frame& f) {
    auto& c = as<CopyKernel>(k);
    c.plan.run(f.ptr[c.dst], f.ptr[c.src], 0, 0, f.num_threads);
  }
};

CopyPlan plan_for(const Shape& box, std::vector<int64_t> dst_strides, int64_t dst_offset,
                  std::vector<int64_t> src_strides, int64_t src_offset, DType t) {
  CopyPlan p;
  p.dims = box.dims;
  p.dst_strides = std::move(dst_strides);
  p.src_strides = std::move(src_strides);
  p.dst_offset = dst_offset;
  p.src_offset = src_offset;
  p.elem_size = size_of(t);
  p.collapse();
  if (p.dims.size() > 32)
    fail("host runtime: copy of rank {} > 32 after collapsing", p.dims.size());
  return p;
}

struct IotaKernel : Kernel {
  int32_t out;
  DType dtype;
  int64_t n, inner, size;
  static void exec(const Kernel& k, const Frame& f) {
    auto& a = as<IotaKernel>(k);
    dispatch(a.dtype, [&]<DType T>() {
      if constexpr (T != DType::i1)
        for (int64_t i = 0; i < a.n; ++i)
          store_elem<T>(f.ptr[a.out], i, Compute<T>((i / a.inner) % a.size));
    });
  }
};

struct MultiCopyKernel : Kernel {  // concatenate; pad (with a fill first)
  std::vector<CopyPlan> plans;
  std::vector<int32_t> srcs;
  int32_t out = -1, fill_value = -1;
  int64_t n = 0;
  static void exec(const Kernel& k, const Frame& f) {
    auto& m = as<MultiCopyKernel>(k);
    if (m.fill_value >= 0) fill(f.ptr[m.out], m.n, f.ptr[m.fill_value], m.plans[0].elem_size);
    for (size_t i = 0; i < m.plans.size(); ++i)
      m.plans[i].run(f.ptr[m.out], f.ptr[m.srcs[i]], 0, 0, f.num_threads);
  }
};

int64_t read_index(const void* p, DType t) {
  return t == DType::s32 ? int64_t(*static_cast<const int32_t*>(p))
                         : int64_t(*static_cast<const uint32_t*>(p));
}

struct DynamicKernel : Kernel {  // dynamic_slice; dynamic_update_slice
  bool update = false;
  int32_t operand = -1, upd = -1, out = -1;
  std::vector<int32_t> starts;
  std::vector<DType> start_types;
  std::vector<int64_t> limit, stride;  // clamp starts to [0, limit]; offset stride per dim
  CopyPlan plan, whole;
  static void exec(const Kernel& k, const Frame& f) {
    auto& d = as<DynamicKernel>(k);
    int64_t shift = 0;
    for (size_t i = 0; i < d.starts.size(); ++i) {
      int64_t s =
          std::clamp<int64_t>(read_index(f.ptr[d.starts[i]], d.start_types[i]), 0, d.limit[i]);
      shift += s * d.stride[i];
    }
    if (!d.update) {
      d.plan.run(f.ptr[d.out], f.ptr[d.operand], 0, shift, f.num_threads);
    } else {
      if (f.ptr[d.out] != f.ptr[d.operand])
        d.whole.run(f.ptr[d.out], f.ptr[d.operand], 0, 0, f.num_threads);
      d.plan.run(f.ptr[d.out], f.ptr[d.upd], shift, 0, f.num_threads);
    }
  }
};

struct RowsKernel : Kernel {  // gather; scatter (row scatter-add)
  bool scatter = false;
  int32_t x = -1, idx = -1, upd = -1, out = -1;
  DType dtype, idx_type;
  int64_t rows, row_size, count;
  static void exec(const Kernel& k, const Frame& f) {
    auto& g = as<RowsKernel>(k);
    size_t es = size_of(g.dtype), row_bytes = size_t(g.row_size) * es;
    auto* out = static_cast<char*>(f.ptr[g.out]);
    const char* x = static_cast<const char*>(f.ptr[g.x]);
    const char* ip = static_cast<const char*>(f.ptr[g.idx]);
    if (!g.scatter) {
      if (g.rows == 0) {  // nothing to gather from: zeros
        std::memset(out, 0, size_t(g.count) * row_bytes);
        return;
      }
      for (int64_t i = 0; i < g.count; ++i) {
        int64_t r = std::clamp<int64_t>(read_index(ip + i * 4, g.idx_type), 0, g.rows - 1);
        std::memcpy(out + size_t(i) * row_bytes, x + size_t(r) * row_bytes, row_bytes);
      }
      return;
    }
    if (out != x) std::memcpy(out, x, size_t(g.rows) * row_bytes);
    const char* u = static_cast<const char*>(f.ptr[g.upd]);
    dispatch(g.dtype, [&]<DType T>() {
      if constexpr (T != DType::i1) {
        using C = Compute<T>;
        for (int64_t i = 0; i < g.count; ++i) {
          int64_t r = read_index(ip + i * 4, g.idx_type);
          if (r < 0 || r >= g.rows) continue;
          for (int64_t j = 0; j < g.row_size; ++j) {
            C a = load_elem<T>(out, r * g.row_size + j), b = load_elem<T>(u, i * g.row_size + j);
            C s;
            if constexpr (std::is_integral_v<C>)
              s = C(uint32_t(a) + uint32_t(b));
            else
              s = a + b;
            store_elem<T>(out, r * g.row_size + j, s);
          }
        }
      }
    });
  }
};

}  // namespace

std::unique_ptr<Kernel> make_view_copy(const View& v, int32_t out, int) {
  auto k = std::make_unique<CopyKernel>();
  k->plan = plan_for(v.shape, v.shape.strides(), 0, v.strides, v.offset, v.dtype);
  k->src = v.src;
  k->dst = out;
  k->run = &CopyKernel::exec;
  k->reads = {v.src};
  k->writes = {out};
  return k;
}

std::unique_ptr<Kernel> make_structural(const ir::Function& f, int32_t id, int num_threads) {
  const ir::Node& n = f.nodes[size_t(id)];
  const auto& a = n.attrs;
  const Shape& os = n.type.shape;
  DType t = n.type.dtype;
  auto operand = [&](size_t i) { return n.operands[i]; };
  auto otype = [&](size_t i) -> const ir::TensorType& { return f.type(n.operands[i]); };
  switch (n.op) {
    case Op::broadcast_in_dim:
    case Op::transpose:
    case Op::slice:
    case Op::reshape:
      return make_view_copy(*view_of(n, dense_view(operand(0), otype(0))), id, num_threads);
    case Op::reverse: {  // a copy reading the reversed dims backwards
      auto k = std::make_unique<CopyKernel>();
      std::vector<int64_t> st = os.strides();
      int64_t off = 0;
      for (int64_t d : a.dimensions) {
        off += (os[d] - 1) * st[size_t(d)];
        st[size_t(d)] = -st[size_t(d)];
      }
      k->plan = plan_for(os, os.strides(), 0, st, os.numel() == 0 ? 0 : off, t);
      k->src = operand(0);
      k->dst = id;
      k->run = &CopyKernel::exec;
      k->reads = {operand(0)};
      k->writes = {id};
      return k;
    }
    case Op::iota: {
      auto k = std::make_unique<IotaKernel>();
      k->out = id;
      k->dtype = t;
      k->n = os.numel();
      k->inner = os.strides()[size_t(a.dimension)];
      k->size = os[a.dimension];
      k->run = &IotaKernel::exec;
      k->writes = {id};
      return k;
    }
    case Op::concatenate:
    case Op::pad: {
      auto k = std::make_unique<MultiCopyKernel>();
      k->out = id;
      k->n = os.numel();
      auto ost = os.strides();
      if (n.op == Op::concatenate) {
        int64_t at = 0;
        for (size_t i = 0; i < n.operands.size(); ++i) {
          const Shape& s = otype(i).shape;
          k->plans.push_back(plan_for(s, ost, at * ost[size_t(a.dimension)], s.strides(), 0, t));
          k->srcs.push_back(operand(i));
          at += s[a.dimension];
        }
      } else {
        const Shape& s = otype(0).shape;
        std::vector<int64_t> ds(ost.size());
        int64_t off = 0;
        for (size_t d = 0; d < ds.size(); ++d) {
          ds[d] = ost[d] * (a.interior_padding[d] + 1);
          off += a.edge_padding_low[d] * ost[d];
        }
        k->plans.push_back(plan_for(s, ds, off, s.strides(), 0, t));
        k->srcs.push_back(operand(0));
        k->fill_value = operand(1);
        if (k->plans[0].elem_size != size_of(t)) fail("host runtime: pad plan mismatch");
      }
      k->run = &MultiCopyKernel::exec;
      k->reads = n.operands;
      k->writes = {id};
      return k;
    }
    case Op::dynamic_slice:
    case Op::dynamic_update_slice: {
      auto k = std::make_unique<DynamicKernel>();
      k->update = n.op == Op::dynamic_update_slice;
      k->operand = operand(0);
      k->out = id;
      const Shape& xs = otype(0).shape;
      auto xst = xs.strides();
      size_t first = k->update ? 2 : 1;
      const Shape box = k->update ? otype(1).shape : os;
      for (size_t i = first; i < n.operands.size(); ++i) {
        k->starts.push_back(operand(i));
        k->start_types.push_back(otype(i).dtype);
        size_t d = i - first;
        k->limit.push_back(xs[int64_t(d)] - box[int64_t(d)]);
        k->stride.push_back(xst[d]);
      }
      if (k->update) {
        k->upd = operand(1);
        k->plan = plan_for(box, xst, 0, box.strides(), 0, t);
        k->whole = plan_for(xs, xst, 0, xst, 0, t);
      } else {
        k->plan = plan_for(box, box.strides(), 0, xst, 0, t);
      }
      k->run = &DynamicKernel::exec;
      k->reads = n.operands;
      k->writes = {id};
      return k;
    }
    case Op::gather:
    case Op::scatter: {
      auto k = std::make_unique<RowsKernel>();
      k->scatter = n.op == Op::scatter;
      k->x = operand(0);
      k->idx = operand(1);
      if (k->scatter) k->upd = operand(2);
      k->out = id;
      k->dtype = t;
      k->idx_type = otype(1).dtype;
      const Shape& xs = otype(0).shape;
      k->rows = xs[0];
      k->row_size = xs[0] == 0 ? 0 : xs.numel() / xs[0];
      k->count = otype(1).shape.numel();
      k->run = &RowsKernel::exec;
      k->reads = n.operands;
      k->writes = {id};
      return k;
    }
    default:
      fail("host runtime: {} is not a data-movement op", ir::op_name(n.op));
  }
}

}  // namespace tlaloc::runtime::host
