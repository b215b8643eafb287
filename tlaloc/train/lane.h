// Lanes: where a train step runs. host = tlaloc's CPU runtime (runtime/host); pjrt = StableHLO
// compiled by XLA through a PJRT plugin (runtime/pjrt), state resident on the device; auto =
// pjrt when a plugin and a device are found, else host. The choice is reported in one line.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tlaloc::train {

enum class Lane { host, pjrt, automatic };

// "host" | "pjrt" | "auto" -> Lane; throws tlaloc::Error naming the bad value.
Lane parse_lane(std::string_view s);
std::string_view lane_name(Lane l);  // "host", "pjrt", "auto"

struct LaneChoice {
  Lane lane = Lane::host;  // host or pjrt, never automatic
  std::string line;        // one line: "lane: host (pjrt unavailable: no PJRT plugin: ...)"
};

// Resolves `requested` with runtime::pjrt::probe() (the process-wide client): host stays host;
// pjrt needs the probe to succeed, else throws tlaloc::Error whose message is the one line
// "--lane pjrt: pjrt unavailable: <probe's reason>"; auto takes pjrt when the probe succeeds,
// else host with the reason in the line.
LaneChoice choose_lane(Lane requested);

// Executables compiled so far by this process on `lane` (host compiles, plus on pjrt the
// process-wide client's cache): differences of it count a run's compilations.
int64_t compiled_executables(Lane lane);

}  // namespace tlaloc::train
