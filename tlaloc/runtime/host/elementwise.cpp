#include "tlaloc/runtime/host/elementwise.h"

#include <omp.h>

#include <algorithm>

#include "tlaloc/runtime/host/instr.h"

namespace tlaloc::runtime::host {

bool View::contiguous() const {
  if (offset != 0) return false;
  int64_t s = 1;
  for (int64_t d = shape.rank() - 1; d >= 0; --d) {
    if (shape[d] != 1 && strides[size_t(d)] != s) return false;
    s *= shape[d];
  }
  return true;
}

View dense_view(int32_t src, const ir::TensorType& t) {
  return View{src, t.dtype, t.shape, 0, t.shape.strides()};
}

namespace {

// Collapses a view into a LoadMap: drops size-1 dims, merges dims that are contiguous with
// each other, and classifies scalar / contiguous / general.
LoadMap collapse(const View& v) {
  LoadMap m;
  m.offset = v.offset;
  for (int64_t d = 0; d < v.shape.rank(); ++d) {
    int64_t n = v.shape[d], s = v.strides[size_t(d)];
    if (n == 1) continue;
    if (!m.dims.empty() && m.strides.back() == s * n) {
      m.dims.back() *= n;
      m.strides.back() = s;
    } else {
      m.dims.push_back(n);
      m.strides.push_back(s);
    }
  }
  bool all_zero = std::all_of(m.strides.begin(), m.strides.end(), [](int64_t s) { return s == 0; });
  if (all_zero) {
    m.kind = 0;
  } else if (m.dims.size() == 1 && m.strides[0] == 1) {
    m.kind = 1;
  } else {
    m.kind = 2;
    if (m.dims.size() > 16)
      fail("host runtime: view of rank {} > 16 after collapsing", m.dims.size());
  }
  return m;
}

struct VInstr {
  InstrFn fn;
  int dst = -1, a = -1, b = -1, c = -1;
  int32_t value = -1;
  int map = -1;
};

struct GroupKernel : Kernel {
  int64_t n = 0;
  int nregs = 0;
  std::vector<Instr> prog;
  std::vector<LoadMap> maps;

  void block(char* regs, void* const* ptr, int64_t base, int64_t len) const {
    for (const Instr& in : prog) in.fn(in, regs, ptr, base, len);
  }
  void range(char* regs, void* const* ptr, int64_t b0, int64_t b1) const {
    for (int64_t b = b0; b < b1; ++b) {
      int64_t base = b * kBlock;
      block(regs, ptr, base, std::min(kBlock, n - base));
    }
  }
  static void exec(const Kernel& k, const Frame& f) {
    const auto& g = as<GroupKernel>(k);
    int64_t nblocks = (g.n + kBlock - 1) / kBlock;
    int64_t reg_bytes = int64_t(g.nregs) * kBlockBytes;
    if (g.n >= kParallelElements && f.num_threads > 1 && nblocks > 1) {
      int nt = int(std::min<int64_t>(f.num_threads, nblocks));
#pragma omp parallel num_threads(nt)
      {
        int t = omp_get_thread_num(), T = omp_get_num_threads();
        int64_t b0 = nblocks * t / T, b1 = nblocks * (t + 1) / T;
        g.range(f.scratch + t * reg_bytes, f.ptr, b0, b1);
      }
    } else {
      g.range(f.scratch, f.ptr, 0, nblocks);
    }
  }
};

}  // namespace

struct ProgramBuilder::Impl {
  int64_t n;
  int max_threads;
  std::vector<VInstr> code;
  std::vector<LoadMap> maps;
  std::vector<int32_t> reads, writes, in_place;
  int nvregs = 0;
  std::vector<int> vsize;  // element bytes of each virtual register
  int fresh(DType t) {
    vsize.push_back(int(size_of(compute_dtype(t))));
    return nvregs++;
  }
};

ProgramBuilder::ProgramBuilder(int64_t n, int max_threads) : impl_(std::make_unique<Impl>()) {
  impl_->n = n;
  impl_->max_threads = max_threads;
}
ProgramBuilder::~ProgramBuilder() = default;

int ProgramBuilder::load(const View& v) {
  auto& I = *impl_;
  LoadMap m = collapse(v);
  if (m.kind == 1 && v.shape.numel() != I.n) m.kind = 2;
  VInstr in{load_fn(v.dtype, m.kind)};
  in.dst = I.fresh(v.dtype);
  in.value = v.src;
  in.map = int(I.maps.size());
  I.maps.push_back(std::move(m));
  I.reads.push_back(v.src);
  if (v.contiguous() && v.shape.numel() == I.n) I.in_place.push_back(v.src);
  I.code.push_back(in);
  return in.dst;
}

int ProgramBuilder::op(const ir::Node& node, const std::vector<int>& regs,
                       const std::vector<DType>& dtypes) {
  auto& I = *impl_;
  if (node.op == ir::Op::convert) {
    InstrFn fn = convert_fn(dtypes[0], node.type.dtype);
    if (!fn) return regs[0];
    VInstr in{fn};
    in.a = regs[0];
    in.dst = I.fresh(node.type.dtype);
    I.code.push_back(in);
    return in.dst;
  }
  DType t = node.op == ir::Op::select || node.op == ir::Op::clamp ? dtypes[1] : dtypes[0];
  VInstr in{op_fn(node.op, t, node.attrs.comparison_direction)};
  in.a = regs[0];
  if (regs.size() > 1) in.b = regs[1];
  if (regs.size() > 2) in.c = regs[2];
  in.dst = I.fresh(node.type.dtype);
  I.code.push_back(in);
  if (InstrFn r = round_fn(node.type.dtype)) {
    VInstr rd{r};
    rd.a = rd.dst = in.dst;
    I.code.push_back(rd);
  }
  return in.dst;
}

void ProgramBuilder::store(int reg, int32_t value, DType dtype) {
  auto& I = *impl_;
  VInstr in{store_fn(dtype)};
  in.a = reg;
  in.value = value;
  I.writes.push_back(value);
  I.code.push_back(in);
}

std::unique_ptr<Kernel> ProgramBuilder::finish() {
  auto& I = *impl_;
  // Last instruction reading each virtual register.
  std::vector<int> last(size_t(I.nvregs), -1);
  for (size_t i = 0; i < I.code.size(); ++i)
    for (int r : {I.code[i].a, I.code[i].b, I.code[i].c})
      if (r >= 0) last[size_t(r)] = int(i);
  // Linear-scan allocation: operands dying here free their register before dst is assigned
  // (an instruction may write its own operand's register; loops are elementwise).
  std::vector<int> phys(size_t(I.nvregs), -1), free_regs;
  int nphys = 0;
  auto get = [&] {
    if (free_regs.empty()) return nphys++;
    int r = free_regs.back();
    free_regs.pop_back();
    return r;
  };
  auto k = std::make_unique<GroupKernel>();
  for (size_t i = 0; i < I.code.size(); ++i) {
    VInstr& v = I.code[i];
    Instr in;
    in.fn = v.fn;
    in.value = v.value;
    int ops[3] = {v.a, v.b, v.c};
    int32_t* outs[3] = {&in.a, &in.b, &in.c};
    for (int j = 0; j < 3; ++j) *outs[j] = ops[j] >= 0 ? phys[size_t(ops[j])] : -1;
    // Operands dying here are freed before dst is assigned (so dst may reuse one) only when
    // their element size equals dst's; others after, since loops write d[i] after reading a[i].
    std::vector<int> later;
    for (int j = 0; j < 3; ++j) {
      int r = ops[j];
      bool dup = false;
      for (int q = 0; q < j; ++q) dup |= ops[q] == r;
      if (r < 0 || dup || last[size_t(r)] != int(i) || r == v.dst) continue;
      if (v.dst >= 0 && I.vsize[size_t(r)] == I.vsize[size_t(v.dst)])
        free_regs.push_back(phys[size_t(r)]);
      else
        later.push_back(phys[size_t(r)]);
    }
    if (v.dst >= 0) {
      if (phys[size_t(v.dst)] < 0) phys[size_t(v.dst)] = get();
      in.dst = phys[size_t(v.dst)];
      if (last[size_t(v.dst)] < 0 && v.dst != v.a) later.push_back(in.dst);  // never read
    }
    free_regs.insert(free_regs.end(), later.begin(), later.end());
    k->prog.push_back(in);
  }
  k->maps = std::move(I.maps);
  for (size_t i = 0, m = 0; i < k->prog.size(); ++i)
    if (I.code[i].map >= 0) k->prog[i].map = &k->maps[m++];
  k->n = I.n;
  k->nregs = std::max(nphys, 1);
  k->run = &GroupKernel::exec;
  k->scratch_bytes = int64_t(k->nregs) * kBlockBytes * std::max(I.max_threads, 1);
  k->reads = std::move(I.reads);
  k->writes = std::move(I.writes);
  k->in_place = std::move(I.in_place);
  return k;
}

}  // namespace tlaloc::runtime::host
