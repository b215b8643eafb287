#include "tlaloc/train/lane.h"

#include <fmt/format.h>

#include "tlaloc/core/error.h"
#include "tlaloc/runtime/host/compile.h"
#include "tlaloc/runtime/pjrt/client.h"

namespace tlaloc::train {

Lane parse_lane(std::string_view s) {
  if (s == "host") return Lane::host;
  if (s == "pjrt") return Lane::pjrt;
  if (s == "auto") return Lane::automatic;
  fail("lane must be host, pjrt or auto, got '{}'", s);
}

std::string_view lane_name(Lane l) {
  switch (l) {
    case Lane::host:
      return "host";
    case Lane::pjrt:
      return "pjrt";
    case Lane::automatic:
      return "auto";
  }
  return "?";
}

LaneChoice choose_lane(Lane requested) {
  if (requested == Lane::host) return {Lane::host, "lane: host (requested)"};
  runtime::pjrt::Status st = runtime::pjrt::probe();
  if (st.ok) {
    auto& c = runtime::pjrt::default_client();
    return {Lane::pjrt, fmt::format("lane: pjrt ({}{} on {}, {} device(s))",
                                    requested == Lane::automatic ? "auto: " : "", c.plugin().path(),
                                    c.platform_name(), c.num_devices())};
  }
  if (requested == Lane::pjrt) fail("--lane pjrt: pjrt unavailable: {}", st.reason);
  return {Lane::host, fmt::format("lane: host (pjrt unavailable: {})", st.reason)};
}

int64_t compiled_executables(Lane lane) {
  int64_t n = runtime::host::compile_count();
  if (lane == Lane::pjrt) n += int64_t(runtime::pjrt::default_client().cache_size());
  return n;
}

}  // namespace tlaloc::train
