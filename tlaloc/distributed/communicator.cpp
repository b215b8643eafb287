#include "tlaloc/distributed/communicator.h"

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "tlaloc/core/error.h"

namespace tlaloc::distributed {

namespace {

// The group of one process: every collective is a copy (or nothing).
class Single final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string describe() const override { return "1 process"; }
  void all_reduce(void*, int64_t, DType dtype, Reduction op) override {
    check_reducible(dtype, op);
  }
  void all_gather(const void* in, void* out, int64_t bytes) override {
    if (bytes > 0 && in != out) std::memmove(out, in, size_t(bytes));
  }
  void broadcast(void*, int64_t, int root) override {
    if (root != 0) fail("broadcast: root {} is not a rank of 1 process", root);
  }
  void barrier() override {}

  static void check_reducible(DType dtype, Reduction op) {
    const bool ok = dtype == DType::f32 || dtype == DType::f64 || dtype == DType::s32 ||
                    dtype == DType::u32 || (dtype == DType::i1 && op != Reduction::sum);
    if (!ok)
      fail("all_reduce: no {} reduction of {} values across processes", int(op), name(dtype));
  }
};

std::unique_ptr<Communicator>& installed() {
  static std::unique_ptr<Communicator> c;
  return c;
}

}  // namespace

// Defined in mpi.cpp (MPI built in) or below (not).
std::unique_ptr<Communicator> make_mpi_world();

Communicator& world() {
  static Single single;
  std::unique_ptr<Communicator>& c = installed();
  return c ? *c : single;
}

void set_world(std::unique_ptr<Communicator> c) { installed() = std::move(c); }

bool launched_by_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr ||
         std::getenv("PMI_RANK") != nullptr;
}

Communicator& init_world() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (!launched_by_mpirun() || installed()) return;
    if (!mpi_built_in())
      fail(
          "this tlaloc was built without MPI, so it cannot run under mpirun (install Debian's "
          "libopenmpi-dev and rebuild)");
    installed() = make_mpi_world();
  });
  return world();
}

bool any(bool flag) {
  Communicator& w = world();
  if (w.size() == 1) return flag;
  int32_t v = flag ? 1 : 0;
  w.all_reduce(&v, 1, DType::s32, Reduction::max);
  return v != 0;
}

uint64_t fnv1a(std::string_view bytes, uint64_t h) {
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  return h;
}

int first_rank_differing(uint64_t digest) {
  Communicator& w = world();
  if (w.size() == 1) return -1;
  std::vector<uint64_t> all(size_t(w.size()));
  w.all_gather(&digest, all.data(), sizeof digest);
  for (size_t r = 1; r < all.size(); ++r)
    if (all[r] != all[0]) return int(r);
  return -1;
}

}  // namespace tlaloc::distributed
