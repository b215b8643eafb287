// Internal to instr.cpp / instr_avx2.cpp: the elementwise instruction loops and the functions
// choosing them, compiled once per instruction set. The including file defines
// TLALOC_INSTR_ISA (the namespace they go in) and sets the target options before including.
// Semantics: see instr.cpp's header.
namespace tlaloc::runtime::host::TLALOC_INSTR_ISA {
namespace {

using ir::Op;

using namespace ir::scalar;

// Element loops unrolled 4 times after vectorizing: a block pass is then mostly its loads, op
// and stores rather than loop control, which matters because a fused group makes several passes.
#define TLALOC_UNROLL _Pragma("GCC unroll 4")

// ---- loops ----------------------------------------------------------------------------------
template <class T, class F>
void unary_loop(const Instr& in, void* const* r, void* const*, int64_t, int64_t n) {
  T* d = reg<T>(r, in.dst);
  const T* a = reg<T>(r, in.a);
  TLALOC_UNROLL
  for (int64_t i = 0; i < n; ++i) d[i] = F::template f<T>(a[i]);
}
// S (binary and compare loops): kBlocks, or which operand is one broadcast value (kScalarA,
// kScalarB), read once per block instead of once per element.
template <class T, bool Scalar>
struct Operand {
  const T* p;
  T s{};
  Operand(void* const* r, int32_t k) : p(reg<T>(r, k)) {
    if constexpr (Scalar) s = p[0];
  }
  T operator[](int64_t i) const {
    if constexpr (Scalar)
      return s;
    else
      return p[i];
  }
};
template <class T, class F, int S>
void binary_loop(const Instr& in, void* const* r, void* const*, int64_t, int64_t n) {
  T* d = reg<T>(r, in.dst);
  const Operand<T, S == kScalarA> a(r, in.a);
  const Operand<T, S == kScalarB> b(r, in.b);
  TLALOC_UNROLL
  for (int64_t i = 0; i < n; ++i) d[i] = F::template f<T>(a[i], b[i]);
}
template <class T, ir::Comparison C, int S>
void compare_loop(const Instr& in, void* const* r, void* const*, int64_t, int64_t n) {
  uint8_t* d = reg<uint8_t>(r, in.dst);
  const Operand<T, S == kScalarA> a(r, in.a);
  const Operand<T, S == kScalarB> b(r, in.b);
  TLALOC_UNROLL
  for (int64_t i = 0; i < n; ++i) {
    bool v;
    if constexpr (C == ir::Comparison::EQ) v = a[i] == b[i];
    if constexpr (C == ir::Comparison::NE) v = a[i] != b[i];
    if constexpr (C == ir::Comparison::LT) v = a[i] < b[i];
    if constexpr (C == ir::Comparison::LE) v = a[i] <= b[i];
    if constexpr (C == ir::Comparison::GT) v = a[i] > b[i];
    if constexpr (C == ir::Comparison::GE) v = a[i] >= b[i];
    d[i] = v;
  }
}
// A chain's c operand that is block c times the broadcast value in register e: the multiply a
// separate instruction would have made, rounded the same.
template <class T>
struct ScaledOperand {
  const T* p;
  T s;
  ScaledOperand(void* const* r, int32_t k, int32_t e) : p(reg<T>(r, k)), s(reg<T>(r, e)[0]) {}
  T operator[](int64_t i) const { return Mul::f<T>(p[i], s); }
};
// Two chained arithmetic ops in one pass: d = F2(c, F1(a, b)) (Right) or F2(F1(a, b), c), each
// rounded to T as two separate instructions would round (no contraction). SC: c is a block (0),
// one broadcast value (1) or a block times a broadcast value (2, ScaledOperand).
template <class T, class F1, class F2, bool Right, bool SA, bool SB, int SC>
void chain_loop(const Instr& in, void* const* r, void* const*, int64_t, int64_t n) {
  T* d = reg<T>(r, in.dst);
  const Operand<T, SA> a(r, in.a);
  const Operand<T, SB> b(r, in.b);
  const auto c = [&] {
    if constexpr (SC == 2)
      return ScaledOperand<T>(r, in.c, in.e);
    else
      return Operand<T, SC == 1>(r, in.c);
  }();
  TLALOC_UNROLL
  for (int64_t i = 0; i < n; ++i) {
    T t = F1::template f<T>(a[i], b[i]);
    d[i] = Right ? F2::template f<T>(c[i], t) : F2::template f<T>(t, c[i]);
  }
}
template <class T>
void select_loop(const Instr& in, void* const* r, void* const*, int64_t, int64_t n) {
  T* d = reg<T>(r, in.dst);
  const uint8_t* p = reg<uint8_t>(r, in.a);
  const T* x = reg<T>(r, in.b);
  const T* y = reg<T>(r, in.c);
  TLALOC_UNROLL
  for (int64_t i = 0; i < n; ++i) d[i] = p[i] ? x[i] : y[i];
}
// select with a scalar (broadcast) predicate: copies one whole operand.
template <class T>
void select_scalar_loop(const Instr& in, void* const* r, void* const*, int64_t, int64_t n) {
  const T* s = reg<uint8_t>(r, in.a)[0] ? reg<T>(r, in.b) : reg<T>(r, in.c);
  T* d = reg<T>(r, in.dst);
  if (d != s) std::memcpy(d, s, size_t(n) * sizeof(T));
}
template <class T>
void clamp_loop(const Instr& in, void* const* r, void* const*, int64_t, int64_t n) {
  T* d = reg<T>(r, in.dst);
  const T* lo = reg<T>(r, in.a);
  const T* x = reg<T>(r, in.b);
  const T* hi = reg<T>(r, in.c);
  TLALOC_UNROLL
  for (int64_t i = 0; i < n; ++i) d[i] = Min::f<T>(Max::f<T>(x[i], lo[i]), hi[i]);
}

template <template <class> class L, int types>
InstrFn by_type(DType t) {
  switch (t) {
    case DType::f32:
    case DType::bf16:
    case DType::f16:
      if constexpr ((types & kF) != 0) return L<float>::fn;
      break;
    case DType::f64:
      if constexpr ((types & kF) != 0) return L<double>::fn;
      break;
    case DType::s32:
      if constexpr ((types & kS) != 0) return L<int32_t>::fn;
      break;
    case DType::u32:
      if constexpr ((types & kU) != 0) return L<uint32_t>::fn;
      break;
    case DType::i1:
      if constexpr ((types & kB) != 0) return L<uint8_t>::fn;
      break;
  }
  return nullptr;
}
template <class F>
struct Unary {
  template <class T>
  struct L {
    static constexpr InstrFn fn = &unary_loop<T, F>;
  };
};
template <class F, int S>
struct Binary {
  template <class T>
  struct L {
    static constexpr InstrFn fn = &binary_loop<T, F, S>;
  };
};
template <ir::Comparison C, int S>
struct Cmp {
  template <class T>
  struct L {
    static constexpr InstrFn fn = &compare_loop<T, C, S>;
  };
};
template <class T>
struct SelectL {
  static constexpr InstrFn fn = &select_loop<T>;
};
template <class T>
struct SelectScalarL {
  static constexpr InstrFn fn = &select_scalar_loop<T>;
};
template <class T>
struct ClampL {
  static constexpr InstrFn fn = &clamp_loop<T>;
};
template <class F>
InstrFn unary(DType t) {
  return by_type<Unary<F>::template L, F::types>(t);
}
template <class F>
InstrFn binary(DType t, int s) {
  switch (s) {
    case kScalarA:
      return by_type<Binary<F, kScalarA>::template L, F::types>(t);
    case kScalarB:
      return by_type<Binary<F, kScalarB>::template L, F::types>(t);
    default:
      return by_type<Binary<F, kBlocks>::template L, F::types>(t);
  }
}
template <ir::Comparison C>
InstrFn compare(DType t, int s) {
  constexpr int types = kF | kS | kU | kB;
  switch (s) {
    case kScalarA:
      return by_type<Cmp<C, kScalarA>::template L, types>(t);
    case kScalarB:
      return by_type<Cmp<C, kScalarB>::template L, types>(t);
    default:
      return by_type<Cmp<C, kBlocks>::template L, types>(t);
  }
}

// ---- loads, stores, rounding, convert -------------------------------------------------------
template <DType S>
void load_scalar(const Instr& in, void* const* r, void* const* ptr, int64_t, int64_t n) {
  using T = Compute<S>;
  T v = load_elem<S>(ptr[in.value], in.map->offset);
  T* d = reg<T>(r, in.dst);
  TLALOC_UNROLL
  for (int64_t i = 0; i < n; ++i) d[i] = v;
}
template <DType S>
void load_contiguous(const Instr& in, void* const* r, void* const* ptr, int64_t base, int64_t n) {
  using T = Compute<S>;
  const void* p = ptr[in.value];
  int64_t o = in.map->offset + base;
  T* d = reg<T>(r, in.dst);
  if constexpr (S == DType::bf16 || S == DType::f16)
    for (int64_t i = 0; i < n; ++i) d[i] = load_elem<S>(p, o + i);
  else
    std::memcpy(d, static_cast<const T*>(p) + o, size_t(n) * sizeof(T));
}
template <DType S>
void load_general(const Instr& in, void* const* r, void* const* ptr, int64_t base, int64_t n) {
  using T = Compute<S>;
  const LoadMap& m = *in.map;
  const void* p = ptr[in.value];
  T* d = reg<T>(r, in.dst);
  const int rank = int(m.dims.size());
  int64_t coord[16];
  int64_t off = m.offset, rem = base;
  for (int k = rank - 1; k >= 0; --k) {
    coord[k] = rem % m.dims[size_t(k)];
    rem /= m.dims[size_t(k)];
    off += coord[k] * m.strides[size_t(k)];
  }
  const int64_t inner = m.dims[size_t(rank - 1)], s = m.strides[size_t(rank - 1)];
  int64_t i = 0;
  while (i < n) {
    int64_t run = std::min(inner - coord[rank - 1], n - i);
    if (s == 0) {
      T v = load_elem<S>(p, off);
      for (int64_t j = 0; j < run; ++j) d[i + j] = v;
    } else if (s == 1) {  // a contiguous run (e.g. a bias row broadcast over rows)
      if constexpr (S == DType::bf16 || S == DType::f16)
        for (int64_t j = 0; j < run; ++j) d[i + j] = load_elem<S>(p, off + j);
      else
        std::memcpy(d + i, static_cast<const T*>(p) + off, size_t(run) * sizeof(T));
    } else {
      for (int64_t j = 0; j < run; ++j) d[i + j] = load_elem<S>(p, off + j * s);
    }
    i += run;
    off += run * s;
    coord[rank - 1] += run;
    for (int k = rank - 1; k > 0 && coord[k] == m.dims[size_t(k)]; --k) {
      off += m.strides[size_t(k - 1)] - coord[k] * m.strides[size_t(k)];
      coord[k] = 0;
      ++coord[k - 1];
    }
  }
}
template <DType S>
void store(const Instr& in, void* const* r, void* const* ptr, int64_t base, int64_t n) {
  using T = Compute<S>;
  void* p = ptr[in.value];
  const T* a = reg<T>(r, in.a);
  if constexpr (S == DType::bf16 || S == DType::f16)
    for (int64_t i = 0; i < n; ++i) store_elem<S>(p, base + i, a[i]);
  else if (static_cast<T*>(p) + base != a)  // else already there (an in-place input)
    std::memcpy(static_cast<T*>(p) + base, a, size_t(n) * sizeof(T));
}
template <DType S>
float round_to(float f) {
  if constexpr (S == DType::bf16)
    return from_bf16(to_bf16(f));
  else
    return from_f16(to_f16(f));
}
template <DType S>
void round_loop(const Instr& in, void* const* r, void* const*, int64_t, int64_t n) {
  float* d = reg<float>(r, in.dst);
  const float* a = reg<float>(r, in.a);
  TLALOC_UNROLL
  for (int64_t i = 0; i < n; ++i) d[i] = round_to<S>(a[i]);
}

template <class S, class D>
void convert_loop(const Instr& in, void* const* r, void* const*, int64_t, int64_t n) {
  D* d = reg<D>(r, in.dst);
  const S* a = reg<S>(r, in.a);
  TLALOC_UNROLL
  for (int64_t i = 0; i < n; ++i) d[i] = convert<D, S>(a[i]);
}
// Any source to bf16 / f16 with a single rounding.
template <class S, DType To>
void convert_round_loop(const Instr& in, void* const* r, void* const*, int64_t, int64_t n) {
  float* d = reg<float>(r, in.dst);
  const S* a = reg<S>(r, in.a);
  TLALOC_UNROLL
  for (int64_t i = 0; i < n; ++i) {
    float f;
    if constexpr (std::is_same_v<S, float>)
      f = a[i];
    else
      f = to_float_odd(double(a[i]));
    d[i] = round_to<To>(f);
  }
}
template <class S>
InstrFn convert_from(DType to) {
  switch (to) {
    case DType::f32:
      return &convert_loop<S, float>;
    case DType::f64:
      return &convert_loop<S, double>;
    case DType::bf16:
      return &convert_round_loop<S, DType::bf16>;
    case DType::f16:
      return &convert_round_loop<S, DType::f16>;
    case DType::s32:
      return &convert_loop<S, int32_t>;
    case DType::u32:
      return &convert_loop<S, uint32_t>;
    case DType::i1:
      return &convert_loop<S, uint8_t>;
  }
  return nullptr;
}

}  // namespace
InstrFn load_fn(DType storage, int kind) {
  return dispatch(storage, [&]<DType S>() -> InstrFn {
    return kind == 0 ? &load_scalar<S> : kind == 1 ? &load_contiguous<S> : &load_general<S>;
  });
}
InstrFn store_fn(DType storage) {
  return dispatch(storage, []<DType S>() -> InstrFn { return &store<S>; });
}
InstrFn round_fn(DType storage) {
  if (storage == DType::bf16) return &round_loop<DType::bf16>;
  if (storage == DType::f16) return &round_loop<DType::f16>;
  return nullptr;
}

InstrFn convert_fn(DType from, DType to) {
  if (from == to || (compute_dtype(from) == compute_dtype(to) && to == DType::f32)) return nullptr;
  switch (compute_dtype(from)) {
    case DType::f64:
      return convert_from<double>(to);
    case DType::s32:
      return convert_from<int32_t>(to);
    case DType::u32:
      return convert_from<uint32_t>(to);
    case DType::i1:
      return convert_from<uint8_t>(to);
    default:
      return convert_from<float>(to);
  }
}

InstrFn select_scalar_fn(DType t) { return by_type<SelectScalarL, kF | kS | kU | kB>(t); }

InstrFn op_fn(Op op, DType t, ir::Comparison cmp, int scalar) {
  InstrFn f = nullptr;
  // Ops with a scalar formula (ops.def): its loop over the block.
  if (ir::with_formula(op, [&]<class F>() {
        if constexpr (ir::kUnaryFormula<F>)
          f = unary<F>(t);
        else
          f = binary<F>(t, scalar);
      })) {
    if (!f) fail("host runtime: no elementwise kernel for {} on {}", ir::op_name(op), name(t));
    return f;
  }
  switch (op) {
    case Op::compare:
      switch (cmp) {
        case ir::Comparison::EQ:
          f = compare<ir::Comparison::EQ>(t, scalar);
          break;
        case ir::Comparison::NE:
          f = compare<ir::Comparison::NE>(t, scalar);
          break;
        case ir::Comparison::LT:
          f = compare<ir::Comparison::LT>(t, scalar);
          break;
        case ir::Comparison::LE:
          f = compare<ir::Comparison::LE>(t, scalar);
          break;
        case ir::Comparison::GT:
          f = compare<ir::Comparison::GT>(t, scalar);
          break;
        case ir::Comparison::GE:
          f = compare<ir::Comparison::GE>(t, scalar);
          break;
      }
      break;
    case Op::select:
      f = by_type<SelectL, kF | kS | kU | kB>(t);
      break;
    case Op::clamp:
      f = by_type<ClampL, kF | kS | kU>(t);
      break;
    default:
      break;
  }
  if (!f) fail("host runtime: no elementwise kernel for {} on {}", ir::op_name(op), name(t));
  return f;
}

// ---- chained arithmetic ---------------------------------------------------------------------
template <class T, class F1, class F2, int... I>
constexpr std::array<InstrFn, 24> chain_table(std::integer_sequence<int, I...>) {
  return {&chain_loop<T, F1, F2, I / 12 != 0, (I & 1) != 0, ((I >> 1) & 1) != 0, I % 12 / 4>...};
}
template <class T, class F1, class F2>
InstrFn chain_pick(int index) {
  static constexpr auto table = chain_table<T, F1, F2>(std::make_integer_sequence<int, 24>());
  return table[size_t(index)];
}
template <class T, class F1>
InstrFn chain_outer(Op outer, int index) {
  switch (outer) {
    case Op::add:
      return chain_pick<T, F1, Add>(index);
    case Op::subtract:
      return chain_pick<T, F1, Sub>(index);
    case Op::multiply:
      return chain_pick<T, F1, Mul>(index);
    case Op::divide:
      return chain_pick<T, F1, Div>(index);
    default:
      return nullptr;
  }
}

InstrFn chain_fn(Op inner, Op outer, DType t, bool right, bool sa, bool sb, bool sc,
                 bool scaled_c) {
  if (t != DType::f32 || (sc && scaled_c)) return nullptr;
  const int index = (int(sa) | int(sb) << 1 | (scaled_c ? 2 : int(sc)) << 2) + int(right) * 12;
  switch (inner) {
    case Op::add:
      return chain_outer<float, Add>(outer, index);
    case Op::subtract:
      return chain_outer<float, Sub>(outer, index);
    case Op::multiply:
      return chain_outer<float, Mul>(outer, index);
    case Op::divide:
      return chain_outer<float, Div>(outer, index);
    default:
      return nullptr;
  }
}

}  // namespace tlaloc::runtime::host::TLALOC_INSTR_ISA

#undef TLALOC_UNROLL
