// gtest main of test_distributed: joins the process group first (MPI's COMM_WORLD under
// mpiexec, else one process). Every rank runs every test in the same order, so each
// collective is called by all of them. Rank 0 prints gtest's progress; the other ranks print
// only their failures, prefixed with the rank, and exit non-zero (mpiexec then fails).
#include <gtest/gtest.h>

#include <cstdio>

#include "tlaloc/distributed/communicator.h"

namespace {

class FailuresOnly : public testing::EmptyTestEventListener {
 public:
  explicit FailuresOnly(int rank) : rank_(rank) {}
  void OnTestPartResult(const testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "[rank %d] %s:%d: %s\n", rank_, r.file_name() ? r.file_name() : "?",
                   r.line_number(), r.summary());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  tlaloc::distributed::Communicator& w = tlaloc::distributed::init_world();
  if (w.rank() != 0) {
    auto& listeners = testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailuresOnly(w.rank()));
  }
  return RUN_ALL_TESTS();
}
