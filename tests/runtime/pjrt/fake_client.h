// A PJRT client on the executing fake plugin (FAKE_MODE 3, built by fake_plugins.cmake): the
// test process installs a compiler (tlaloc's StableHLO parser) and a runner (the host lane), so
// programs sent through the real client code compute bitwise what the host lane computes.
#pragma once

#include <memory>
#include <string>

#include "fake_executor.h"
#include "tlaloc/runtime/pjrt/client.h"

namespace tlaloc::testing {

// The build folder the fake plugins are in: $TLALOC_TEST_BINARY_DIR when set (a build carried to
// another machine, see scripts/device-check.sh), else the folder this test was built in.
std::string test_binary_dir();
// Path of the executing fake plugin library.
std::string fake_path();
// A fresh client of the fake device plugin, with the executor installed and the fake's
// Control reset (executions run at once, none fails; the execution count goes on).
std::unique_ptr<runtime::pjrt::Client> fake_client();
// The fake device's asynchrony and failure injection (fake_executor.h).
fake_pjrt::Control& fake_control();
// The serialized compile options of the last program the fake compiled.
extern std::string last_options;
// Makes the fake device wrong on purpose (the cross-check's tests): every run of a program whose
// module is @`program` multiplies its floating output named `output` by `factor`. Empty
// `program`: off. A test that sets it resets it (a Perturbation{}) before it ends.
struct Perturbation {
  std::string program, output;
  double factor = 1;
};
extern Perturbation perturbation;

}  // namespace tlaloc::testing
