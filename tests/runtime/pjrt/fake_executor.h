// The hook by which the executing fake PJRT plugin (fake_device.cc, FAKE_MODE 3) computes: the
// test process hands it a compiler and a runner (built on tlaloc's StableHLO parser and host
// lane), and the fake does the PJRT side: buffers, events, donation, errors.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fake_pjrt {

struct Tensor {
  int type = 0;  // PJRT_Buffer_Type
  std::vector<int64_t> dims;
  std::string bytes;  // dense row-major
};

// Returns a program handle (null on error, with *error set), its output count and the inputs
// its outputs alias (tf.aliasing_output).
using CompileFn = void* (*)(const std::string& mlir, const std::string& options, std::string* error,
                            size_t* num_outputs, std::vector<int>* aliased_inputs);
using RunFn = bool (*)(void* program, const std::vector<const Tensor*>& args,
                       std::vector<Tensor>* outputs, std::string* error);
using SetExecutorFn = void (*)(CompileFn, RunFn);

// The executing fake's asynchrony, for tests (fake_pjrt_control()). By default an execution runs
// when it is dispatched; with `hold` it stays pending, in dispatch order, until release() runs
// it or something waits on it (PJRT_Event_Await on its completion event, or a download of one
// of its outputs), which runs it and every older pending execution, as a device stream would.
// A failed execution (its runner's error, or fail_execution) carries its error in its
// completion event and in its outputs; an execution reading such an output fails with the same.
struct Control {
  bool hold = false;
  int64_t executions = 0;           // dispatched so far; the n-th has id n
  size_t max_pending = 0;           // the most executions pending at once (set 0 to measure anew)
  int64_t forced = 0;               // pending executions run because something waited on them
  int64_t fail_execution = 0;       // the id of an execution to fail (0: none) ...
  std::string fail_message;         // ... with this message
  bool no_complete_events = false;  // Execute leaves device_complete_events unset
  size_t (*pending)() = nullptr;    // executions pending now
  int (*release)(int n) = nullptr;  // runs the n oldest pending (all when n < 0); how many ran
};
using ControlFn = Control* (*)();

}  // namespace fake_pjrt
