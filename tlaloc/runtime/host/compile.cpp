#include "tlaloc/runtime/host/compile.h"

#include <cblas.h>
#include <fmt/format.h>
#include <omp.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <mutex>
#include <string_view>

#include "tlaloc/ir/builder.h"
#include "tlaloc/runtime/host/kernels.h"
#include "tlaloc/runtime/host/plan.h"
#include "tlaloc/runtime/host/rewrite.h"
#include "tlaloc/runtime/host/team.h"

namespace tlaloc::runtime::host {
namespace {

std::atomic<int64_t> g_compiled{0};

struct FreeDeleter {
  void operator()(char* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<char, FreeDeleter>;
// Buffers from 1 MiB on are whole 2 MiB transparent huge pages where the kernel allows
// (madvise mode): fewer TLB misses.
Buffer allocate(int64_t bytes) {
  constexpr size_t kHuge = size_t(2) << 20;
  size_t b = size_t(std::max<int64_t>((bytes + 63) / 64 * 64, 64));
  const bool huge = b >= kHuge / 2;
  if (huge) b = (b + kHuge - 1) / kHuge * kHuge;
  char* p = static_cast<char*>(std::aligned_alloc(huge ? kHuge : 64, b));
  if (!p) throw OutOfMemory(fmt::format("host runtime: out of memory allocating {} bytes", b));
  if (huge) madvise(p, b, MADV_HUGEPAGE);  // advice only: failure changes nothing
  return Buffer(p);
}

void copy_array(Array& dst, const void* src) {
  if (dst.nbytes()) std::memcpy(dst.raw(), src, dst.nbytes());
}

class HostExecutable final : public Executable {
 public:
  int num_threads() const { return plan_.num_threads; }
  HostExecutable(ir::Function f, const Options& o) : Executable(std::move(f)) {
    ir::Function g = fold_transposes_into_dots(function());
    ir::verify(g);
    plan_ = make_plan(g, o);
    step_ns_.assign(plan_.steps.size(), 0.0);
    arena_ = allocate(plan_.arena_bytes);
    scratch_ = allocate(plan_.scratch_bytes);
    const ir::Function& fn = function();
    ptr_.assign(fn.nodes.size(), nullptr);
    for (size_t v = 0; v < fn.nodes.size(); ++v) {
      if (plan_.storage[v] == Storage::arena) ptr_[v] = arena_.get() + plan_.arena_offset[v];
      if (plan_.storage[v] == Storage::constant && fn.nodes[v].op == ir::Op::constant)
        ptr_[v] = const_cast<void*>(fn.nodes[v].attrs.value->raw());
    }
    for (auto& [v, a] : plan_.precomputed) ptr_[size_t(v)] = a.raw();
    for (size_t v = 0; v < fn.nodes.size(); ++v)
      if (plan_.storage[v] == Storage::alias) aliases_.push_back(int32_t(v));
  }

  ~HostExecutable() override {
    if (profile_ && profiled_runs_ > 0) print_profile();
  }

  runtime::Buffer to_lane(Array a) override { return runtime::Buffer(std::move(a)); }
  Array from_lane(const runtime::Buffer&) override {
    fail("{}: the host lane has no device buffers", function().name);
  }

  // Host buffers are the arrays themselves: they are taken out, run on, and put back (the
  // donated ones stay empty).
  std::vector<runtime::Buffer> execute_buffers(std::span<runtime::Buffer> args,
                                               bool donate) override {
    for (size_t i = 0; i < args.size(); ++i)
      if (!args[i].on_host())
        fail("{}: input {}{} is a device buffer; the host lane runs on host arrays",
             function().name, i, input_label(int(i)));
    std::vector<Array> in(args.size());
    for (size_t i = 0; i < args.size(); ++i) in[i] = args[i].take_array();
    auto give_back = [&] {
      for (size_t i = 0; i < args.size(); ++i)
        if (in[i].raw() != nullptr) args[i] = runtime::Buffer(std::move(in[i]));
    };
    std::vector<Array> out;
    try {
      out = donate ? execute_donated(in) : execute_arrays(in);
    } catch (...) {
      give_back();
      throw;
    }
    give_back();
    std::vector<runtime::Buffer> res;
    res.reserve(out.size());
    for (Array& a : out) res.emplace_back(std::move(a));
    return res;
  }

  std::vector<Array> execute_arrays(std::span<const Array> inputs) override {
    std::vector<Array> outs = alloc_outputs();
    bind(inputs, outs);
    copy_inputs_out(outs);
    execute();
    copy_duplicates(outs);
    return outs;
  }

  std::vector<Array> execute_donated(std::span<Array> inputs) override {
    const ir::Function& fn = function();
    for (size_t a = 0; a < fn.aliases.size(); ++a) {
      int j = fn.aliases[a].input;
      for (size_t b = 0; b < a; ++b)
        if (inputs[size_t(fn.aliases[b].input)].raw() == inputs[size_t(j)].raw())
          fail("{}: donated inputs {} and {} share storage", fn.name, fn.aliases[b].input, j);
    }
    std::vector<Array> outs(size_t(fn.num_outputs()));
    std::vector<bool> donated_direct(size_t(fn.num_outputs()), false);
    for (size_t a = 0; a < fn.aliases.size(); ++a)
      if (plan_.alias_in_place[a]) {
        auto& al = fn.aliases[a];
        outs[size_t(al.output)] = std::move(inputs[size_t(al.input)]);
        donated_direct[size_t(al.output)] = true;
      }
    for (int i = 0; i < fn.num_outputs(); ++i)
      if (!donated_direct[size_t(i)])
        outs[size_t(i)] = Array(fn.output_type(i).dtype, fn.output_type(i).shape);
    // Inputs moved into outputs are still read under their old storage.
    for (int i = 0; i < fn.num_inputs(); ++i)
      ptr_[size_t(fn.inputs[size_t(i)])] = const_cast<void*>(inputs[size_t(i)].raw());
    for (size_t a = 0; a < fn.aliases.size(); ++a)
      if (plan_.alias_in_place[a])
        ptr_[size_t(fn.inputs[size_t(fn.aliases[a].input)])] =
            outs[size_t(fn.aliases[a].output)].raw();
    bind_outputs(outs);
    copy_inputs_out(outs);
    execute();
    copy_duplicates(outs);
    // Donated outputs not updated in place: copy into the donated storage.
    for (size_t a = 0; a < fn.aliases.size(); ++a) {
      if (plan_.alias_in_place[a]) continue;
      auto& al = fn.aliases[a];
      Array& donor = inputs[size_t(al.input)];
      copy_array(donor, outs[size_t(al.output)].raw());
      outs[size_t(al.output)] = std::move(donor);
    }
    for (const auto& al : fn.aliases) inputs[size_t(al.input)] = Array();
    return outs;
  }

 private:
  std::vector<Array> alloc_outputs() const {
    const ir::Function& fn = function();
    std::vector<Array> outs;
    outs.reserve(size_t(fn.num_outputs()));
    for (int i = 0; i < fn.num_outputs(); ++i)
      outs.emplace_back(fn.output_type(i).dtype, fn.output_type(i).shape);
    return outs;
  }

  void bind(std::span<const Array> inputs, std::vector<Array>& outs) {
    const ir::Function& fn = function();
    for (int i = 0; i < fn.num_inputs(); ++i)
      ptr_[size_t(fn.inputs[size_t(i)])] = const_cast<void*>(inputs[size_t(i)].raw());
    bind_outputs(outs);
  }
  void bind_outputs(std::vector<Array>& outs) {
    const ir::Function& fn = function();
    for (int i = 0; i < fn.num_outputs(); ++i)
      if (plan_.output_direct[size_t(i)])
        ptr_[size_t(fn.results[size_t(i)])] = outs[size_t(i)].raw();
    // Aliases last: their sources (inputs, outputs) are bound by now; a source precedes its
    // alias, so chains resolve in order.
    for (int32_t v : aliases_) {
      auto [src, off] = plan_.alias_of[size_t(v)];
      ptr_[size_t(v)] = static_cast<char*>(ptr_[size_t(src)]) + off;
    }
  }
  // Outputs that are inputs or constants: copied before the run (inputs may be donated).
  void copy_inputs_out(std::vector<Array>& outs) {
    const ir::Function& fn = function();
    for (int i = 0; i < fn.num_outputs(); ++i) {
      ir::ValueId v = fn.results[size_t(i)];
      Storage s = plan_.storage[size_t(v)];
      if (plan_.output_direct[size_t(i)] || s == Storage::output || s == Storage::arena) continue;
      copy_array(outs[size_t(i)], ptr_[size_t(v)]);
    }
  }
  // Outputs naming a value another output already holds.
  void copy_duplicates(std::vector<Array>& outs) {
    const ir::Function& fn = function();
    for (int i = 0; i < fn.num_outputs(); ++i) {
      ir::ValueId v = fn.results[size_t(i)];
      Storage s = plan_.storage[size_t(v)];
      if (!plan_.output_direct[size_t(i)] && (s == Storage::output || s == Storage::arena))
        copy_array(outs[size_t(i)], ptr_[size_t(v)]);
    }
  }

  // The steps in order on thread 0 of one team of plan_.num_threads threads (team.h).
  void execute() {
    run_in_team(
        plan_.num_threads, team_state_,
        [](void* self) { static_cast<HostExecutable*>(self)->steps(); }, this);
  }
  void steps() {
    Frame fr{ptr_.data(), scratch_.get(), plan_.num_threads};
    if (!profile_) {
      for (const auto& k : plan_.steps) k->run(*k, fr);
      return;
    }
    for (size_t s = 0; s < plan_.steps.size(); ++s) {
      double t0 = now_ns();
      plan_.steps[s]->run(*plan_.steps[s], fr);
      step_ns_[s] += now_ns() - t0;
    }
    ++profiled_runs_;
  }

  // Wall time, or with TLALOC_HOST_PROFILE=cpu the calling thread's CPU time (steadier on a
  // shared machine; counts no worker threads, so use it with one thread).
  double now_ns() const {
    if (!profile_cpu_)
      return std::chrono::duration<double, std::nano>(
                 std::chrono::steady_clock::now().time_since_epoch())
          .count();
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return double(t.tv_sec) * 1e9 + double(t.tv_nsec);
  }

  void print_profile() const {
    std::vector<size_t> order(step_ns_.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return step_ns_[a] > step_ns_[b]; });
    double total = 0;
    for (double t : step_ns_) total += t;
    fmt::print(
        stderr, "host profile of {} ({} steps, {} runs, {:.1f} us/run{}; arena {:.1f} MiB):\n",
        function().name, step_ns_.size(), profiled_runs_,
        total / 1e3 / double(std::max<int64_t>(profiled_runs_, 1)),
        profile_cpu_ ? ", calling thread's CPU time" : "", double(plan_.arena_bytes) / (1 << 20));
    const double runs = double(std::max<int64_t>(profiled_runs_, 1));
    // By kind (the label's first word: fused, dot_general, tlaloc.attention, ...).
    std::map<std::string, std::pair<double, int>> kinds;
    for (size_t i = 0; i < step_ns_.size(); ++i) {
      const std::string& l = plan_.steps[i]->label;
      auto& k = kinds[l.substr(0, l.find(' '))];
      k.first += step_ns_[i];
      ++k.second;
    }
    for (const auto& [name, k] : kinds)
      fmt::print(stderr, "  {:9.1f} us  {:5.1f}%  {} steps of {}\n", k.first / 1e3 / runs,
                 100 * k.first / total, k.second, name);
    for (size_t i = 0; i < order.size() && i < top_; ++i)
      fmt::print(stderr, "  {:9.1f} us  {:5.1f}%  #{} {}\n", step_ns_[order[i]] / 1e3 / runs,
                 100 * step_ns_[order[i]] / total, order[i], plan_.steps[order[i]]->label);
  }

  std::vector<int32_t> aliases_;  // values of Storage::alias, in order
  Plan plan_;
  TeamState team_state_;  // team or one thread, whichever runs this step faster now
  bool profile_ = std::getenv("TLALOC_HOST_PROFILE") != nullptr;
  bool profile_cpu_ = profile_ && std::string_view(std::getenv("TLALOC_HOST_PROFILE")) == "cpu";
  // TLALOC_HOST_PROFILE_TOP=N: how many of the slowest steps the profile lists (25).
  size_t top_ = std::getenv("TLALOC_HOST_PROFILE_TOP")
                    ? size_t(std::max(std::atoi(std::getenv("TLALOC_HOST_PROFILE_TOP")), 0))
                    : 25;
  std::vector<double> step_ns_;
  int64_t profiled_runs_ = 0;
  Buffer arena_, scratch_;
  std::vector<void*> ptr_;
};

}  // namespace

std::unique_ptr<Executable> compile(const ir::Function& f, Options options) {
  ir::verify(f);
  // GEMMs are split into shape-determined tiles over tlaloc's own threads; OpenBLAS runs each
  // tile single-threaded so results do not depend on the thread count.
  // The OpenMP build of OpenBLAS does that by setting the calling thread's OpenMP thread count
  // to 1 (and must keep it: at 2 a BLAS call outside a parallel region splits the GEMM its own
  // way), so num_threads = 0 resolves to OpenMP's default as read before that first call.
  static std::once_flag blas_once;
  static int default_threads = 1;
  std::call_once(blas_once, [] {
    default_threads = std::max(omp_get_max_threads(), 1);
    openblas_set_num_threads(1);
  });
  if (options.num_threads <= 0) options.num_threads = default_threads;
  auto e = std::make_unique<HostExecutable>(split_reductions_of_concatenations(expand_for_host(f)),
                                            options);
  ++g_compiled;
  return e;
}

int64_t compile_count() { return g_compiled.load(); }

int num_threads_of(const Executable& e) {
  const auto* h = dynamic_cast<const HostExecutable*>(&e);
  if (!h) fail("num_threads_of: {} is not a host-lane executable", e.function().name);
  return h->num_threads();
}

}  // namespace tlaloc::runtime::host
