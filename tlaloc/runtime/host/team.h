// Internal: the threads of one run of a compiled step. A run with more than one thread opens
// one OpenMP parallel region for the whole step: thread 0 runs the kernels in order and the
// others wait for parallel parts (spinning briefly, then sleeping on a futex), instead of one
// OpenMP fork / join per kernel. OpenMP threads, because OpenBLAS's OpenMP build keys its
// per-thread buffers by omp_get_thread_num(). Parts are claimed, not assigned: each thread
// takes its own share of the parts first (the same share every kernel, so each core's cache
// keeps its data), then any part still free, so a thread slowed by a busy machine holds up
// nothing but the part it is running.
#pragma once

#include <cstdint>
#include <type_traits>

namespace tlaloc::runtime::host {

using PartFn = void (*)(void* ctx, int p, int P);

// Runs fn(ctx, p, P) for every part p in [0, P), P = min(n, 64), on the calling thread's team
// (the caller is thread 0; a part may run on any of its threads); returns once every part has
// finished. Without a team of more than one thread, it runs fn(ctx, 0, 1) on the caller: a
// kernel's parts must together compute the same whatever P is. Parts must not throw.
void parallel_parts(int n, PartFn fn, void* ctx);

// The calling thread's index in its team (0 outside a team): for per-thread scratch, which a
// part must index by thread, not by part.
int team_thread();

template <class F>
void parallel(int n, F&& f) {
  if (n <= 1) {
    f(0, 1);
    return;
  }
  using G = std::remove_reference_t<F>;
  parallel_parts(
      n, [](void* c, int t, int T) { (*static_cast<G*>(c))(t, T); }, &f);
}

// Parts handed to a team per thread by kernels that can split finer: a thread slowed by the
// machine's other load then holds back a quarter of its share, not all of it.
inline constexpr int kPartsPerThread = 4;

// Carried from run to run by the caller of run_in_team (one per compiled step): whether a
// team or the caller alone runs faster on this machine now. Another thread that loses its CPU
// to other work while it holds a part stalls the run for a scheduler time slice, as long as a
// whole step of a small model, so on a busy machine one thread can be faster. After kWarmup
// team runs, each mode's run time is tracked (moving average) and the faster one used, the
// other tried every kProbeEvery-th run; a probe's time replaces its mode's stale average. The
// first run (memory faulted in, caches cold) is not measured: counted in, it made the team look
// slower than one thread for dozens of runs.
struct TeamState {
  static constexpr int64_t kWarmup = 4, kProbeEvery = 16;
  double team_ns = 0, solo_ns = 0;  // moving averages of run times (0: not measured)
  int64_t runs = 0;
  bool use_team() const;
  void record(bool team, double ns);
};

// Runs body(ctx) on the calling thread as thread 0 of a team of `threads` threads (fewer if
// OpenMP grants fewer; a team of one, whose parts run inline, when threads <= 1 or already
// inside an OpenMP parallel region or when `state` finds one thread faster; the enclosing team
// when called inside one). An exception thrown by the body is rethrown here after the team has
// stopped.
void run_in_team(int threads, TeamState& state, void (*body)(void*), void* ctx);

}  // namespace tlaloc::runtime::host
