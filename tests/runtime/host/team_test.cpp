// The host runtime's thread team (team.h): every part of every job (more parts than threads
// too) runs exactly once with the job's part count, on one of the team's threads, whether the
// other threads were spinning or asleep between jobs; a team of one runs them as one part; an
// exception from the team's body reaches the caller; outside a team, parallel() runs them as one
// part.
#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "tlaloc/runtime/host/team.h"

namespace tlaloc::host_test {
namespace {

using runtime::host::parallel;
using runtime::host::run_in_team;

struct Job {
  int parts = 0;  // requested
  std::vector<std::atomic<int>> runs = std::vector<std::atomic<int>>(8);
  std::vector<int> seen_T = std::vector<int>(8, -1), thread = std::vector<int>(8, -1);
};

// Runs the jobs inside one team of `threads`, sleeping `pause` before every fourth job.
void run_jobs(int threads, std::vector<Job>& jobs, std::chrono::microseconds pause, int* size) {
  struct Ctx {
    std::vector<Job>* jobs;
    std::chrono::microseconds pause;
    int* size;
  } ctx{&jobs, pause, size};
  runtime::host::TeamState state;
  run_in_team(
      threads, state,
      [](void* c) {
        auto& x = *static_cast<Ctx*>(c);
        *x.size = omp_get_num_threads();  // the team is this OpenMP region's threads
        for (size_t j = 0; j < x.jobs->size(); ++j) {
          if (j % 4 == 3) std::this_thread::sleep_for(x.pause);
          Job& job = (*x.jobs)[j];
          parallel(job.parts, [&](int t, int T) {
            job.runs[size_t(t)].fetch_add(1);
            job.seen_T[size_t(t)] = T;
            job.thread[size_t(t)] = runtime::host::team_thread();
            EXPECT_EQ(runtime::host::team_thread(), omp_get_thread_num());
          });
        }
      },
      &ctx);
}

void expect_each_part_once(const std::vector<Job>& jobs, int team) {
  for (size_t j = 0; j < jobs.size(); ++j) {
    const Job& job = jobs[j];
    const int T = team > 1 ? job.parts : 1;  // a team of one runs all parts as one
    for (int t = 0; t < 8; ++t) {
      ASSERT_EQ(job.runs[size_t(t)].load(), t < T ? 1 : 0) << "job " << j << " part " << t;
      if (t < T) {
        EXPECT_EQ(job.seen_T[size_t(t)], T) << "job " << j << " part " << t;
        EXPECT_GE(job.thread[size_t(t)], 0) << "job " << j << " part " << t;
        EXPECT_LT(job.thread[size_t(t)], team) << "job " << j << " part " << t;
      }
    }
  }
}

TEST(HostTeam, EveryPartRunsOnceSpinningOrAsleep) {
  for (int threads : {2, 3}) {
    for (auto pause : {std::chrono::microseconds(0), std::chrono::microseconds(2000)}) {
      std::vector<Job> jobs(pause.count() ? 40 : 500);
      for (size_t j = 0; j < jobs.size(); ++j) jobs[j].parts = 1 + int(j % 8);  // 1..8 parts
      int size = 0;
      run_jobs(threads, jobs, pause, &size);
      // OpenMP may grant fewer threads than asked; the team then has fewer.
      ASSERT_GE(size, 1);
      ASSERT_LE(size, threads);
      expect_each_part_once(jobs, size);
    }
  }
}

TEST(HostTeam, OneThreadRunsPartsInline) {
  std::vector<Job> jobs(5);
  for (auto& j : jobs) j.parts = 3;
  int size = 0;
  run_jobs(1, jobs, std::chrono::microseconds(0), &size);
  EXPECT_EQ(size, 1);
  expect_each_part_once(jobs, 1);
}

TEST(HostTeam, BodyExceptionReachesCallerAndTeamStops) {
  auto body = [](void*) {
    parallel(2, [](int, int) {});
    throw std::runtime_error("kernel failed");
  };
  runtime::host::TeamState state;
  EXPECT_THROW(run_in_team(2, state, body, nullptr), std::runtime_error);
  // The team is gone: a new one runs normally.
  std::vector<Job> jobs(10);
  for (auto& j : jobs) j.parts = 2;
  int size = 0;
  run_jobs(2, jobs, std::chrono::microseconds(0), &size);
  expect_each_part_once(jobs, size);
}

// The choice between a team and one thread: team runs first, then one thread once, then the
// faster by moving average with the other tried every kProbeEvery-th run.
TEST(HostTeam, StateUsesTheFasterModeAndProbesTheOther) {
  using runtime::host::TeamState;
  TeamState s;
  for (int64_t r = 0; r < TeamState::kWarmup; ++r) {
    EXPECT_TRUE(s.use_team()) << r;
    s.record(true, 3e6);
  }
  EXPECT_FALSE(s.use_team());  // one thread not measured yet
  s.record(false, 5e6);
  int team = 0, solo = 0;
  for (int r = 0; r < 4 * int(TeamState::kProbeEvery); ++r) {
    bool t = s.use_team();
    (t ? team : solo)++;
    s.record(t, t ? 3e6 : 5e6);
  }
  EXPECT_EQ(solo, 4);  // the probes
  EXPECT_DOUBLE_EQ(s.team_ns, 3e6);
  // The machine gets busy: team runs take 9 ms, one thread 5 ms; within a few team runs the
  // average crosses and one thread is used (teams only as probes).
  for (int r = 0; r < 2 * int(TeamState::kProbeEvery); ++r) {
    bool t = s.use_team();
    s.record(t, t ? 9e6 : 5e6);
  }
  EXPECT_GT(s.team_ns, s.solo_ns);
  team = solo = 0;
  for (int r = 0; r < 4 * int(TeamState::kProbeEvery); ++r) {
    bool t = s.use_team();
    (t ? team : solo)++;
    s.record(t, t ? 9e6 : 5e6);
  }
  EXPECT_EQ(team, 4);
}

// The first run (memory faulted in) is not measured, and a probe's time replaces its mode's
// stale average: one thread is not chosen for a slow first run, and a team that was slow
// during a busy spell is chosen again after one fast probe.
TEST(HostTeam, StateIgnoresTheColdRunAndTrustsAFreshProbe) {
  using runtime::host::TeamState;
  TeamState s;
  s.record(true, 60e6);  // cold: 20x a warm team run
  for (int64_t r = 1; r < TeamState::kWarmup; ++r) s.record(true, 3e6);
  EXPECT_DOUBLE_EQ(s.team_ns, 3e6);
  EXPECT_FALSE(s.use_team());  // the one-thread probe
  s.record(false, 5e6);
  EXPECT_TRUE(s.use_team());
  // A busy spell: team runs take 20 ms until one thread is preferred.
  while (s.use_team()) s.record(true, 20e6);
  // The machine is quiet again: the next team probe (at most kProbeEvery runs away) takes
  // 3 ms, and the team is used from the run after it.
  int r = 0;
  while (!s.use_team()) {
    s.record(false, 5e6);
    ASSERT_LT(++r, TeamState::kProbeEvery);
  }
  s.record(true, 3e6);
  EXPECT_DOUBLE_EQ(s.team_ns, 3e6);
  EXPECT_TRUE(s.use_team());
}

// run_in_team with a state that prefers one thread runs the body on the caller alone.
TEST(HostTeam, StatePreferringOneThreadRunsAlone) {
  runtime::host::TeamState s;
  for (int64_t r = 0; r < runtime::host::TeamState::kWarmup; ++r) s.record(true, 9e6);
  s.record(false, 1e6);
  ASSERT_FALSE(s.use_team());
  int size = 0, parts = 0;
  struct Ctx {
    int *size, *parts;
  } ctx{&size, &parts};
  run_in_team(
      2, s,
      [](void* c) {
        auto& x = *static_cast<Ctx*>(c);
        *x.size = omp_get_num_threads();
        parallel(2, [&](int, int P) { *x.parts = P; });
      },
      &ctx);
  EXPECT_EQ(size, 1);
  EXPECT_EQ(parts, 1);
}

TEST(HostTeam, ParallelOutsideATeamRunsOnePart) {
  std::vector<std::atomic<int>> runs(3);
  int seen = 0;
  parallel(3, [&](int t, int T) {
    runs[size_t(t)].fetch_add(1);
    if (t == 0) seen = T;
  });
  ASSERT_GE(seen, 1);
  for (int t = 0; t < 3; ++t) EXPECT_EQ(runs[size_t(t)].load(), t < seen ? 1 : 0);
}

}  // namespace
}  // namespace tlaloc::host_test
