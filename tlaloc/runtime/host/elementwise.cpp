#include "tlaloc/runtime/host/elementwise.h"

#include <algorithm>

#include "tlaloc/runtime/host/program.h"
#include "tlaloc/runtime/host/team.h"

namespace tlaloc::runtime::host {

bool View::contiguous() const { return offset == 0 && dense(); }

bool View::dense() const {
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

struct GroupKernel : Kernel {
  int64_t n = 0;
  int nslots = 0, nscratch = 0;  // maxima over the variants
  int max_threads = 1;
  std::vector<LoadMap> maps;
  std::vector<Program> variants;                   // indexed by the predicates' bits
  std::vector<std::pair<int32_t, int64_t>> preds;  // (value, offset) of each i1 predicate
  size_t nreduces = 0;
  static constexpr int64_t kBlocksPerChunk = kReduceChunk / kBlock;
  static constexpr int64_t kLaneBytes = kReduceLanes * 8;
  // Scratch slots lie 49 cache lines apart, not 32 (kBlockBytes): with a 4 KiB L1 set period,
  // slots 2 KiB apart all start on two sets, so a block's f32 slots and streams piled onto the
  // same sets and overflowed their ways; 49 spreads the slots' starts over the sets.
  static constexpr int64_t kSlotBytes = kBlockBytes + 17 * 64;

  int64_t nblocks() const { return (n + kBlock - 1) / kBlock; }
  int64_t nchunks() const { return std::max<int64_t>((n + kReduceChunk - 1) / kReduceChunk, 1); }
  static void range(const Program& pg, int64_t n, void** regs, char* lanes, char* partials,
                    int64_t nchunks, void* const* ptr, int64_t b0, int64_t b1) {
    int64_t first = std::min(kBlock, n);
    for (const Instr& in : pg.prologue) in.fn(in, regs, ptr, 0, first);
    for (size_t r = 0; r < pg.reduces.size(); ++r) pg.reduces[r].reset(lanes + r * kLaneBytes);
    const int64_t nb = (n + kBlock - 1) / kBlock;
    for (int64_t b = b0; b < b1; ++b) {
      int64_t base = b * kBlock, len = std::min(kBlock, n - base);
      for (const Binding& d : pg.bindings)
        regs[d.slot] = static_cast<char*>(ptr[d.value]) + (d.offset + base) * d.elem;
      for (const Instr& in : pg.body) in.fn(in, regs, ptr, base, len);
      if (pg.reduces.empty()) continue;
      bool chunk_end = (b + 1) % kBlocksPerChunk == 0 || b + 1 == nb;
      for (size_t r = 0; r < pg.reduces.size(); ++r) {
        const FusedReduce& fr = pg.reduces[r];
        char* l = lanes + r * kLaneBytes;
        fr.accumulate(l, regs[fr.slot], len);
        if (chunk_end) {
          fr.finish_chunk(l, partials + int64_t(r) * nchunks * 8, b / kBlocksPerChunk);
          fr.reset(l);
        }
      }
    }
    if (nb == 0)  // an empty operand: each reduction is its init value (lanes just reset)
      for (size_t r = 0; r < pg.reduces.size(); ++r)
        pg.reduces[r].finish_chunk(lanes + r * kLaneBytes, partials + int64_t(r) * nchunks * 8, 0);
  }
  int64_t thread_bytes() const {
    return int64_t(nscratch) * kSlotBytes + int64_t(nslots) * 8 + int64_t(nreduces) * kLaneBytes;
  }
  int64_t total_scratch(int threads) const {
    return thread_bytes() * threads + int64_t(nreduces) * nchunks() * 8;
  }
  void run_thread(const Program& pg, const Frame& f, int t, int64_t b0, int64_t b1) const {
    char* mem = f.scratch + t * thread_bytes();
    void** regs = reinterpret_cast<void**>(mem + int64_t(nscratch) * kSlotBytes);
    char* lanes = mem + int64_t(nscratch) * kSlotBytes + int64_t(nslots) * 8;
    for (int r = 0; r < pg.nscratch; ++r) regs[r] = mem + int64_t(r) * kSlotBytes;
    range(pg, n, regs, lanes, partials(f), nchunks(), f.ptr, b0, b1);
  }
  char* partials(const Frame& f) const { return f.scratch + thread_bytes() * max_threads; }

  static void exec(const Kernel& k, const Frame& f) {
    const auto& g = as<GroupKernel>(k);
    size_t v = 0;
    for (size_t p = 0; p < g.preds.size(); ++p)
      if (static_cast<const uint8_t*>(f.ptr[g.preds[p].first])[g.preds[p].second]) v |= 1u << p;
    const Program& pg = g.variants[v];
    // Parts are contiguous ranges of blocks, in whole reduction chunks when reducing; a part
    // uses the scratch of the thread running it.
    int64_t unit = g.nreduces == 0 ? 1 : kBlocksPerChunk;
    int64_t nb = g.nblocks(), units = (nb + unit - 1) / unit;
    if (g.n >= kParallelElements && f.num_threads > 1 && units > 1) {
      int nt = int(std::min<int64_t>(std::min(f.num_threads, g.max_threads), units));
      parallel(int(std::min<int64_t>(int64_t(nt) * kPartsPerThread, units)), [&](int p, int P) {
        g.run_thread(pg, f, team_thread(), std::min(nb, units * p / P * unit),
                     std::min(nb, units * (p + 1) / P * unit));
      });
    } else {
      g.run_thread(pg, f, 0, 0, nb);
    }
    for (size_t r = 0; r < g.nreduces; ++r)
      pg.reduces[r].store(g.partials(f) + int64_t(r) * g.nchunks() * 8, g.nchunks(),
                          f.ptr[pg.reduces[r].out]);
  }
};

}  // namespace

struct ProgramBuilder::Impl {
  int64_t n;
  int max_threads;
  Recording rec;
  std::vector<LoadMap> maps;
  std::vector<int32_t> reads, writes, in_place;
  int fresh(DType t) {
    rec.vsize.push_back(int(size_of(compute_dtype(t))));
    rec.once.push_back(0);
    rec.from_op.push_back(0);
    rec.input_of.push_back(-1);
    rec.input_offset.push_back(0);
    rec.load_at.push_back(-1);
    return rec.nvregs() - 1;
  }
  int push(VInstr in) {
    if (in.dst >= 0) rec.once[size_t(in.dst)] = in.once;
    rec.code.push_back(std::move(in));
    return rec.code.back().dst;
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
    I.rec.input_of[size_t(r)] = v.src;
    I.rec.input_offset[size_t(r)] = m.offset;
    return r;
  }
  VInstr in{VKind::load, load_fn(v.dtype, m.kind)};
  in.dst = r;
  in.value = v.src;
  in.map = int(I.maps.size());
  in.once = m.kind == 0;
  if (in.once && v.dtype == DType::i1) I.rec.load_at[size_t(r)] = int(I.rec.code.size());
  I.maps.push_back(std::move(m));
  return I.push(std::move(in));
}

int ProgramBuilder::op(const ir::Node& node, const std::vector<int>& regs,
                       const std::vector<DType>& dtypes) {
  auto& I = *impl_;
  bool once = true;  // every operand one broadcast value: computed once, in the prologue
  for (int r : regs) once &= I.rec.once[size_t(r)] != 0;
  if (node.op == ir::Op::convert) {
    InstrFn fn = convert_fn(dtypes[0], node.type.dtype);
    if (!fn) return regs[0];
    VInstr in{VKind::op, fn};
    in.a = regs[0];
    in.dst = I.fresh(node.type.dtype);
    in.once = once;
    I.rec.from_op[size_t(in.dst)] = 1;
    return I.push(std::move(in));
  }
  DType t = node.op == ir::Op::select || node.op == ir::Op::clamp ? dtypes[1] : dtypes[0];
  const ir::Comparison cmp = node.attrs.comparison_direction;
  VInstr in{VKind::op};
  if (node.op == ir::Op::select && I.rec.once[size_t(regs[0])]) {
    in.kind = VKind::select;
    in.fn = select_scalar_fn(t);
  } else {
    in.fn = op_fn(node.op, t, cmp);
  }
  in.a = regs[0];
  if (regs.size() > 1) in.b = regs[1];
  if (regs.size() > 2) in.c = regs[2];
  if (regs.size() == 2) {
    in.fn_sa = op_fn(node.op, t, cmp, kScalarA);
    in.fn_sb = op_fn(node.op, t, cmp, kScalarB);
  }
  if (in.kind == VKind::op) {
    in.op = node.op;
    in.dtype = t;
  }
  in.dst = I.fresh(node.type.dtype);
  in.once = once;
  I.rec.from_op[size_t(in.dst)] = 1;
  int dst = I.push(std::move(in));
  if (InstrFn r = round_fn(node.type.dtype)) {
    VInstr rd{VKind::op, r};
    rd.a = rd.dst = dst;
    rd.once = once;
    I.push(std::move(rd));
  }
  return dst;
}

void ProgramBuilder::store(int reg, int32_t value, DType dtype,
                           const std::vector<int32_t>& may_alias) {
  auto& I = *impl_;
  I.writes.push_back(value);
  VInstr in{VKind::store, store_fn(dtype)};
  in.a = reg;
  in.value = value;
  in.plain = plain(dtype);
  in.may_alias = may_alias;
  I.push(std::move(in));
}

void ProgramBuilder::reduce(int reg, ir::ReduceKind kind, DType dtype, int32_t value) {
  auto& I = *impl_;
  FusedReduce r = fused_reduce(kind, dtype);
  r.out = value;
  r.slot = reg;
  I.rec.reduces.push_back(r);
  I.writes.push_back(value);
  VInstr use{VKind::use};  // keeps the register live to the end of the block
  use.a = reg;
  I.push(std::move(use));
}

std::unique_ptr<Kernel> ProgramBuilder::finish() {
  auto& I = *impl_;
  auto k = std::make_unique<GroupKernel>();
  k->n = I.n;
  k->maps = std::move(I.maps);
  std::vector<int> preds;
  for (const VInstr& v : I.rec.code)
    if (v.kind == VKind::select && I.rec.load_at[size_t(v.a)] >= 0 &&
        std::find(preds.begin(), preds.end(), v.a) == preds.end() &&
        preds.size() < size_t(kMaxPredicates)) {
      preds.push_back(v.a);
      const VInstr& ld = I.rec.code[size_t(I.rec.load_at[size_t(v.a)])];
      k->preds.emplace_back(ld.value, k->maps[size_t(ld.map)].offset);
    }
  for (int mask = 0; mask < 1 << preds.size(); ++mask) {
    k->variants.push_back(compile_variant(I.rec, k->maps, preds, mask));
    k->nscratch = std::max(k->nscratch, k->variants.back().nscratch);
    k->nslots = std::max(k->nslots, k->variants.back().nslots);
  }
  k->nreduces = I.rec.reduces.size();
  k->max_threads = std::max(I.max_threads, 1);
  k->run = &GroupKernel::exec;
  k->scratch_bytes = k->total_scratch(k->max_threads);
  k->reads = std::move(I.reads);
  k->writes = std::move(I.writes);
  k->in_place = std::move(I.in_place);
  for (const Program& v : k->variants)  // not written in place: the plan copies instead
    for (int32_t x : v.cyclic_inputs) std::erase(k->in_place, x);
  return k;
}

}  // namespace tlaloc::runtime::host
