// CPU tests of the pjrt lane: CompileOptionsProto bytes, plugin discovery on a fake directory
// tree, refusal of plugins that are not PJRT or too old, and PJRT_Error -> tlaloc::Error with
// fake plugins built by fake_plugins.cmake.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "fake_client.h"
#include "support/error_of.h"
#include "tlaloc/ir/builder.h"
#include "tlaloc/runtime/pjrt/client.h"
#include "tlaloc/runtime/pjrt/compile_options.h"
#include "tlaloc/stablehlo/emit.h"

using namespace tlaloc;
using namespace tlaloc::runtime::pjrt;
namespace fs = std::filesystem;

using tlaloc::testing::error_of;

namespace {

std::string bytes(std::initializer_list<int> b) {
  std::string s;
  for (int x : b) s += char(x);
  return s;
}

std::string fake(const char* name) {
  return tlaloc::testing::test_binary_dir() + "/tests/fake_pjrt/libfake_pjrt_" + name + ".so";
}

// A scratch directory removed at the end of the test.
struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() /
           ("tlaloc_pjrt_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string touch(const std::string& rel) const {
    fs::path p = path / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << "x";
    return p.string();
  }
};

}  // namespace

// Hand-encoded per https://protobuf.dev/programming-guides/encoding/: tag = field << 3 | wire.
TEST(PjrtCompileOptions, DefaultBytes) {
  // executable_build_options (3, LEN 18) { device_ordinal (1) = -1 as a 10-byte varint,
  // num_replicas (4) = 1, num_partitions (5) = 1, memory_fitting_level (25: tag 200 = varint
  // C8 01) = EFFORT_O2 (29) }.
  EXPECT_EQ(serialize({}), bytes({0x1A, 0x12, 0x08, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
                                  0xFF, 0xFF, 0x01, 0x20, 0x01, 0x28, 0x01, 0xC8, 0x01, 0x1D}));
}

// optimization_level (24: tag 192 = varint C0 01) when set; an unknown level is not sent.
TEST(PjrtCompileOptions, EffortLevels) {
  CompileOptions o;
  o.device_ordinal = 0;
  o.optimization_level = EffortLevel::O3;
  o.memory_fitting_level = EffortLevel::O0;
  EXPECT_EQ(serialize(o), bytes({0x1A, 0x0C, 0x08, 0x00, 0x20, 0x01, 0x28, 0x01, 0xC0, 0x01, 0x27,
                                 0xC8, 0x01, 0x09}));
  o.optimization_level = EffortLevel::unknown;
  o.memory_fitting_level = EffortLevel::unknown;
  EXPECT_EQ(serialize(o), bytes({0x1A, 0x06, 0x08, 0x00, 0x20, 0x01, 0x28, 0x01}));
}

TEST(PjrtCompileOptions, OverridesAreMapEntries) {
  CompileOptions o;
  o.device_ordinal = 0;
  o.overrides = {{"xla_gpu_deterministic_ops", true},
                 {"x", 0.5},
                 {"n", int64_t(300)},
                 {"d", std::string("/c")}};
  std::string want = bytes({0x1A, 0x09, 0x08, 0x00, 0x20, 0x01, 0x28, 0x01, 0xC8, 0x01, 0x1D});
  // env_option_overrides (7): entry { key (1) = name, value (2) = OptionOverrideProto }.
  want += bytes({0x3A, 0x1F, 0x0A, 0x19}) + "xla_gpu_deterministic_ops" +
          bytes({0x12, 0x02, 0x10, 0x01});  // bool_field (2) = 1
  // double_field (4), wire type 1: 0.5 = 0x3FE0000000000000 little-endian.
  want += bytes({0x3A, 0x0E, 0x0A, 0x01, 'x', 0x12, 0x09, 0x21, 0, 0, 0, 0, 0, 0, 0xE0, 0x3F});
  // int_field (3) = 300 = varint AC 02.
  want += bytes({0x3A, 0x08, 0x0A, 0x01, 'n', 0x12, 0x03, 0x18, 0xAC, 0x02});
  // string_field (1) = "/c".
  want += bytes({0x3A, 0x09, 0x0A, 0x01, 'd', 0x12, 0x04, 0x0A, 0x02, '/', 'c'});
  EXPECT_EQ(serialize(o), want);
}

TEST(PjrtDiscovery, FindsNewestCudaPluginOnFakeTree) {
  TempDir t;
  t.touch("lib/python3.11/site-packages/jax_plugins/xla_cuda12/xla_cuda_plugin.so");
  std::string p13 =
      t.touch("lib/python3.12/dist-packages/jax_plugins/xla_cuda13/xla_cuda_plugin.so");
  t.touch("lib/python3.12/dist-packages/jax_plugins/xla_cuda12/xla_cuda_plugin.so");
  t.touch("lib/python3.12/dist-packages/jax_plugins/xla_cuda14/README");  // no .so: skipped
  std::string other = t.touch("other/jax_plugins/xla_cuda12/xla_cuda_plugin.so");
  SearchPaths s;
  s.lib_prefixes = {(t.path / "lib").string()};
  EXPECT_EQ(find_plugin(s), p13);
  s.site_dirs = {(t.path / "nothing").string(), (t.path / "other").string()};
  EXPECT_EQ(find_plugin(s), other);  // site dirs ($PYTHONPATH) come first
  s.env_plugin = "/explicit/plugin.so";
  EXPECT_EQ(find_plugin(s), "/explicit/plugin.so");
  EXPECT_EQ(find_plugin(SearchPaths{"", {t.path.string()}, {(t.path / "none").string()}}),
            std::nullopt);
}

TEST(PjrtDiscovery, FromEnvironment) {
  ::setenv("TLALOC_PJRT_PLUGIN", "/p/x.so", 1);
  ::setenv("PYTHONPATH", "/a:/b/c", 1);
  SearchPaths s = SearchPaths::from_environment();
  ::unsetenv("TLALOC_PJRT_PLUGIN");
  ::unsetenv("PYTHONPATH");
  EXPECT_EQ(s.env_plugin, "/p/x.so");
  ASSERT_GE(s.site_dirs.size(), 2u);
  EXPECT_EQ(s.site_dirs[0], "/a");
  EXPECT_EQ(s.site_dirs[1], "/b/c");
  EXPECT_NE(std::find(s.lib_prefixes.begin(), s.lib_prefixes.end(), "/usr/lib"),
            s.lib_prefixes.end());
}

TEST(PjrtDiscovery, AVenvOnPathIsSearchedWithoutActivation) {
  TempDir t;
  std::string py = t.touch("venv/bin/python3");
  t.touch("bin/ls");  // a bin/ without python3 adds nothing
  const char* old = std::getenv("PATH");
  std::string saved = old ? old : "";
  std::string path = (t.path / "bin").string() + ":" + (t.path / "venv/bin").string() + ":" + saved;
  ::setenv("PATH", path.c_str(), 1);
  SearchPaths s = SearchPaths::from_environment();
  ::setenv("PATH", saved.c_str(), 1);
  auto has = [&](const std::string& p) {
    return std::find(s.lib_prefixes.begin(), s.lib_prefixes.end(), p) != s.lib_prefixes.end();
  };
  EXPECT_TRUE(has((t.path / "venv/lib").string()));
  EXPECT_FALSE(has((t.path / "lib").string()));
}

TEST(PjrtPlugin, RefusesWhatIsNotAUsablePlugin) {
  std::string e = error_of([] { Plugin::load(fake("no_api")); });
  EXPECT_NE(e.find("no GetPjrtApi symbol"), std::string::npos) << e;
  EXPECT_NE(e.find("libfake_pjrt_no_api.so"), std::string::npos) << e;
  e = error_of([] { Plugin::load(fake("old_api")); });
  EXPECT_NE(e.find("libfake_pjrt_old_api.so has PJRT API 0.40, tlaloc needs >= 0.81"),
            std::string::npos)
      << e;
  e = error_of([] { Plugin::load("/nonexistent/xla_cuda_plugin.so"); });
  EXPECT_NE(e.find("/nonexistent/xla_cuda_plugin.so: no such file"), std::string::npos) << e;
  TempDir t;
  std::string junk = t.touch("junk.so");
  e = error_of([&] { Plugin::load(junk); });
  EXPECT_NE(e.find("cannot load"), std::string::npos) << e;
}

TEST(PjrtPlugin, LoadsInitializesOnceAndCarriesPluginErrors) {
  const Plugin& p = Plugin::load(fake("ok"));
  EXPECT_EQ(p.major(), 0);
  EXPECT_EQ(p.minor(), 105);
  EXPECT_EQ(&Plugin::load(fake("ok")), &p);  // cached
  void* h = ::dlopen(fake("ok").c_str(), RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(h, nullptr);
  auto count = reinterpret_cast<int (*)()>(::dlsym(h, "fake_pjrt_initialize_count"));
  ASSERT_NE(count, nullptr);
  EXPECT_EQ(count(), 1);

  ClientOptions o;
  o.memory_fraction = 0.5f;
  o.preallocate = false;
  o.allocator = "bfc";
  auto c = Client::create(p, o);
  EXPECT_EQ(c->platform_name(), "fake");
  EXPECT_EQ(c->num_devices(), 0);
  // The plugin's own message and code come through.
  std::string e = error_of([&] { c->compile("module {}"); });
  EXPECT_EQ(e,
            "PJRT_Client_Compile: fake plugin cannot compile 9 bytes of mlir with 20 bytes of "
            "options (UNIMPLEMENTED)");  // DefaultBytes' 20
  EXPECT_EQ(c->cache_size(), 0u);
  e = error_of([&] { c->to_device(Array::scalar(1.0f)); });
  EXPECT_NE(e.find("no device"), std::string::npos) << e;
  o.allocator = "bogus";
  e = error_of([&] { Client::create(p, o); });
  EXPECT_EQ(e, "PJRT_Client_Create: fake: unknown allocator (INVALID_ARGUMENT)");
  o.allocator = "";
  o.memory_fraction = 1.5f;
  e = error_of([&] { Client::create(p, o); });
  EXPECT_EQ(e, "pjrt: memory_fraction 1.5 is not in (0, 1]");
}

TEST(PjrtDiscovery, WheelSiteCudaDataDirAndPreload) {
  TempDir t;
  std::string site = (t.path / "lib/python3.12/site-packages").string();
  std::string so = site + "/jax_plugins/xla_cuda13/xla_cuda_plugin.so";
  fs::create_directories(fs::path(so).parent_path());
  fs::copy_file(fake("ok"), so);
  EXPECT_EQ(site_of(so), site);
  EXPECT_EQ(site_of("/opt/pjrt/libplugin.so"), "");
  EXPECT_EQ(cuda_data_dir(so), "");  // no nvidia wheels
  t.touch("lib/python3.12/site-packages/nvidia/cu13/bin/ptxas");
  EXPECT_EQ(cuda_data_dir(so), site + "/nvidia/cu13");
  // A loadable library and a broken one where the CUDA runtime and cuBLAS would be.
  fs::create_directories(site + "/nvidia/cu13/lib");
  fs::copy_file(fake("no_api"), site + "/nvidia/cu13/lib/libcudart.so.13");
  t.touch("lib/python3.12/site-packages/nvidia/cu13/lib/libcublas.so.13");
  EXPECT_EQ(preload_cuda_libraries(site), 1);
  // Compilation passes the directory as the xla_gpu_cuda_data_dir override.
  const Plugin& p = Plugin::load(so);
  EXPECT_EQ(p.cuda_data_dir(), site + "/nvidia/cu13");
  auto c = Client::create(p);
  CompileOptions with_dir;
  with_dir.overrides = {{"xla_gpu_cuda_data_dir", site + "/nvidia/cu13"}};
  std::string e = error_of([&] { c->compile("module {}"); });
  EXPECT_NE(e.find("with " + std::to_string(serialize(with_dir).size()) + " bytes of options"),
            std::string::npos)
      << e;
}

TEST(PjrtProbe, OneLineReasons) {
  TempDir t;
  SearchPaths none{"", {t.path.string()}, {}};
  EXPECT_FALSE(probe_at(none, {}).ok);
  EXPECT_EQ(probe_at(none, {}).reason,
            "no PJRT plugin: set TLALOC_PJRT_PLUGIN or install jax-cuda13-pjrt");
  Status old = probe_at({fake("old_api"), {}, {}}, {});
  EXPECT_NE(old.reason.find("has PJRT API 0.40, tlaloc needs >= 0.81"), std::string::npos)
      << old.reason;
  std::unique_ptr<Client> c;
  Status ok = probe_at({fake("ok"), {}, {}}, {}, &c);
  EXPECT_FALSE(ok.ok);
  EXPECT_EQ(ok.reason, "no device: PJRT plugin " + fake("ok") + " (fake) sees no device");
  EXPECT_EQ(c, nullptr);
  // A create option the plugin rejects is the reason too.
  ClientOptions bad;
  bad.allocator = "bogus";
  EXPECT_EQ(probe_at({fake("ok"), {}, {}}, bad).reason,
            "PJRT_Client_Create: fake: unknown allocator (INVALID_ARGUMENT)");
}
