#include "tlaloc/runtime/pjrt/plugin.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>

#include "tlaloc/core/error.h"

namespace tlaloc::runtime::pjrt {
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::vector<std::string> glob_sorted(const std::string& pattern) {
  std::vector<std::string> out;
  glob_t g{};
  if (::glob(pattern.c_str(), 0, nullptr, &g) == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  ::globfree(&g);
  std::sort(out.begin(), out.end());
  return out;
}

bool is_file(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// CUDA major of ".../xla_cuda13": 13 (0 if none), for newest-first ordering.
int cuda_number(const std::string& dir) {
  size_t p = dir.rfind("xla_cuda");
  return p == std::string::npos ? 0 : std::atoi(dir.c_str() + p + 8);
}

std::optional<std::string> plugin_in(const std::string& site) {
  std::vector<std::string> dirs = glob_sorted(site + "/jax_plugins/xla_cuda*");
  std::stable_sort(dirs.begin(), dirs.end(), [](const std::string& a, const std::string& b) {
    return cuda_number(a) > cuda_number(b);
  });
  for (const std::string& d : dirs)
    for (const std::string& so : glob_sorted(d + "/*.so"))
      if (is_file(so)) return so;
  return std::nullopt;
}

}  // namespace

SearchPaths SearchPaths::from_environment() {
  SearchPaths s;
  s.env_plugin = env("TLALOC_PJRT_PLUGIN");
  std::string pp = env("PYTHONPATH");
  for (size_t b = 0; b <= pp.size();) {
    size_t e = pp.find(':', b);
    if (e == std::string::npos) e = pp.size();
    if (e > b) s.site_dirs.push_back(pp.substr(b, e - b));
    b = e + 1;
  }
  for (const char* v : {"VIRTUAL_ENV", "CONDA_PREFIX"})
    if (!env(v).empty()) s.lib_prefixes.push_back(env(v) + "/lib");
  // The environment of each python3 on PATH (<env>/bin/python3 -> <env>/lib), so that a venv
  // which is on PATH but not activated (no VIRTUAL_ENV) is found too.
  std::string path = env("PATH");
  for (size_t b = 0; b < path.size();) {
    size_t e = path.find(':', b);
    if (e == std::string::npos) e = path.size();
    std::string dir = path.substr(b, e - b);
    b = e + 1;
    size_t slash = dir.find_last_of('/');
    if (slash == std::string::npos || slash == 0 || dir.substr(slash) != "/bin") continue;
    if (!is_file(dir + "/python3")) continue;
    std::string lib = dir.substr(0, slash) + "/lib";
    if (std::find(s.lib_prefixes.begin(), s.lib_prefixes.end(), lib) == s.lib_prefixes.end())
      s.lib_prefixes.push_back(lib);
  }
  if (!env("HOME").empty()) s.lib_prefixes.push_back(env("HOME") + "/.local/lib");
  s.lib_prefixes.push_back("/usr/local/lib");
  s.lib_prefixes.push_back("/usr/lib");
  s.site_dirs.push_back("/usr/lib/python3/dist-packages");
  return s;
}

std::optional<std::string> find_plugin(const SearchPaths& paths) {
  if (!paths.env_plugin.empty()) return paths.env_plugin;
  for (const std::string& site : paths.site_dirs)
    if (auto p = plugin_in(site)) return p;
  for (const std::string& prefix : paths.lib_prefixes) {
    std::vector<std::string> sites;
    for (const char* kind : {"site-packages", "dist-packages"})
      for (std::string& s : glob_sorted(prefix + "/python3*/" + kind)) sites.push_back(s);
    std::sort(sites.begin(), sites.end(), std::greater<>());  // python3.13 before python3.12
    for (const std::string& site : sites)
      if (auto p = plugin_in(site)) return p;
  }
  return std::nullopt;
}

std::string site_of(const std::string& plugin_path) {
  size_t p = plugin_path.rfind("/jax_plugins/");
  return p == std::string::npos ? "" : plugin_path.substr(0, p);
}

std::string cuda_data_dir(const std::string& plugin_path) {
  std::string site = site_of(plugin_path);
  if (site.empty()) return "";
  for (const char* d : {"/nvidia/cu13", "/nvidia/cuda_nvcc"}) {
    struct stat st {};
    std::string dir = site + d;
    if (::stat((dir + "/bin/ptxas").c_str(), &st) == 0 ||
        ::stat((dir + "/nvvm/libdevice").c_str(), &st) == 0)
      return dir;
  }
  return "";
}

int preload_cuda_libraries(const std::string& site) {
  // Dependency order (cudart first, cublas after cublasLt, cusolver after cublas/cusparse).
  static constexpr const char* kLibs[] = {
      "cu13/lib/libcudart.so.*", "cu13/lib/libnvJitLink.so.*",
      "cu13/lib/libnvrtc.so.*",  "cu13/lib/libcublasLt.so.*",
      "cu13/lib/libcublas.so.*", "cu13/lib/libcusparse.so.*",
      "cu13/lib/libcufft.so.*",  "cu13/lib/libcusolver.so.*",
      "cu13/lib/libcupti.so.*",  "cudnn/lib/libcudnn.so.*",
      "nccl/lib/libnccl.so.*",   "nvshmem/lib/libnvshmem_host.so.*"};
  std::vector<std::string> todo;
  for (const char* pattern : kLibs)
    for (std::string& p : glob_sorted(site + "/nvidia/" + pattern)) todo.push_back(std::move(p));
  int loaded = 0;
  for (int pass = 0; pass < 2; ++pass) {  // a second pass for order surprises
    std::vector<std::string> failed;
    for (const std::string& p : todo) {
      if (::dlopen(p.c_str(), RTLD_NOW | RTLD_GLOBAL | RTLD_NODELETE))
        ++loaded;
      else
        failed.push_back(p);
    }
    todo = std::move(failed);
  }
  return loaded;
}

std::string_view error_code_name(int code) {
  static constexpr const char* kNames[] = {"OK",
                                           "CANCELLED",
                                           "UNKNOWN",
                                           "INVALID_ARGUMENT",
                                           "DEADLINE_EXCEEDED",
                                           "NOT_FOUND",
                                           "ALREADY_EXISTS",
                                           "PERMISSION_DENIED",
                                           "RESOURCE_EXHAUSTED",
                                           "FAILED_PRECONDITION",
                                           "ABORTED",
                                           "OUT_OF_RANGE",
                                           "UNIMPLEMENTED",
                                           "INTERNAL",
                                           "UNAVAILABLE",
                                           "DATA_LOSS",
                                           "UNAUTHENTICATED"};
  if (code < 0 || code > 16) return "UNKNOWN_CODE";
  return kNames[code];
}

const Plugin& Plugin::load(const std::string& path) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<Plugin>> loaded;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = loaded.find(path); it != loaded.end()) return *it->second;
  if (!is_file(path)) fail("PJRT plugin {}: no such file", path);
  std::string site = site_of(path);
  if (!site.empty()) preload_cuda_libraries(site);
  // RTLD_NODELETE: a plugin cannot be unloaded safely (threads, CUDA state).
  void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!h) fail("PJRT plugin {}: cannot load: {}", path, ::dlerror());
  auto get = reinterpret_cast<capi::GetPjrtApiFn>(::dlsym(h, "GetPjrtApi"));
  if (!get) fail("PJRT plugin {}: no GetPjrtApi symbol (not a PJRT plugin)", path);
  const capi::Api* api = get();
  if (!api) fail("PJRT plugin {}: GetPjrtApi returned null", path);
  int major = api->pjrt_api_version.major_version, minor = api->pjrt_api_version.minor_version;
  if (major != capi::kMajor || minor < capi::kMinMinor)
    fail("PJRT plugin {} has PJRT API {}.{}, tlaloc needs >= {}.{} (major {})", path, major, minor,
         capi::kMajor, capi::kMinMinor, capi::kMajor);
  size_t need = capi::kApiFunctionsOffset + 8 * (size_t(capi::kLastFnUsed) + 1);
  if (api->struct_size < need)
    fail("PJRT plugin {}: PJRT_Api is {} bytes, tlaloc needs {}", path, api->struct_size, need);
  std::unique_ptr<Plugin> p(new Plugin(path, api));
  p->cuda_data_dir_ = pjrt::cuda_data_dir(path);
  capi::PluginInitializeArgs init{sizeof(init), nullptr};
  p->call(capi::kPluginInitialize, &init, "PJRT_Plugin_Initialize");
  return *loaded.emplace(path, std::move(p)).first->second;
}

void* Plugin::function(capi::FnIndex index) const {
  void* f = reinterpret_cast<void* const*>(reinterpret_cast<const char*>(api_) +
                                           capi::kApiFunctionsOffset)[index];
  if (!f) fail("PJRT plugin {}: API function #{} is not provided", path_, int(index));
  return f;
}

std::string Plugin::message(const capi::Error* e) const {
  capi::ErrorMessageArgs m{sizeof(m), nullptr, e, nullptr, 0};
  reinterpret_cast<capi::ErrorMessageFn>(function(capi::kErrorMessage))(&m);
  return m.message ? std::string(m.message, m.message_size) : std::string("(no message)");
}

void Plugin::destroy(capi::Error* e) const {
  capi::ErrorDestroyArgs d{sizeof(d), nullptr, e};
  reinterpret_cast<capi::ErrorDestroyFn>(function(capi::kErrorDestroy))(&d);
}

void Plugin::check(capi::Error* e, std::string_view what) const {
  if (!e) return;
  struct Guard {
    const Plugin* p;
    capi::Error* e;
    ~Guard() { p->destroy(e); }
  } guard{this, e};
  std::string msg = message(e);
  capi::ErrorGetCodeArgs c{sizeof(c), nullptr, e, capi::kUnknown};
  capi::Error* ce =
      reinterpret_cast<capi::Fn<capi::ErrorGetCodeArgs>>(function(capi::kErrorGetCode))(&c);
  if (ce) {
    destroy(ce);
    fail("{}: {}", what, msg);
  }
  fail("{}: {} ({})", what, msg, error_code_name(c.code));
}

}  // namespace tlaloc::runtime::pjrt
