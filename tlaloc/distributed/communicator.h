// Processes that run the same training program together (data parallelism): ranks 0..size-1 of
// one group, and the collectives the host lane's all_reduce / all_gather kernels and the
// training loop use. Every collective is called by every rank in the same order (the same
// compiled program, the same loop); a rank that stops calling makes the others wait until the
// launcher (mpirun) ends the job.
//
// Reductions are deterministic: every rank gets the same bits, the values combined in rank
// order 0, 1, ..., size-1 (one element's sum is ((x0 + x1) + x2) + ...), so a data-parallel run
// is bitwise reproducible for a given number of processes.
//
// world() is the process's group: one rank (every collective a copy) unless init_world() found
// the process launched by mpirun and MPI was built in (distributed/mpi.cpp, OpenMPI).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tlaloc/core/dtype.h"

namespace tlaloc::distributed {

enum class Reduction : uint8_t { sum, max, min };

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // What the group runs on, for messages: "1 process", "MPI (OpenMPI 4.1.4), 2 ranks".
  virtual std::string describe() const = 0;
  // In place: data[0, count) becomes the elementwise reduction over the ranks, combined in rank
  // order. dtype f32, f64, s32 or u32 (i1 too for max / min); others throw tlaloc::Error.
  virtual void all_reduce(void* data, int64_t count, DType dtype, Reduction op) = 0;
  // out[r * bytes, (r + 1) * bytes) = rank r's in[0, bytes): out holds size() * bytes bytes.
  virtual void all_gather(const void* in, void* out, int64_t bytes) = 0;
  // data[0, bytes) of rank `root` to every rank.
  virtual void broadcast(void* data, int64_t bytes, int root) = 0;
  virtual void barrier() = 0;
  // Wall seconds this process spent in all_reduce and all_gather so far (waiting for the
  // slowest rank included), for reports.
  virtual double collective_seconds() const { return 0; }
};

// The process's group (one rank until init_world() installs MPI's).
Communicator& world();
// Whether this process was started by mpirun / mpiexec (OpenMPI's or PMIx's environment).
bool launched_by_mpirun();
// Whether this build has MPI (OpenMPI) built in.
bool mpi_built_in();
// When launched by mpirun: initialises MPI and makes world() its COMM_WORLD (idempotent).
// Throws tlaloc::Error when launched by mpirun in a build without MPI. Returns world().
Communicator& init_world();
// For tests: installs `c` as world() (nullptr: back to one rank).
void set_world(std::unique_ptr<Communicator> c);

// Conveniences over world().
inline int rank() { return world().rank(); }
inline int world_size() { return world().size(); }
inline bool is_root() { return world().rank() == 0; }
// True on every rank when `flag` is true on any (a stop decided by a signal on one rank).
bool any(bool flag);
// 64-bit FNV-1a of `bytes`, continuing from `h` (chain calls to digest several buffers).
uint64_t fnv1a(std::string_view bytes, uint64_t h = 1469598103934665603ull);
// The first rank whose `digest` differs from rank 0's, or -1 when every rank has the same: the
// same answer on every rank. A collective.
int first_rank_differing(uint64_t digest);

}  // namespace tlaloc::distributed
