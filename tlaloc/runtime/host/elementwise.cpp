#include "tlaloc/runtime/host/elementwise.h"

#include <omp.h>

#include <algorithm>

#include "tlaloc/runtime/host/instr.h"
#include "tlaloc/runtime/host/kernels.h"

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
  bool once = false;  // prologue: run once per thread (scalar broadcasts)
  bool late = false;  // store after every other instruction of the block
};

// Register r points straight into a value's storage for the current block.
struct Binding {
  int32_t slot, value;
  int64_t offset, elem;
};

struct GroupKernel : Kernel {
  int64_t n = 0;
  int nslots = 0, nscratch = 0;
  std::vector<Instr> prologue, prog;
  std::vector<Binding> bindings;
  std::vector<LoadMap> maps;
  std::vector<FusedReduce> reduces;  // full reductions of registers, chunk by chunk
  static constexpr int64_t kBlocksPerChunk = kReduceChunk / kBlock;
  static constexpr int64_t kLaneBytes = kReduceLanes * 8;

  int64_t nblocks() const { return (n + kBlock - 1) / kBlock; }
  int64_t nchunks() const { return std::max<int64_t>((n + kReduceChunk - 1) / kReduceChunk, 1); }
  void range(void** regs, char* lanes, char* partials, void* const* ptr, int64_t b0,
             int64_t b1) const {
    int64_t first = std::min(kBlock, n);
    for (const Instr& in : prologue) in.fn(in, regs, ptr, 0, first);
    for (size_t r = 0; r < reduces.size(); ++r) reduces[r].reset(lanes + r * kLaneBytes);
    const int64_t nb = nblocks();
    for (int64_t b = b0; b < b1; ++b) {
      int64_t base = b * kBlock, len = std::min(kBlock, n - base);
      for (const Binding& d : bindings)
        regs[d.slot] = static_cast<char*>(ptr[d.value]) + (d.offset + base) * d.elem;
      for (const Instr& in : prog) in.fn(in, regs, ptr, base, len);
      if (reduces.empty()) continue;
      bool chunk_end = (b + 1) % kBlocksPerChunk == 0 || b + 1 == nb;
      for (size_t r = 0; r < reduces.size(); ++r) {
        const FusedReduce& fr = reduces[r];
        char* l = lanes + r * kLaneBytes;
        fr.accumulate(l, regs[fr.slot], len);
        if (chunk_end) {
          fr.finish_chunk(l, partials + int64_t(r) * nchunks() * 8, b / kBlocksPerChunk);
          fr.reset(l);
        }
      }
    }
  }
  int64_t thread_bytes() const {
    return int64_t(nscratch) * kBlockBytes + int64_t(nslots) * 8 +
           int64_t(reduces.size()) * kLaneBytes;
  }
  int64_t total_scratch(int threads) const {
    return thread_bytes() * threads + int64_t(reduces.size()) * nchunks() * 8;
  }
  void run_thread(const Frame& f, int t, int64_t b0, int64_t b1) const {
    char* mem = f.scratch + t * thread_bytes();
    void** regs = reinterpret_cast<void**>(mem + int64_t(nscratch) * kBlockBytes);
    char* lanes = mem + int64_t(nscratch) * kBlockBytes + int64_t(nslots) * 8;
    for (int r = 0; r < nscratch; ++r) regs[r] = mem + int64_t(r) * kBlockBytes;
    range(regs, lanes, partials(f), f.ptr, b0, b1);
  }
  char* partials(const Frame& f) const { return f.scratch + thread_bytes() * max_threads; }
  int max_threads = 1;

  static void exec(const Kernel& k, const Frame& f) {
    const auto& g = as<GroupKernel>(k);
    // Threads take contiguous ranges of blocks, in whole reduction chunks when reducing.
    int64_t unit = g.reduces.empty() ? 1 : kBlocksPerChunk;
    int64_t nb = g.nblocks(), units = (nb + unit - 1) / unit;
    if (g.n >= kParallelElements && f.num_threads > 1 && units > 1) {
      int nt = int(std::min<int64_t>(std::min(f.num_threads, g.max_threads), units));
#pragma omp parallel num_threads(nt)
      {
        int t = omp_get_thread_num(), T = omp_get_num_threads();
        g.run_thread(f, t, std::min(nb, units * t / T * unit),
                     std::min(nb, units * (t + 1) / T * unit));
      }
    } else {
      g.run_thread(f, 0, 0, nb);
    }
    for (size_t r = 0; r < g.reduces.size(); ++r)
      g.reduces[r].store(g.partials(f) + int64_t(r) * g.nchunks() * 8, g.nchunks(),
                         f.ptr[g.reduces[r].out]);
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
  std::vector<int> vsize;       // element bytes of each virtual register
  std::vector<Binding> direct;  // virtual registers bound to storage (slot = vreg here)
  std::vector<char> is_direct, is_once, from_op;
  std::vector<FusedReduce> reduces;  // slot holds the virtual register until finish()
  int fresh(DType t) {
    vsize.push_back(int(size_of(compute_dtype(t))));
    is_direct.push_back(0);
    is_once.push_back(0);
    from_op.push_back(0);
    return nvregs++;
  }
};

ProgramBuilder::ProgramBuilder(int64_t n, int max_threads) : impl_(std::make_unique<Impl>()) {
  impl_->n = n;
  impl_->max_threads = max_threads;
}
ProgramBuilder::~ProgramBuilder() = default;

namespace {
bool plain(DType t) { return compute_dtype(t) == t; }  // stored as computed (not bf16/f16)
}  // namespace

int ProgramBuilder::load(const View& v) {
  auto& I = *impl_;
  LoadMap m = collapse(v);
  if (m.kind == 1 && v.shape.numel() != I.n) m.kind = 2;
  I.reads.push_back(v.src);
  if (v.contiguous() && v.shape.numel() == I.n) I.in_place.push_back(v.src);
  int r = I.fresh(v.dtype);
  if (m.kind == 1 && plain(v.dtype)) {  // read in place: no instruction
    I.is_direct[size_t(r)] = 1;
    I.direct.push_back({r, v.src, m.offset, int64_t(size_of(v.dtype))});
    return r;
  }
  VInstr in{load_fn(v.dtype, m.kind)};
  in.dst = r;
  in.value = v.src;
  in.map = int(I.maps.size());
  in.once = m.kind == 0;
  I.is_once[size_t(r)] = in.once;
  I.maps.push_back(std::move(m));
  I.code.push_back(in);
  return r;
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
    I.from_op[size_t(in.dst)] = 1;
    I.code.push_back(in);
    return in.dst;
  }
  DType t = node.op == ir::Op::select || node.op == ir::Op::clamp ? dtypes[1] : dtypes[0];
  VInstr in{node.op == ir::Op::select && I.is_once[size_t(regs[0])]
                ? select_scalar_fn(t)
                : op_fn(node.op, t, node.attrs.comparison_direction)};
  in.a = regs[0];
  if (regs.size() > 1) in.b = regs[1];
  if (regs.size() > 2) in.c = regs[2];
  in.dst = I.fresh(node.type.dtype);
  I.from_op[size_t(in.dst)] = 1;
  I.code.push_back(in);
  if (InstrFn r = round_fn(node.type.dtype)) {
    VInstr rd{r};
    rd.a = rd.dst = in.dst;
    I.code.push_back(rd);
  }
  return in.dst;
}

void ProgramBuilder::store(int reg, int32_t value, DType dtype, bool late) {
  auto& I = *impl_;
  I.writes.push_back(value);
  if (!late && plain(dtype) && I.from_op[size_t(reg)] && !I.is_direct[size_t(reg)]) {
    // The op writes the value's storage directly.
    I.is_direct[size_t(reg)] = 1;
    I.direct.push_back({reg, value, 0, int64_t(size_of(dtype))});
    return;
  }
  VInstr in{store_fn(dtype)};
  in.a = reg;
  in.value = value;
  in.late = late;
  I.code.push_back(in);
}

void ProgramBuilder::reduce(int reg, ir::ReduceKind kind, DType dtype, int32_t value) {
  auto& I = *impl_;
  FusedReduce r = fused_reduce(kind, dtype);
  r.out = value;
  r.slot = reg;
  I.reduces.push_back(r);
  I.writes.push_back(value);
  VInstr use{nullptr};  // keeps the register live to the end of the block
  use.a = reg;
  use.late = true;
  I.code.push_back(use);
}

std::unique_ptr<Kernel> ProgramBuilder::finish() {
  auto& I = *impl_;
  // Order: prologue, block body, late stores.
  std::vector<VInstr> code;
  for (auto& v : I.code)
    if (v.once) code.push_back(v);
  size_t nonce = code.size();
  for (auto& v : I.code)
    if (!v.once && !v.late) code.push_back(v);
  for (auto& v : I.code)
    if (v.late) code.push_back(v);
  // Last instruction reading each virtual register.
  std::vector<int> last(size_t(I.nvregs), -1);
  for (size_t i = 0; i < code.size(); ++i)
    for (int r : {code[i].a, code[i].b, code[i].c})
      if (r >= 0) last[size_t(r)] = int(i);
  // Slots: scratch registers by linear scan (prologue registers never freed), then direct ones.
  std::vector<int> phys(size_t(I.nvregs), -1), free_regs;
  int nphys = 0;
  auto get = [&] {
    if (free_regs.empty()) return nphys++;
    int r = free_regs.back();
    free_regs.pop_back();
    return r;
  };
  auto pooled = [&](int r) { return r >= 0 && !I.is_direct[size_t(r)] && !I.is_once[size_t(r)]; };
  std::vector<int> dst_slot(code.size(), -1);
  for (size_t i = 0; i < code.size(); ++i) {
    VInstr& v = code[i];
    int ops[3] = {v.a, v.b, v.c};
    // Operands dying here are freed before dst is assigned (so dst may reuse one) only when
    // their element size equals dst's; others after, since loops write d[i] after reading a[i].
    std::vector<int> later;
    for (int j = 0; j < 3; ++j) {
      int r = ops[j];
      bool dup = false;
      for (int q = 0; q < j; ++q) dup |= ops[q] == r;
      if (!pooled(r) || dup || last[size_t(r)] != int(i) || r == v.dst) continue;
      if (v.dst >= 0 && I.vsize[size_t(r)] == I.vsize[size_t(v.dst)])
        free_regs.push_back(phys[size_t(r)]);
      else
        later.push_back(phys[size_t(r)]);
    }
    if (v.dst >= 0 && !I.is_direct[size_t(v.dst)] && phys[size_t(v.dst)] < 0) {
      phys[size_t(v.dst)] = get();
      if (last[size_t(v.dst)] < 0 && pooled(v.dst)) later.push_back(phys[size_t(v.dst)]);
    }
    free_regs.insert(free_regs.end(), later.begin(), later.end());
  }
  auto k = std::make_unique<GroupKernel>();
  k->nscratch = std::max(nphys, 1);
  int nslots = k->nscratch;
  for (const Binding& d : I.direct) {
    phys[size_t(d.slot)] = nslots;
    k->bindings.push_back({nslots++, d.value, d.offset, d.elem});
  }
  k->nslots = nslots;
  k->maps = std::move(I.maps);
  for (size_t i = 0; i < code.size(); ++i) {
    const VInstr& v = code[i];
    Instr in;
    in.fn = v.fn;
    in.value = v.value;
    auto slot = [&](int r) { return r >= 0 ? phys[size_t(r)] : -1; };
    in.dst = slot(v.dst);
    in.a = slot(v.a);
    in.b = slot(v.b);
    in.c = slot(v.c);
    if (v.map >= 0) in.map = &k->maps[size_t(v.map)];
    if (!in.fn) continue;  // a reduce's use marker
    (i < nonce ? k->prologue : k->prog).push_back(in);
  }
  k->n = I.n;
  for (FusedReduce r : I.reduces) {
    r.slot = phys[size_t(r.slot)];
    k->reduces.push_back(r);
  }
  k->max_threads = std::max(I.max_threads, 1);
  k->run = &GroupKernel::exec;
  k->scratch_bytes = k->total_scratch(k->max_threads);
  k->reads = std::move(I.reads);
  k->writes = std::move(I.writes);
  k->in_place = std::move(I.in_place);
  return k;
}

}  // namespace tlaloc::runtime::host
