// world() over MPI (OpenMPI): COMM_WORLD, one rank per process started by mpirun. Built when
// CMake finds MPI (TLALOC_HAVE_MPI); otherwise make_mpi_world() says MPI is not built in.
#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "tlaloc/core/error.h"
#include "tlaloc/distributed/communicator.h"

#if TLALOC_HAVE_MPI
#include <mpi.h>
#endif

namespace tlaloc::distributed {

#if TLALOC_HAVE_MPI

bool mpi_built_in() { return true; }

namespace {

// Element-wise a = op(a, b) over count elements of type T.
template <typename T>
void combine(T* a, const T* b, int64_t count, Reduction op) {
  switch (op) {
    case Reduction::sum:
      for (int64_t i = 0; i < count; ++i) a[i] = T(a[i] + b[i]);
      break;
    case Reduction::max:
      // NaN wins, as XLA's maximum (and so does it here in every rank order).
      for (int64_t i = 0; i < count; ++i)
        a[i] = (a[i] != a[i] || b[i] != b[i]) ? (a[i] != a[i] ? a[i] : b[i]) : std::max(a[i], b[i]);
      break;
    case Reduction::min:
      for (int64_t i = 0; i < count; ++i)
        a[i] = (a[i] != a[i] || b[i] != b[i]) ? (a[i] != a[i] ? a[i] : b[i]) : std::min(a[i], b[i]);
      break;
  }
}

void combine(void* a, const void* b, int64_t count, DType dtype, Reduction op) {
  switch (dtype) {
    case DType::f32:
      return combine(static_cast<float*>(a), static_cast<const float*>(b), count, op);
    case DType::f64:
      return combine(static_cast<double*>(a), static_cast<const double*>(b), count, op);
    case DType::s32:
      return combine(static_cast<int32_t*>(a), static_cast<const int32_t*>(b), count, op);
    case DType::u32:
      return combine(static_cast<uint32_t*>(a), static_cast<const uint32_t*>(b), count, op);
    case DType::i1:
      if (op != Reduction::sum)
        return combine(static_cast<uint8_t*>(a), static_cast<const uint8_t*>(b), count, op);
      break;
    default:
      break;
  }
  fail("all_reduce: no reduction of {} values across processes", name(dtype));
}

void check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) fail("MPI: {} failed (error {})", what, rc);
}

class Mpi final : public Communicator {
 public:
  Mpi() {
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
      int provided = 0;
      // Collectives are called by the thread that runs the program (OpenMP's thread 0).
      check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
      std::atexit([] {
        int fin = 0;
        MPI_Finalized(&fin);
        if (!fin) MPI_Finalize();
      });
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(v, &len);
    std::string s(v, size_t(len));
    library_ = s.substr(0, s.find(','));
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string describe() const override {
    return fmt::format("MPI ({}), {} ranks", library_, size_);
  }

  // Reduce-scatter then all-gather, both by hand so the order is ours: rank r receives chunk r
  // of every rank (MPI_Alltoallv), combines the contributions in rank order, and the combined
  // chunks are gathered by every rank (MPI_Allgatherv). Done in segments that keep MPI's int
  // counts in range.
  void all_reduce(void* data, int64_t count, DType dtype, Reduction op) override {
    const Timer timer(seconds_);
    const int64_t es = int64_t(size_of(dtype));
    const int64_t seg = std::max<int64_t>(1, (int64_t(1) << 28) / es);
    for (int64_t at = 0; at < count; at += seg)
      reduce_segment(static_cast<char*>(data) + at * es, std::min(seg, count - at), dtype, op);
  }

  void all_gather(const void* in, void* out, int64_t bytes) override {
    if (bytes * size_ > INT_MAX)
      fail("all_gather: {} bytes from each of {} ranks is more than one MPI call carries", bytes,
           size_);
    const Timer timer(seconds_);
    check(MPI_Allgather(in, int(bytes), MPI_BYTE, out, int(bytes), MPI_BYTE, MPI_COMM_WORLD),
          "MPI_Allgather");
  }

  void broadcast(void* data, int64_t bytes, int root) override {
    if (root < 0 || root >= size_) fail("broadcast: root {} is not a rank of {}", root, size_);
    for (int64_t at = 0; at < bytes; at += INT_MAX / 2) {
      const int n = int(std::min<int64_t>(INT_MAX / 2, bytes - at));
      check(MPI_Bcast(static_cast<char*>(data) + at, n, MPI_BYTE, root, MPI_COMM_WORLD),
            "MPI_Bcast");
    }
  }

  void barrier() override { check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }
  double collective_seconds() const override { return seconds_; }

 private:
  void reduce_segment(char* data, int64_t count, DType dtype, Reduction op) {
    const int64_t es = int64_t(size_of(dtype));
    const int n = size_;
    std::vector<int> counts(static_cast<size_t>(n)), displs(static_cast<size_t>(n));
    for (int c = 0; c < n; ++c) {
      const int64_t lo = count * c / n, hi = count * (c + 1) / n;
      counts[size_t(c)] = int((hi - lo) * es);
      displs[size_t(c)] = int(lo * es);
    }
    const int mine = counts[size_t(rank_)];
    recv_.resize(size_t(mine) * size_t(n));
    std::vector<int> rcounts(static_cast<size_t>(n), mine), rdispls(static_cast<size_t>(n));
    for (int s = 0; s < n; ++s) rdispls[size_t(s)] = s * mine;
    check(MPI_Alltoallv(data, counts.data(), displs.data(), MPI_BYTE, recv_.data(), rcounts.data(),
                        rdispls.data(), MPI_BYTE, MPI_COMM_WORLD),
          "MPI_Alltoallv");
    char* acc = recv_.data();  // rank 0's contribution; ranks 1.. added in order
    for (int s = 1; s < n; ++s)
      combine(acc, recv_.data() + size_t(s) * size_t(mine), mine / es, dtype, op);
    check(MPI_Allgatherv(acc, mine, MPI_BYTE, data, counts.data(), displs.data(), MPI_BYTE,
                         MPI_COMM_WORLD),
          "MPI_Allgatherv");
  }

  // Adds the wall time of its scope to `total`.
  struct Timer {
    explicit Timer(double& total) : total(total), start(MPI_Wtime()) {}
    ~Timer() { total += MPI_Wtime() - start; }
    double& total;
    double start;
  };

  int rank_ = 0, size_ = 1;
  double seconds_ = 0;
  std::string library_;
  std::vector<char> recv_;
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_world() { return std::make_unique<Mpi>(); }

#else

bool mpi_built_in() { return false; }

std::unique_ptr<Communicator> make_mpi_world() {
  fail("this tlaloc was built without MPI (install Debian's libopenmpi-dev and rebuild)");
}

#endif

}  // namespace tlaloc::distributed
