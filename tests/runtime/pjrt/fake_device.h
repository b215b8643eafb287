// Internal to the fake PJRT plugins (fake_plugin.cc, fake_device.cc): the plugin-side objects.
#pragma once

#include <memory>
#include <string>

#include "fake_executor.h"
#include "tlaloc/runtime/pjrt/c_api.h"

namespace c = tlaloc::runtime::pjrt::capi;

namespace fake_pjrt {
struct Job;
// A device value, shared by the buffers and the pending executions that use it (PJRT keeps what
// a queued execution reads alive after its buffer is destroyed).
struct Value {
  Tensor t;
  std::shared_ptr<Job> producer;  // the execution that computes it, while pending
  std::string error;              // its producer failed
};
// One execution, pending until run (see Control in fake_executor.h).
struct Job {
  int64_t id = 0;
  void* program = nullptr;
  std::vector<std::shared_ptr<Value>> args, outs;
  bool done = false;
  std::string error;
};
}  // namespace fake_pjrt

struct tlaloc::runtime::pjrt::capi::Error {
  std::string message;
  c::ErrorCode code;
};
struct tlaloc::runtime::pjrt::capi::Client {
  int unused;
};
struct tlaloc::runtime::pjrt::capi::Device {
  int id;
};
struct tlaloc::runtime::pjrt::capi::Event {
  std::string error;                    // Await fails with it when not empty
  std::shared_ptr<fake_pjrt::Job> job;  // an execution's: done when it is, with its error
};
struct tlaloc::runtime::pjrt::capi::Buffer {
  std::shared_ptr<fake_pjrt::Value> v;
  bool donated = false;
};
struct tlaloc::runtime::pjrt::capi::LoadedExecutable {
  void* program = nullptr;
  size_t num_outputs = 0;
  std::vector<int> aliased_inputs;
};
struct tlaloc::runtime::pjrt::capi::Executable {
  size_t num_outputs;
};

namespace fake_pjrt {
inline c::Error* make_error(std::string m, c::ErrorCode code) {
  return new c::Error{std::move(m), code};
}
void set_executor(CompileFn c, RunFn r);
Control* control();
// Puts the device functions (buffers, events, compile, execute) into the API table.
void install(void** functions);
}  // namespace fake_pjrt
