#include "tlaloc/runtime/host/team.h"

#include <immintrin.h>
#include <linux/futex.h>
#include <omp.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <climits>
#include <cstdint>
#include <exception>

namespace tlaloc::runtime::host {
namespace {

// How long a waiting thread spins before it sleeps on a futex: long enough to span the serial
// kernels between two parallel ones. A thread never spins while the thread it waits for is on
// its own CPU (a busy machine can put both on one core): it would only take that thread's time.
constexpr auto kSpin = std::chrono::microseconds(200);

void futex_wait(std::atomic<uint32_t>& a, uint32_t old) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&a), FUTEX_WAIT_PRIVATE, old, nullptr, nullptr, 0);
}
void futex_wake_all(std::atomic<uint32_t>& a) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&a), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr,
          0);
}

// Spins with pause until done(), kSpin elapsed, or the awaited thread's last CPU (`other`) is
// this thread's CPU; returns done().
template <class Done>
bool spin_until(Done done, const std::atomic<int>& other) {
  auto start = std::chrono::steady_clock::now();
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      _mm_pause();
    }
    if (sched_getcpu() == other.load(std::memory_order_relaxed)) return done();
    if (std::chrono::steady_clock::now() - start > kSpin) return done();
  }
}

// Parts are claimed, not assigned: thread t takes part t if it is still free, then any free
// part, until none is left. Parts stay where they ran before (so each core's cache keeps its
// share of the data from one kernel to the next) while a thread that is not running (a busy
// machine, a sleeping thread waking late) delays nothing: thread 0 waits only for parts
// already begun. What a part computes depends on its index alone, not on its thread.
thread_local int t_thread = 0;  // this thread's index in its team

struct Team {
  static constexpr int kMaxSize = 64;  // parts are the bits of one word
  int size = 1;
  // The current job, written before `free_parts` publishes it.
  PartFn fn = nullptr;
  void* ctx = nullptr;
  int n = 0;
  bool stop = false;
  // Bit p set: part p taken (bits >= n start set). A CAS on it claims a part of the current
  // job; fn / ctx / n are read only after a successful claim, and thread 0 publishes the next
  // job only once every part has finished, so they cannot change under a running part.
  alignas(64) std::atomic<uint64_t> taken{~uint64_t(0)};
  alignas(64) std::atomic<uint32_t> done{0};  // parts finished in the current job
  std::atomic<int> waiting{0};                // thread 0 sleeps on `done`
  alignas(64) std::atomic<uint32_t> gen{0};
  std::atomic<int> sleepers{0};
  // Last known CPUs: of thread 0 (publishing), and of the last other thread to take a part.
  alignas(64) std::atomic<int> lead_cpu{-1}, part_cpu{-1};

  void take_parts(int t) {
    // Thread t's own parts: [t n / size, (t + 1) n / size).
    const int lo = t * n / size, hi = (t + 1) * n / size;
    const uint64_t own = hi - lo >= 64 ? ~uint64_t(0) : ((uint64_t(1) << (hi - lo)) - 1) << lo;
    uint64_t m = taken.load(std::memory_order_acquire);
    while (~m) {
      const uint64_t free = ~m, mine = free & own;
      uint64_t bit = mine ? (mine & (~mine + 1)) : (free & (~free + 1));  // lowest own, else any
      if (!taken.compare_exchange_weak(m, m | bit, std::memory_order_acq_rel,
                                       std::memory_order_acquire))
        continue;
      if (t != 0) part_cpu.store(sched_getcpu(), std::memory_order_relaxed);
      fn(ctx, std::countr_zero(bit), n);
      done.fetch_add(1, std::memory_order_seq_cst);
      if (t != 0 && waiting.load(std::memory_order_seq_cst)) futex_wake_all(done);
      m = taken.load(std::memory_order_acquire);
    }
  }

  void publish() {
    gen.fetch_add(1, std::memory_order_seq_cst);
    if (sleepers.load(std::memory_order_seq_cst) > 0) futex_wake_all(gen);
  }

  void work(int t) {
    t_thread = t;
    uint32_t seen = 0;
    for (;;) {
      auto changed = [&] { return gen.load(std::memory_order_acquire) != seen; };
      while (!spin_until(changed, lead_cpu)) {
        sleepers.fetch_add(1, std::memory_order_seq_cst);
        if (gen.load(std::memory_order_seq_cst) == seen) futex_wait(gen, seen);
        sleepers.fetch_sub(1, std::memory_order_seq_cst);
      }
      seen = gen.load(std::memory_order_acquire);
      if (stop) return;
      take_parts(t);
    }
  }

  void run(int parts, PartFn f, void* c) {
    fn = f;
    ctx = c;
    n = std::min(parts, kMaxSize);
    done.store(0, std::memory_order_relaxed);
    lead_cpu.store(sched_getcpu(), std::memory_order_relaxed);
    taken.store(n == 64 ? 0 : ~uint64_t(0) << n, std::memory_order_release);
    publish();
    take_parts(0);
    auto finished = [&] { return done.load(std::memory_order_acquire) == uint32_t(n); };
    if (spin_until(finished, part_cpu)) return;
    for (uint32_t d; (d = done.load(std::memory_order_seq_cst)) != uint32_t(n);) {
      waiting.store(1, std::memory_order_seq_cst);
      if (done.load(std::memory_order_seq_cst) == d) futex_wait(done, d);
      waiting.store(0, std::memory_order_seq_cst);
    }
  }
};

thread_local Team* t_team = nullptr;

}  // namespace

void parallel_parts(int n, PartFn fn, void* ctx) {
  if (n <= 1) {
    fn(ctx, 0, 1);
    return;
  }
  if (Team* team = t_team; team && team->size > 1) return team->run(n, fn, ctx);
  fn(ctx, 0, 1);  // a team of one, or no team (e.g. inside a part): one part does all
}

int team_thread() { return t_thread; }

namespace {

void run_solo(void (*body)(void*), void* ctx) {
  Team solo;  // size 1: parallel parts run inline on the caller
  t_team = &solo;
  try {
    body(ctx);
  } catch (...) {
    t_team = nullptr;
    throw;
  }
  t_team = nullptr;
}

void run_team(int threads, void (*body)(void*), void* ctx) {
  Team team;
  std::exception_ptr error;
#pragma omp parallel num_threads(std::min(threads, Team::kMaxSize))
  {
    if (omp_get_thread_num() == 0) {
      team.size = std::min(omp_get_num_threads(), Team::kMaxSize);
      t_team = &team;
      t_thread = 0;
      try {
        body(ctx);
      } catch (...) {
        error = std::current_exception();
      }
      t_team = nullptr;
      team.stop = true;
      team.publish();
    } else {
      team.work(omp_get_thread_num());
    }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace

bool TeamState::use_team() const {
  if (runs < kWarmup) return true;
  if (solo_ns == 0) return false;  // not measured yet
  const bool team_faster = team_ns <= solo_ns;
  return (runs + 1) % kProbeEvery == 0 ? !team_faster : team_faster;
}

void TeamState::record(bool team, double ns) {
  if (runs++ == 0) return;  // the first run faults its memory in: not the mode's speed
  const bool probe = team_ns != 0 && solo_ns != 0 && team != (team_ns <= solo_ns);
  double& avg = team ? team_ns : solo_ns;
  // A probe's time replaces its mode's average, which is kProbeEvery runs old.
  avg = avg == 0 || probe ? ns : 0.75 * avg + 0.25 * ns;
}

void run_in_team(int threads, TeamState& state, void (*body)(void*), void* ctx) {
  if (t_team) {
    body(ctx);
    return;
  }
  if (threads <= 1 || omp_in_parallel()) return run_solo(body, ctx);
  const bool team = state.use_team();
  const auto t0 = std::chrono::steady_clock::now();
  if (team)
    run_team(threads, body, ctx);
  else
    run_solo(body, ctx);
  state.record(
      team,
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count());
}

}  // namespace tlaloc::runtime::host
