// The pjrt lane's plumbing on CPU: a fake PJRT plugin with one device (fake_device.cc) that
// computes with tlaloc's StableHLO parser and host lane, so buffers, events, compilation,
// the compile cache, execution and donation run through tlaloc's real PJRT client code.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstring>

#include "fake_client.h"
#include "support/op_cases.h"
#include "support/stablehlo_roundtrip.h"
#include "tlaloc/composites/composites.h"
#include "tlaloc/ir/builder.h"
#include "tlaloc/passes/expand.h"
#include "tlaloc/runtime/host/compile.h"
#include "tlaloc/runtime/pjrt/executable.h"
#include "tlaloc/stablehlo/parse.h"

using namespace tlaloc;
using namespace tlaloc::ir;
using namespace tlaloc::runtime::pjrt;

namespace {

using tlaloc::testing::fake_client;
using tlaloc::testing::fake_path;
using tlaloc::testing::last_options;

// step(w, g, lr) = (w - lr * g, sum(w)); output 0 aliases (donates) w.
Function sgd_step() {
  Builder b("sgd");
  auto w = b.parameter({DType::f32, {4}}, "w");
  auto g = b.parameter({DType::f32, {4}}, "g");
  auto lr = b.parameter({DType::f32, {}}, "lr");
  auto upd = b.binary(Op::subtract, w, b.binary(Op::multiply, b.broadcast_in_dim(lr, {4}, {}), g));
  Function f = b.build({upd, b.reduce(w, ReduceKind::sum, {0})}, {"w", "sum"});
  f.aliases.push_back({0, 0});
  return f;
}

}  // namespace

// A program with collectives is compiled for the replicas its module names: the plugin gets
// ExecutableBuildOptions.num_replicas = 2 beside mhlo.num_replicas = 2 (the executing fake then
// runs it on the host lane of this one process, which is a replica group of one: only the
// compile is shown here; tests/distributed runs such steps across processes).
TEST(PjrtFakeDevice, CollectivesCompileForTheirReplicas) {
  auto c = fake_client();
  Builder b("psum");
  auto x = b.parameter({DType::f32, {4}}, "x");
  Function f = b.build({b.all_reduce(x, ReduceKind::sum, all_replicas(2))}, {"y"});
  auto exe = compile(f, *c);
  CompileOptions want;
  want.num_replicas = 2;
  EXPECT_EQ(last_options, serialize(want));
  EXPECT_NE(exe->program().find("mhlo.num_replicas = 2 : i32"), std::string::npos);
}

TEST(PjrtFakeDevice, ProbeCompileRunAndCache) {
  auto c = fake_client();
  EXPECT_EQ(c->num_devices(), 1);
  std::unique_ptr<Client> probed;
  Status st = probe_at({fake_path(), {}, {}}, {}, &probed);
  EXPECT_TRUE(st.ok) << st.reason;
  EXPECT_NE(probed, nullptr);

  auto exe = compile(sgd_step(), *c);
  EXPECT_EQ(last_options, serialize({}));  // not in a wheel: no cuda data dir override
  auto exe2 = compile(sgd_step(), *c);
  EXPECT_EQ(c->cache_size(), 1u);
  tlaloc::stablehlo::EmitOptions unnamed;
  unnamed.names = false;
  compile(sgd_step(), *c, {unnamed, {}});  // different text: a second entry
  EXPECT_EQ(c->cache_size(), 2u);
  std::vector<Array> in = {Array::from<float>({4}, {1, 2, 3, 4}),
                           Array::from<float>({4}, {2, 2, 2, 2}), Array::scalar(0.25f)};
  auto out = exe->run(in);
  // Hand-computed: w - 0.25 * 2, sum(w) = 10.
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{0.5f, 1.5f, 2.5f, 3.5f}));
  EXPECT_EQ(out[1].to_vector<float>(), (std::vector<float>{10.0f}));
  EXPECT_FALSE(in[0].empty());
  auto out2 = exe2->run_donated(in);
  EXPECT_TRUE(in[0].empty());
  EXPECT_FALSE(in[1].empty());
  EXPECT_EQ(out2[0].to_vector<float>(), out[0].to_vector<float>());
  EXPECT_THROW(exe2->run_donated(in), Error);  // w was given up
}

TEST(PjrtFakeDevice, DeviceResidentStateIsDonatedEachStep) {
  auto c = fake_client();
  auto exe = compile(sgd_step(), *c);
  std::vector<Buffer> args;
  args.push_back(c->to_device(Array::from<float>({4}, {1, 2, 3, 4})));
  args.push_back(c->to_device(Array::from<float>({4}, {1, 1, 1, 1})));
  args.push_back(c->to_device(Array::scalar(0.5f)));
  std::vector<Buffer> kept = exe->run_buffers(args, false);  // reads only
  EXPECT_FALSE(args[0].empty());
  for (int step = 0; step < 3; ++step) {
    std::vector<Buffer> out = exe->run_buffers(args, true);
    EXPECT_TRUE(args[0].empty());
    EXPECT_FALSE(args[1].empty());
    args[0] = std::move(out[0]);
  }
  // w - 3 * 0.5 * 1
  EXPECT_EQ(c->to_host(args[0]).to_vector<float>(), (std::vector<float>{-0.5f, 0.5f, 1.5f, 2.5f}));
  EXPECT_EQ(c->to_host(kept[1]).to_vector<float>(), (std::vector<float>{10.0f}));
  std::vector<Buffer> bad;
  bad.push_back(Buffer());
  bad.push_back(c->to_device(Array::from<float>({4}, {1, 1, 1, 1})));
  bad.push_back(c->to_device(Array::scalar(0.5f)));
  EXPECT_THROW(exe->run_buffers(bad, true), Error);
  bad[0] = c->to_device(Array::from<int32_t>({4}, {1, 2, 3, 4}));
  try {
    exe->run_buffers(bad, true);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("device input 0 is s32[4] but the function takes f32[4]"),
              std::string::npos)
        << e.what();
  }
}

TEST(PjrtFakeDevice, PluginErrorsCarryTheirMessage) {
  auto c = fake_client();
  try {
    c->compile("module { nonsense }");
    FAIL();
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_EQ(m.rfind("PJRT_Client_Compile: stablehlo::parse: line 1 column 10:", 0), 0u) << m;
    EXPECT_NE(m.find("(INVALID_ARGUMENT)"), std::string::npos) << m;
  }
}

// Every op case through the PJRT plumbing (buffers of every dtype, several outputs): the fake
// computes on the host lane, so results are bitwise those of the host lane (on the function with
// composites expanded: StableHLO carries their decomposition).
TEST(PjrtFakeDevice, EveryOpThroughThePjrtClient) {
  auto c = fake_client();
  for (auto& [op, fs] : tlaloc::testing::op_cases()) {
    uint64_t seed = 1;
    for (const Function& f : fs) {
      auto in = tlaloc::testing::sample_inputs(f, seed++);
      auto got = compile(f, *c)->run(in);
      auto want = runtime::host::compile(passes::expand_composites(f))->run(in);
      ASSERT_EQ(got.size(), want.size()) << op_name(op);
      for (size_t k = 0; k < want.size(); ++k)
        EXPECT_TRUE(got[k].bitwise_equal(want[k])) << op_name(op) << " case " << seed - 1;
    }
  }
}

// The runtime::Executable interface on this lane: lane buffers are device buffers (upload /
// download are the client's counted transfers), a run on them moves nothing across, donation
// empties exactly the aliased arguments, host buffers are copied in and left in place, and a
// failed run leaves the arguments alone. (The host lane's side: tests/runtime/interface_test.)
TEST(PjrtFakeDevice, LaneBuffersStayOnTheDeviceAndOnlyUploadsAndDownloadsMoveData) {
  auto c = fake_client();
  std::unique_ptr<runtime::Executable> exe = compile(sgd_step(), *c);
  const int64_t up0 = c->uploads(), down0 = c->downloads();
  std::vector<runtime::Buffer> args;
  args.push_back(exe->upload(Array::from<float>({4}, {1, 2, 3, 4})));
  args.push_back(exe->upload(Array::from<float>({4}, {1, 1, 1, 1})));
  args.push_back(exe->upload(Array::scalar(0.5f)));
  EXPECT_FALSE(args[0].on_host());  // a device buffer
  EXPECT_EQ(args[0].type(), (TensorType{DType::f32, Shape{4}}));
  for (int step = 0; step < 3; ++step) {
    std::vector<runtime::Buffer> out = exe->run(args, true);
    EXPECT_TRUE(args[0].empty());  // donated
    EXPECT_FALSE(args[1].empty());
    args[0] = std::move(out[0]);
  }
  EXPECT_EQ(c->uploads() - up0, 3);  // nothing more per run
  EXPECT_EQ(c->downloads() - down0, 0);
  EXPECT_EQ(exe->download(args[0]).to_vector<float>(), (std::vector<float>{-0.5, 0.5, 1.5, 2.5}));
  EXPECT_EQ(c->downloads() - down0, 1);
  EXPECT_FALSE(args[0].empty());  // download(const&) reads
}

TEST(PjrtFakeDevice, HostBuffersAreCopiedInAndLeftInPlaceUnlessDonated) {
  auto c = fake_client();
  std::unique_ptr<runtime::Executable> exe = compile(sgd_step(), *c);
  std::vector<runtime::Buffer> args;
  args.emplace_back(Array::from<float>({4}, {1, 2, 3, 4}));
  args.emplace_back(Array::from<float>({4}, {1, 1, 1, 1}));
  args.emplace_back(Array::scalar(1.0f));
  const int64_t up0 = c->uploads();
  std::vector<runtime::Buffer> out = exe->run(args, false);
  EXPECT_EQ(c->uploads() - up0, 3);
  for (const auto& a : args) EXPECT_TRUE(a.on_host());  // lent, given back
  EXPECT_EQ(exe->download(std::move(out[1])).at(0), 10.0);
  out = exe->run(args, true);
  EXPECT_TRUE(args[0].empty());  // a donated host buffer is consumed like a device one
  EXPECT_TRUE(args[1].on_host());
  EXPECT_EQ(exe->download(out[0]).to_vector<float>(), (std::vector<float>{0, 1, 2, 3}));
}

TEST(PjrtFakeDevice, AFailedRunLeavesTheBuffersAlone) {
  auto c = fake_client();
  std::unique_ptr<runtime::Executable> exe = compile(sgd_step(), *c);
  std::vector<runtime::Buffer> args;
  args.push_back(exe->upload(Array::from<float>({4}, {1, 2, 3, 4})));
  args.push_back(exe->upload(Array::from<float>({4}, {1, 1, 1, 1})));
  args.push_back(exe->upload(Array::from<int32_t>({1}, {1})));
  try {
    exe->run(args, true);
    FAIL() << "a mistyped input ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("input 2 (lr) is s32[1] but the function takes f32[]"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(args[0].empty());  // not consumed
  args[2] = runtime::Buffer();
  EXPECT_THROW(exe->run(args, true), Error);
  EXPECT_FALSE(args[0].empty());
  EXPECT_EQ(exe->download(args[0]).to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
}
