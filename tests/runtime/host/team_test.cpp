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
  run_in_team(
      threads,
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
  EXPECT_THROW(run_in_team(2, body, nullptr), std::runtime_error);
  // The team is gone: a new one runs normally.
  std::vector<Job> jobs(10);
  for (auto& j : jobs) j.parts = 2;
  int size = 0;
  run_jobs(2, jobs, std::chrono::microseconds(0), &size);
  expect_each_part_once(jobs, size);
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
