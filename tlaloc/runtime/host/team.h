// Internal: the threads of one run of a compiled step. A run with more than one thread opens
// one OpenMP parallel region for the whole step: thread 0 runs the kernels in order and the
// others wait for parallel parts (spinning briefly, then sleeping on a futex), instead of one
// OpenMP fork / join per kernel. OpenMP threads, because OpenBLAS's OpenMP build keys its
// per-thread buffers by omp_get_thread_num().
#pragma once

#include <type_traits>

namespace tlaloc::runtime::host {

using PartFn = void (*)(void* ctx, int t, int T);

// Runs fn(ctx, t, T) for every t in [0, T), T = min(n, threads available), on thread t of the
// calling thread's team (thread 0 is the caller) or, outside a team, of an OpenMP parallel
// region; returns once every part has finished. Parts must not throw.
void parallel_parts(int n, PartFn fn, void* ctx);

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

// Runs body(ctx) on the calling thread as thread 0 of a team of `threads` threads (fewer if
// OpenMP grants fewer; a team of one, whose parts run inline, when threads <= 1 or already
// inside an OpenMP parallel region; the enclosing team when called inside one).
// An exception thrown by the body is rethrown here after the team has stopped.
void run_in_team(int threads, void (*body)(void*), void* ctx);

}  // namespace tlaloc::runtime::host
