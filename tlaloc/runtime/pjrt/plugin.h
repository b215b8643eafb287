// Finding and loading a PJRT plugin (JAX's CUDA plugin, jax-cuda13-pjrt / jax-cuda12-pjrt).
// The plugin is a shared library exporting `const PJRT_Api* GetPjrtApi()`; tlaloc dlopen()s it
// (never unloaded: plugins cannot be unloaded safely), checks its PJRT API version against
// capi::kMinMinor and calls PJRT_Plugin_Initialize once.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tlaloc/runtime/pjrt/c_api.h"

namespace tlaloc::runtime::pjrt {

// Where to look for a plugin.
struct SearchPaths {
  std::string env_plugin;              // TLALOC_PJRT_PLUGIN ("" = unset): used as is
  std::vector<std::string> site_dirs;  // directories that may hold jax_plugins/ ($PYTHONPATH, ...)
  std::vector<std::string> lib_prefixes;  // <prefix>/python3*/{site,dist}-packages are searched
  // From the environment: TLALOC_PJRT_PLUGIN, PYTHONPATH, VIRTUAL_ENV, CONDA_PREFIX, the
  // <env>/lib of each <env>/bin/python3 on PATH, HOME (~/.local/lib), /usr/local/lib, /usr/lib,
  // /usr/lib/python3/dist-packages.
  static SearchPaths from_environment();
};

// The plugin path: env_plugin if set (even if missing: loading then says so), else the first
// <site>/jax_plugins/xla_cuda<N>/*.so over site_dirs then lib_prefixes (highest N first within a
// directory, names sorted). nullopt when there is none.
std::optional<std::string> find_plugin(const SearchPaths& paths);

// One line for the user when no plugin is found.
inline constexpr const char* kNoPluginReason =
    "no PJRT plugin: set TLALOC_PJRT_PLUGIN or install jax-cuda13-pjrt";

// The Python site directory of a plugin installed as a wheel (".../site-packages" for
// ".../site-packages/jax_plugins/xla_cuda13/xla_cuda_plugin.so"); "" otherwise.
std::string site_of(const std::string& plugin_path);
// The CUDA toolkit directory that the nvidia-* wheels put beside the plugin (<site>/nvidia/cu13,
// else <site>/nvidia/cuda_nvcc: holds bin/ptxas and nvvm/libdevice), "" if none. XLA does not
// look there by itself, so compilation passes it as the xla_gpu_cuda_data_dir option.
std::string cuda_data_dir(const std::string& plugin_path);
// Loads (RTLD_GLOBAL) the CUDA libraries of the nvidia-* wheels in <site>/nvidia/*/lib that the
// plugin needs, as JAX does before loading it; libraries that fail to load are left to the
// plugin's own loader. Returns how many were loaded.
int preload_cuda_libraries(const std::string& site);

// A loaded plugin. Obtained from Plugin::load, lives until the process ends.
class Plugin {
 public:
  // preload_cuda_libraries + dlopen + GetPjrtApi + version check + PJRT_Plugin_Initialize; cached
  // per path. Throws tlaloc::Error naming the path: cannot be opened (dlerror), no GetPjrtApi
  // symbol, PJRT API "0.N, tlaloc needs >= 0.M", API table too short, or the plugin's initialize
  // error.
  static const Plugin& load(const std::string& path);

  const std::string& path() const { return path_; }
  int major() const { return api_->pjrt_api_version.major_version; }
  int minor() const { return api_->pjrt_api_version.minor_version; }
  const capi::Api* api() const { return api_; }
  const std::string& cuda_data_dir() const { return cuda_data_dir_; }  // see cuda_data_dir()

  // Calls function `index` of the API table with `args` (struct_size set by the caller);
  // a returned PJRT_Error becomes a tlaloc::Error "<what>: <plugin message> (<code>)".
  template <typename Args>
  void call(capi::FnIndex index, Args* args, std::string_view what) const {
    check(reinterpret_cast<capi::Fn<Args>>(function(index))(args), what);
  }
  // Throws (and destroys `e`) when e is not null.
  void check(capi::Error* e, std::string_view what) const;
  // The message of an error without destroying it.
  std::string message(const capi::Error* e) const;
  void destroy(capi::Error* e) const;

 private:
  Plugin(std::string path, const capi::Api* api) : path_(std::move(path)), api_(api) {}
  void* function(capi::FnIndex index) const;

  std::string path_;
  const capi::Api* api_;
  std::string cuda_data_dir_;
};

// Name of a PJRT_Error_Code ("INVALID_ARGUMENT").
std::string_view error_code_name(int code);

}  // namespace tlaloc::runtime::pjrt
