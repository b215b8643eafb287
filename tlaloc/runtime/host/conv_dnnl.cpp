// 2-D f32 convolutions through oneDNN (conv_dnnl.h). As PyTorch's ideep does: the primitive
// picks its own (blocked) layouts (format_tag::any) and reorders move data between those and
// the plain NCHW / (G)OIHW tensors, in per-thread scratch. Per batch chunk size (the full chunk
// and the tail) one set of primitives, built here once; oneDNN's scratchpad is the kernel's.
// oneDNN is the OpenMP build (dnnl_version()->cpu_runtime): built with one OpenMP thread, each
// primitive plans for one thread, and it runs under an OpenMP thread count of 1 (inside the
// team's parallel region oneDNN does not nest anyway).
#include "tlaloc/runtime/host/conv_dnnl.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <oneapi/dnnl/dnnl.hpp>

#include "tlaloc/runtime/host/team.h"

namespace tlaloc::runtime::host {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

// The calling thread's OpenMP thread count is 1 while this lives.
struct OneThread {
  int saved = omp_get_max_threads();
  OneThread() { omp_set_num_threads(1); }
  ~OneThread() { omp_set_num_threads(saved); }
};

// One tensor the primitive reads or writes: its plain layout, the primitive's, and the reorder
// between them (none when they are the same).
struct Arg {
  memory::desc plain, inner;
  std::optional<dnnl::reorder> re;
  int64_t bytes = 0;  // of the inner layout when a reorder is needed, else 0
};

// The primitives of one batch chunk size.
struct Set {
  int64_t n = 0;         // images
  dnnl::primitive conv;  // the pass's primitive
  Arg a, b, out;         // operands a, b and the result
  int64_t b_off = 0;     // shared scratch of b's inner layout (forward / input_grad: per run)
};

struct DnnlConvKernel : Kernel {
  Conv2d s;
  Conv2dPass pass = Conv2dPass::forward;
  int32_t a = -1, b = -1, out = -1;
  int32_t bias = -1;              // conv_add_epilogue: [O] added to every output channel, or -1
  int64_t chunk = 1, chunks = 1;  // images per chunk (the last may be a tail), their count
  std::vector<Set> sets;          // [0] full chunks, [1] the tail (if any)
  int64_t a_img = 0, out_img = 0, b_img = 0;  // elements per image of a, out (and b: kernel_grad)
  int64_t w_numel = 0, part_off = 0;          // kernel_grad: per-chunk partial d_w (plain)
  int64_t thread_bytes = 0, thread_off = 0, pad_bytes = 0;

  const Set& set_of(int64_t c) const { return sets[c < chunks - 1 || sets.size() == 1 ? 0 : 1]; }

  // Runs chunk c on the calling thread with per-thread scratch `mine`.
  void run_chunk(int64_t c, const Frame& f, char* mine) const {
    const Set& st = set_of(c);
    const int64_t n0 = c * chunk;
    dnnl::stream strm(engine());
    memory pad(memory::desc({pad_bytes}, memory::data_type::u8, Tag::x), engine(), mine);
    char* at = mine + (pad_bytes + 63) / 64 * 64;
    auto in = [&](const Arg& g, const float* src) {
      memory m(g.plain, engine(), const_cast<float*>(src));
      if (!g.re) return m;
      memory i(g.inner, engine(), at);
      at += g.bytes;
      g.re->execute(strm, {{DNNL_ARG_FROM, m}, {DNNL_ARG_TO, i}, {DNNL_ARG_SCRATCHPAD, pad}});
      return i;
    };
    const float* pa = static_cast<const float*>(f.ptr[a]) + n0 * a_img;
    const memory ma = in(st.a, pa);
    memory mb;
    if (pass == Conv2dPass::kernel_grad)
      mb = in(st.b, static_cast<const float*>(f.ptr[b]) + n0 * b_img);
    else if (st.b.re)
      mb = memory(st.b.inner, engine(), f.scratch + st.b_off);
    else
      mb = memory(st.b.plain, engine(), f.ptr[b]);
    float* po = pass == Conv2dPass::kernel_grad
                    ? reinterpret_cast<float*>(f.scratch + part_off) + c * w_numel
                    : static_cast<float*>(f.ptr[out]) + n0 * out_img;
    memory mo_plain(st.out.plain, engine(), po);
    memory mo = st.out.re ? memory(st.out.inner, engine(), at) : mo_plain;
    std::unordered_map<int, memory> args{{DNNL_ARG_SCRATCHPAD, pad}};
    switch (pass) {
      case Conv2dPass::forward:
        args.insert({{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mo}});
        break;
      case Conv2dPass::input_grad:
        args.insert({{DNNL_ARG_DIFF_DST, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DIFF_SRC, mo}});
        break;
      case Conv2dPass::kernel_grad:
        args.insert({{DNNL_ARG_SRC, ma}, {DNNL_ARG_DIFF_DST, mb}, {DNNL_ARG_DIFF_WEIGHTS, mo}});
        break;
    }
    st.conv.execute(strm, args);
    if (st.out.re)
      st.out.re->execute(
          strm, {{DNNL_ARG_FROM, mo}, {DNNL_ARG_TO, mo_plain}, {DNNL_ARG_SCRATCHPAD, pad}});
    strm.wait();
    if (bias >= 0) {  // the chunk's output is in cache: one add per element, as the add would
      const float* bv = static_cast<const float*>(f.ptr[bias]);
      const int64_t plane = s.Ho * s.Wo;
      for (int64_t i = 0; i < st.n; ++i)
        for (int64_t o = 0; o < s.O; ++o) {
          float* y = po + i * out_img + o * plane;
          const float v = bv[o];
          for (int64_t j = 0; j < plane; ++j) y[j] += v;
        }
    }
  }

  static void exec(const Kernel& k, const Frame& f) {
    const auto& d = as<DnnlConvKernel>(k);
    OneThread one;
    if (d.pass != Conv2dPass::kernel_grad)  // the kernel into each set's layout, once per run
      for (const Set& st : d.sets)
        if (st.b.re) {
          dnnl::stream strm(engine());
          memory pad(memory::desc({d.pad_bytes}, memory::data_type::u8, Tag::x), engine(),
                     f.scratch + d.thread_off);
          memory from(st.b.plain, engine(), f.ptr[d.b]);
          memory to(st.b.inner, engine(), f.scratch + st.b_off);
          st.b.re->execute(strm,
                           {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}, {DNNL_ARG_SCRATCHPAD, pad}});
          strm.wait();
        }
    auto chunks_of = [&](int p, int P) {
      OneThread inner;
      char* mine = f.scratch + d.thread_off + team_thread() * d.thread_bytes;
      for (int64_t c = d.chunks * p / P; c < d.chunks * (p + 1) / P; ++c) d.run_chunk(c, f, mine);
    };
    if (f.num_threads > 1)
      parallel(int(std::min<int64_t>(d.chunks, 64)), chunks_of);
    else
      chunks_of(0, 1);
    if (d.pass == Conv2dPass::kernel_grad) {  // partial sums, added in chunk order
      const float* part = reinterpret_cast<const float*>(f.scratch + d.part_off);
      float* o = static_cast<float*>(f.ptr[d.out]);
      const int64_t n = d.w_numel;
      std::copy(part, part + n, o);
      for (int64_t c = 1; c < d.chunks; ++c)
        for (int64_t i = 0; i < n; ++i) o[i] += part[c * n + i];
    }
  }
};

memory::desc plain(memory::dims dims, Tag tag) {
  return memory::desc(dims, memory::data_type::f32, tag);
}
memory::desc any(memory::dims dims) { return plain(dims, Tag::any); }

// Arg between plain layout p and the primitive's q; `to_inner`: the reorder reads p.
Arg make_arg(const memory::desc& p, const memory::desc& q, bool to_inner,
             const dnnl::primitive_attr& attr, int64_t* pad) {
  Arg g{p, q, std::nullopt, 0};
  if (p == q) return g;
  const auto rpd = to_inner ? dnnl::reorder::primitive_desc(engine(), p, engine(), q, attr)
                            : dnnl::reorder::primitive_desc(engine(), q, engine(), p, attr);
  *pad = std::max<int64_t>(*pad, int64_t(rpd.scratchpad_desc().get_size()));
  g.re = dnnl::reorder(rpd);
  g.bytes = (int64_t(q.get_size()) + 63) / 64 * 64;
  return g;
}

}  // namespace

std::optional<Conv2d> conv2d_of(const ir::Function& fn, const ir::Node& n) {
  const ir::Attrs& a = n.attrs;
  const ir::ConvDimensionNumbers& d = a.conv_dimension_numbers;
  const Shape& xs = fn.type(n.operands[0]).shape;
  const Shape& ks = fn.type(n.operands[1]).shape;
  const Shape& ys = n.type.shape;
  const bool layout =
      xs.rank() == 4 && d.input_batch_dimension == 0 && d.input_feature_dimension == 1 &&
      d.input_spatial_dimensions == std::vector<int64_t>{2, 3} &&
      d.kernel_output_feature_dimension == 0 && d.kernel_input_feature_dimension == 1 &&
      d.kernel_spatial_dimensions == std::vector<int64_t>{2, 3} && d.output_batch_dimension == 0 &&
      d.output_feature_dimension == 1 && d.output_spatial_dimensions == std::vector<int64_t>{2, 3};
  if (n.type.dtype != DType::f32 || !layout || a.batch_group_count != 1) return std::nullopt;
  for (int i = 0; i < 2; ++i)
    if (a.lhs_dilation[size_t(i)] != 1 || a.padding_low[size_t(i)] < 0 ||
        a.padding_high[size_t(i)] < 0)
      return std::nullopt;
  if (xs.numel() == 0 || ks.numel() == 0 || ys.numel() == 0) return std::nullopt;
  Conv2d s;
  s.N = xs[0], s.C = xs[1], s.H = xs[2], s.W = xs[3];
  s.O = ks[0], s.G = a.feature_group_count, s.kh = ks[2], s.kw = ks[3];
  s.Ho = ys[2], s.Wo = ys[3];
  s.sh = a.window_strides[0], s.sw = a.window_strides[1];
  s.pt = a.padding_low[0], s.pl = a.padding_low[1];
  s.pb = a.padding_high[0], s.pr = a.padding_high[1];
  s.dh = a.rhs_dilation[0], s.dw = a.rhs_dilation[1];
  return s;
}

std::unique_ptr<Kernel> make_conv2d_dnnl(const Conv2d& s, Conv2dPass pass, int32_t a, int32_t b,
                                         int32_t out, int num_threads) {
  auto k = std::make_unique<DnnlConvKernel>();
  k->s = s;
  k->pass = pass;
  k->a = a, k->b = b, k->out = out;
  // Chunks: about 8 of them (work for a team), 4 to 16 images each; a function of N only.
  k->chunk = std::clamp<int64_t>((s.N + 7) / 8, std::min<int64_t>(s.N, 4), 16);
  k->chunks = (s.N + k->chunk - 1) / k->chunk;
  k->w_numel = s.O * (s.C / s.G) * s.kh * s.kw;
  const int64_t x_img = s.C * s.H * s.W, y_img = s.O * s.Ho * s.Wo;
  const memory::dims strides{s.sh, s.sw}, dil{s.dh - 1, s.dw - 1};
  const memory::dims pad_l{s.pt, s.pl}, pad_r{s.pb, s.pr};
  const memory::dims wd = s.G == 1 ? memory::dims{s.O, s.C, s.kh, s.kw}
                                   : memory::dims{s.G, s.O / s.G, s.C / s.G, s.kh, s.kw};
  const Tag wtag = s.G == 1 ? Tag::oihw : Tag::goihw;
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  int64_t pad = 0, shared = 0, per_thread = 0;
  try {
    OneThread one;
    const int64_t tail = s.N % k->chunk;
    for (int64_t n : {k->chunk, tail}) {
      if (n == 0) continue;
      const memory::dims xd{n, s.C, s.H, s.W}, yd{n, s.O, s.Ho, s.Wo};
      // Few input features (a first layer): the forward reads plain NCHW (oneDNN's nchw-input
      // kernels, faster there than a reorder to its blocked layout; docs/benchmarks.md).
      const memory::desc x_fwd =
          pass == Conv2dPass::forward && s.C < 4 ? plain(xd, Tag::nchw) : any(xd);
      const auto fwd = dnnl::convolution_forward::primitive_desc(
          dnnl::convolution_forward::desc(pass == Conv2dPass::forward
                                              ? dnnl::prop_kind::forward_inference
                                              : dnnl::prop_kind::forward_training,
                                          dnnl::algorithm::convolution_direct, x_fwd, any(wd),
                                          any(yd), strides, dil, pad_l, pad_r),
          attr, engine());
      Set st;
      st.n = n;
      if (pass == Conv2dPass::forward) {
        st.conv = dnnl::convolution_forward(fwd);
        pad = std::max<int64_t>(pad, int64_t(fwd.scratchpad_desc().get_size()));
        st.a = make_arg(plain(xd, Tag::nchw), fwd.src_desc(), true, attr, &pad);
        st.b = make_arg(plain(wd, wtag), fwd.weights_desc(), true, attr, &pad);
        st.out = make_arg(plain(yd, Tag::nchw), fwd.dst_desc(), false, attr, &pad);
      } else if (pass == Conv2dPass::input_grad) {
        const auto bwd = dnnl::convolution_backward_data::primitive_desc(
            dnnl::convolution_backward_data::desc(dnnl::algorithm::convolution_direct, any(xd),
                                                  any(wd), any(yd), strides, dil, pad_l, pad_r),
            attr, engine(), fwd);
        st.conv = dnnl::convolution_backward_data(bwd);
        pad = std::max<int64_t>(pad, int64_t(bwd.scratchpad_desc().get_size()));
        st.a = make_arg(plain(yd, Tag::nchw), bwd.diff_dst_desc(), true, attr, &pad);
        st.b = make_arg(plain(wd, wtag), bwd.weights_desc(), true, attr, &pad);
        st.out = make_arg(plain(xd, Tag::nchw), bwd.diff_src_desc(), false, attr, &pad);
      } else {
        const auto bwd = dnnl::convolution_backward_weights::primitive_desc(
            dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, any(xd),
                                                     any(wd), any(yd), strides, dil, pad_l, pad_r),
            attr, engine(), fwd);
        st.conv = dnnl::convolution_backward_weights(bwd);
        pad = std::max<int64_t>(pad, int64_t(bwd.scratchpad_desc().get_size()));
        st.a = make_arg(plain(xd, Tag::nchw), bwd.src_desc(), true, attr, &pad);
        st.b = make_arg(plain(yd, Tag::nchw), bwd.diff_dst_desc(), true, attr, &pad);
        st.out = make_arg(plain(wd, wtag), bwd.diff_weights_desc(), false, attr, &pad);
      }
      if (pass != Conv2dPass::kernel_grad && st.b.re) {
        st.b_off = shared;
        shared += st.b.bytes;
      }
      const int64_t mine =
          st.a.bytes + st.out.bytes + (pass == Conv2dPass::kernel_grad ? st.b.bytes : 0);
      per_thread = std::max(per_thread, mine);
      k->sets.push_back(std::move(st));
    }
  } catch (const dnnl::error&) {
    return nullptr;
  }
  k->pad_bytes = std::max<int64_t>(pad, 64);
  k->a_img = pass == Conv2dPass::input_grad ? y_img : x_img;
  k->b_img = y_img;
  k->out_img = pass == Conv2dPass::input_grad ? x_img : y_img;
  if (pass == Conv2dPass::kernel_grad) {
    k->part_off = shared;
    shared += (k->chunks * k->w_numel * 4 + 63) / 64 * 64;
  }
  k->thread_off = shared;
  k->thread_bytes = (k->pad_bytes + 63) / 64 * 64 + per_thread;
  k->scratch_bytes = shared + k->thread_bytes * std::max(num_threads, 1);
  k->run = &DnnlConvKernel::exec;
  k->reads = {a, b};
  k->writes = {out};
  static const char* names[] = {"forward", "input_grad", "kernel_grad"};
  k->label = fmt::format("convolution onednn {} N={} C={} O={} groups={} {}x{} chunk={}",
                         names[int(pass)], s.N, s.C, s.O, s.G, s.kh, s.kw, k->chunk);
  return k;
}

bool conv_add_epilogue(Kernel& k, int32_t v) {
  if (k.run != &DnnlConvKernel::exec) return false;
  auto& d = static_cast<DnnlConvKernel&>(k);
  if (d.pass != Conv2dPass::forward || d.bias >= 0) return false;
  d.bias = v;
  d.reads.push_back(v);
  d.label += " + bias";
  return true;
}

}  // namespace tlaloc::runtime::host
