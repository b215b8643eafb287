#include "fake_client.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "fake_executor.h"
#include "tlaloc/runtime/host/compile.h"
#include "tlaloc/stablehlo/parse.h"

namespace tlaloc::testing {

std::string last_options;
Perturbation perturbation;

namespace {

using namespace tlaloc::ir;
using namespace tlaloc::runtime::pjrt;

struct Program {
  Function f;
  std::unique_ptr<runtime::Executable> exe;
  std::string module;  // the name after "module @"
};

// Output k of `p` as `perturbation` makes it (a copy scaled, or `o` itself).
Array perturbed(const Program& p, size_t k, Array o) {
  if (perturbation.program.empty() || perturbation.program != p.module ||
      p.f.output_names.size() <= k || p.f.output_names[k] != perturbation.output ||
      !is_floating(o.dtype()))
    return o;
  Array f64 = o.astype(DType::f64);
  for (double& x : f64.span<double>()) x *= perturbation.factor;
  return f64.astype(o.dtype());
}
std::vector<std::unique_ptr<Program>> programs;  // owned here; the fake keeps raw handles

DType dtype_of(int type) {
  for (DType d : kAllDTypes)
    if (int(buffer_type(d)) == type) return d;
  fail("fake executor: PJRT buffer type {}", type);
}

void* fake_compile(const std::string& mlir, const std::string& options, std::string* error,
                   size_t* num_outputs, std::vector<int>* aliased) {
  try {
    auto p = std::make_unique<Program>();
    p->f = stablehlo::parse(mlir);
    p->exe = runtime::host::compile(p->f);
    const size_t at = mlir.find("module @") + 8;
    p->module = mlir.substr(at, mlir.find_first_of(" {", at) - at);
    *num_outputs = size_t(p->f.num_outputs());
    for (const Alias& a : p->f.aliases) aliased->push_back(a.input);
    last_options = options;
    programs.push_back(std::move(p));
    return programs.back().get();
  } catch (const Error& e) {
    *error = e.what();
    return nullptr;
  }
}

bool fake_run(void* program, const std::vector<const fake_pjrt::Tensor*>& args,
              std::vector<fake_pjrt::Tensor>* outs, std::string* error) {
  try {
    std::vector<Array> in;
    for (const fake_pjrt::Tensor* t : args) {
      Array a(dtype_of(t->type), Shape(t->dims));
      if (a.nbytes() != t->bytes.size())
        fail("fake executor: {} bytes for {}", t->bytes.size(), describe(a));
      if (a.nbytes()) std::memcpy(a.raw(), t->bytes.data(), a.nbytes());
      in.push_back(std::move(a));
    }
    const Program& p = *static_cast<Program*>(program);
    std::vector<Array> results = p.exe->run(in);
    for (size_t k = 0; k < results.size(); ++k) {
      const Array o = perturbed(p, k, std::move(results[k]));
      outs->push_back({int(buffer_type(o.dtype())), o.shape().dims,
                       std::string(static_cast<const char*>(o.raw()), o.nbytes())});
    }
    return true;
  } catch (const Error& e) {
    *error = e.what();
    return false;
  }
}

}  // namespace

std::string test_binary_dir() {
  const char* e = std::getenv("TLALOC_TEST_BINARY_DIR");
  return e && *e ? std::string(e) : std::string(TLALOC_BINARY_DIR);
}

std::string fake_path() { return test_binary_dir() + "/tests/fake_pjrt/libfake_pjrt_device.so"; }

std::unique_ptr<Client> fake_client() {
  const Plugin& p = Plugin::load(fake_path());
  void* h = ::dlopen(fake_path().c_str(), RTLD_NOW | RTLD_NOLOAD);
  auto set = reinterpret_cast<fake_pjrt::SetExecutorFn>(::dlsym(h, "fake_pjrt_set_executor"));
  if (!set) fail("fake device plugin lacks fake_pjrt_set_executor");
  set(&fake_compile, &fake_run);
  fake_pjrt::Control& k = fake_control();
  k.release(-1);  // nothing left over from an earlier client
  k.hold = false;
  k.max_pending = 0;
  k.forced = 0;
  k.fail_execution = 0;
  k.fail_message.clear();
  k.no_complete_events = false;
  return Client::create(p);
}

fake_pjrt::Control& fake_control() {
  Plugin::load(fake_path());
  void* h = ::dlopen(fake_path().c_str(), RTLD_NOW | RTLD_NOLOAD);
  auto get = reinterpret_cast<fake_pjrt::ControlFn>(::dlsym(h, "fake_pjrt_control"));
  if (!get) fail("fake device plugin lacks fake_pjrt_control");
  return *get();
}

}  // namespace tlaloc::testing
