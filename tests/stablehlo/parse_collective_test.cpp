// all_reduce / all_gather in StableHLO text: the form JAX's pmap lowers psum / all_gather to
// (attributes after the region, mhlo.num_replicas > 1), the channel form, emit -> parse ->
// emit, and what the reader refuses.
#include <gtest/gtest.h>

#include "tests/support/error_of.h"
#include "tlaloc/ir/builder.h"
#include "tlaloc/stablehlo/emit.h"
#include "tlaloc/stablehlo/parse.h"

using namespace tlaloc;
using namespace tlaloc::ir;
using tlaloc::testing::error_of;
namespace shlo = tlaloc::stablehlo;

namespace {

const char* kPmap =
    R"(module @jit_step attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 2 : i32} {
  func.func public @main(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<4x3xf32>, tensor<2x6xf32>) {
    %0 = "stablehlo.all_reduce"(%x) ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = "stablehlo.add"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%s) : (tensor<f32>) -> ()
    }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    %1 = "stablehlo.all_gather"(%x) {all_gather_dim = 0 : i64, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<2x3xf32>) -> tensor<4x3xf32>
    %2 = "stablehlo.all_gather"(%x) <{all_gather_dim = 1 : i64, channel_handle = #stablehlo.channel_handle<handle = 5, type = 1>, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, use_global_device_ids}> : (tensor<2x3xf32>) -> tensor<2x6xf32>
    "func.return"(%0, %1, %2) : (tensor<2x3xf32>, tensor<4x3xf32>, tensor<2x6xf32>) -> ()
  }
}
)";

std::string replaced(std::string s, const std::string& from, const std::string& to) {
  s.replace(s.find(from), from.size(), to);
  return s;
}

}  // namespace

TEST(StablehloParse, CollectivesAsJaxPrintsThem) {
  Function f = shlo::parse(kPmap);
  const Node& r = f.nodes[size_t(f.results[0])];
  EXPECT_EQ(r.op, Op::all_reduce);
  EXPECT_EQ(r.attrs.reduce_kind, ReduceKind::sum);
  EXPECT_EQ(r.attrs.replica_groups, all_replicas(2));
  EXPECT_EQ(r.attrs.channel_id, 0);
  const Node& g0 = f.nodes[size_t(f.results[1])];
  EXPECT_EQ(g0.op, Op::all_gather);
  EXPECT_EQ(g0.attrs.dimension, 0);
  const Node& g1 = f.nodes[size_t(f.results[2])];
  EXPECT_EQ(g1.attrs.dimension, 1);
  EXPECT_EQ(g1.attrs.channel_id, 5);
  // Printed back: properties, the replica count, the channel.
  const std::string text = shlo::emit(f);
  EXPECT_NE(text.find("mhlo.num_replicas = 2 : i32"), std::string::npos);
  EXPECT_NE(text.find("channel_handle = #stablehlo.channel_handle<handle = 5, type = 1>"),
            std::string::npos);
  EXPECT_EQ(shlo::emit(shlo::parse(text)), text);
}

TEST(StablehloParse, CollectivesMaxMinAndSplatGroups) {
  std::string t = replaced(kPmap, "stablehlo.add", "stablehlo.minimum");
  t = replaced(t, "dense<[[0, 1]]> : tensor<1x2xi64>}", "dense<0> : tensor<1x1xi64>}");
  t = replaced(t, "mhlo.num_replicas = 2", "mhlo.num_replicas = 1");
  Function f = shlo::parse(t);
  const Node& r = f.nodes[size_t(f.results[0])];
  EXPECT_EQ(r.attrs.reduce_kind, ReduceKind::min);
  EXPECT_EQ(r.attrs.replica_groups, (std::vector<std::vector<int64_t>>{{0}}));
}

TEST(StablehloParse, CollectivesRefused) {
  auto err = [](const std::string& t) { return error_of([&] { shlo::parse(t); }); };
  EXPECT_NE(err(replaced(kPmap, "type = 1", "type = 0")).find("channel_handle<handle = K >= 1"),
            std::string::npos);
  EXPECT_NE(
      err(replaced(kPmap, "channel_handle = #stablehlo.channel_handle<handle = 5, type = 1>, ", ""))
          .find("use_global_device_ids needs a channel_handle"),
      std::string::npos);
  EXPECT_NE(err(replaced(kPmap, "stablehlo.add", "stablehlo.multiply"))
                .find("all_reduce: unsupported region op 'multiply'"),
            std::string::npos);
  EXPECT_NE(err(replaced(kPmap, "mhlo.num_partitions = 1", "mhlo.num_partitions = 2"))
                .find("mhlo.num_partitions"),
            std::string::npos);
  EXPECT_NE(err(replaced(kPmap,
                         "{all_gather_dim = 0 : i64, replica_groups = dense<[[0, 1]]> : "
                         "tensor<1x2xi64>}",
                         "{all_gather_dim = 0 : i64, replica_groups = dense<[0, 1]> : "
                         "tensor<2xi64>}"))
                .find("replica_groups must be a [groups, size] tensor"),
            std::string::npos);
  EXPECT_NE(err(replaced(kPmap, "tensor<2x3xf32>) -> tensor<4x3xf32>",
                         "tensor<2x3xf32>) -> tensor<6x3xf32>"))
                .find("declared result tensor<6x3xf32> but it infers tensor<4x3xf32>"),
            std::string::npos);
}
