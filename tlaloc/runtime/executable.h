// Executable: a compiled ir::Function on some lane (host: runtime/host, pjrt: runtime/pjrt).
// Inputs and outputs are in the function's order and must match its types exactly
// (tlaloc::Error names the input and both types).
//
// Two ways to run it:
//   * on lane buffers (Buffer): upload() puts an Array on the lane, run(args, donate) runs on
//     buffers and returns buffers, download() brings one back. The host lane's buffers are the
//     Arrays themselves (no copy); the pjrt lane's are device buffers, so state kept as buffers
//     stays on the device between runs. A caller written against this interface (the Trainer)
//     runs on either lane unchanged.
//   * on host Arrays: run(inputs) and run_donated(inputs), for one-off runs and tests.
// Donation: with donate set, every input named by an alias of the function (output i <- input
// j) is consumed: its storage becomes output i (updated in place where the lane can) and the
// argument is left empty; the other inputs are only read.
//
// Completion: the host lane runs synchronously. The pjrt lane's run(buffers) returns as soon as
// the program is queued on the device; every output's done() is the run's completion Event
// (wait() on it, or download() an output, to have the values; a device failure surfaces there).
// Buffers of a pending run can be passed to the next run at once (the device orders them).
#pragma once

#include <memory>
#include <span>
#include <variant>
#include <vector>

#include "tlaloc/core/array.h"
#include "tlaloc/ir/ir.h"

namespace tlaloc::runtime {

// A lane could not allocate a program's buffers (host: aligned_alloc failed). Callers that know
// which sizes made the program (a recipe's --batch / --context) catch it to name them.
class OutOfMemory : public Error {
 public:
  using Error::Error;
};

namespace pjrt {
class Buffer;
class Event;
}  // namespace pjrt

// The completion of the run that produced a buffer. Copyable (shared). Empty, and done, for the
// host lane's runs (synchronous), for uploads and host arrays.
class Event {
 public:
  Event() = default;
  explicit Event(std::shared_ptr<pjrt::Event> e) : e_(std::move(e)) {}
  bool empty() const { return !e_; }
  // Whether the run is done, without blocking (true when empty).
  bool ready() const;
  // Blocks until the run is done. Throws tlaloc::Error with the lane's message when the run
  // failed on the device (at this and every later call); nothing to do when empty.
  void wait() const;

 private:
  std::shared_ptr<pjrt::Event> e_;
};

// A value on a lane: a host Array, or a device buffer of the pjrt lane. Move-only. Empty when
// default-constructed, after it was donated to a run, or after its array was taken out.
class Buffer {
 public:
  Buffer();
  explicit Buffer(Array a);         // a host buffer (the array itself)
  explicit Buffer(pjrt::Buffer b);  // a device buffer
  Buffer(Buffer&&) noexcept;
  Buffer& operator=(Buffer&&) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();

  bool empty() const;
  bool on_host() const;  // holds a (non-empty) host Array
  // The value's dtype and shape; throws tlaloc::Error if empty.
  ir::TensorType type() const;
  // Whether it holds a value of type `t` (false when empty).
  bool has_type(const ir::TensorType& t) const;
  // The host array; throws tlaloc::Error unless on_host().
  const Array& array() const;
  // Takes the host array out (the buffer is left empty); throws tlaloc::Error unless on_host().
  Array take_array();
  // The device buffer; throws tlaloc::Error unless it holds one.
  pjrt::Buffer& device();
  const pjrt::Buffer& device() const;
  // The completion of the run that produced it (empty when there is nothing to wait for).
  Event done() const;

 private:
  std::variant<std::monostate, Array, std::unique_ptr<pjrt::Buffer>> v_;
};

class Executable {
 public:
  virtual ~Executable() = default;
  const ir::Function& function() const { return fn_; }

  // ---- lane buffers ----
  // `a` as a buffer of this lane: the host lane keeps the array itself (no copy), the pjrt lane
  // copies it to the device.
  Buffer upload(Array a);
  // A host copy of `b` (a buffer of this lane or a host buffer). Throws tlaloc::Error if b is
  // empty.
  Array download(const Buffer& b);
  // The value of `b` on the host, consuming b: a host buffer's array is moved out, not copied.
  Array download(Buffer&& b);
  // Runs on `args` (function().num_inputs() buffers of this lane; host buffers are accepted on
  // every lane: the pjrt lane copies them in for this run). Returns the outputs as buffers of
  // this lane. With `donate`, aliased inputs are consumed (left empty), the others are left in
  // place; without, every argument is left in place. Throws tlaloc::Error naming the input
  // (index and name) on a wrong count, an empty (already donated) argument or a dtype / shape
  // that differs from the function's; the arguments are then unchanged.
  std::vector<Buffer> run(std::span<Buffer> args, bool donate);

  // ---- host arrays ----
  // Reads the inputs, returns fresh outputs. Same inputs give bitwise the same outputs.
  std::vector<Array> run(std::span<const Array> inputs);
  // Like run, but aliased inputs are consumed: inputs[j] is left empty and its storage becomes
  // output i (on the host lane, updated in place). Inputs that no alias names are only read.
  // Throws tlaloc::Error, as run() does, if an input is empty (already donated), and on the host
  // lane if two donated inputs share storage.
  std::vector<Array> run_donated(std::span<Array> inputs);

 protected:
  explicit Executable(ir::Function fn) : fn_(std::move(fn)) {}
  // " (name)" of input i, or "" when it has none.
  std::string input_label(int i) const;

  // What a lane implements. Arguments are checked (count, non-empty, types) before these run.
  virtual Buffer to_lane(Array a) = 0;
  virtual Array from_lane(const Buffer& device) = 0;  // `device` is not a host buffer
  virtual std::vector<Buffer> execute_buffers(std::span<Buffer> args, bool donate) = 0;
  // The host-array entry points; by default through to_lane / execute_buffers / download. The host
  // lane overrides them to run on the arrays directly.
  virtual std::vector<Array> execute_arrays(std::span<const Array> inputs);
  virtual std::vector<Array> execute_donated(std::span<Array> inputs);

 private:
  void check_count(size_t n) const;
  void check_arrays(std::span<const Array> inputs, bool donating) const;
  // Throws the error of an empty input i ("donated input" when a donating run consumes that
  // slot), or of one of type `got` (not the function's).
  [[noreturn]] void input_error(int i, bool empty, const ir::TensorType& got, bool donating) const;

  ir::Function fn_;
};

}  // namespace tlaloc::runtime
