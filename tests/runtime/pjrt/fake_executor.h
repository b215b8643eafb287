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

}  // namespace fake_pjrt
