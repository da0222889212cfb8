// Reading a running `keel cluster up` from outside, as the cluster tests do: the JSON lines of
// its --event-log (unparsable lines skipped: a line may be half written), and how many TEs its
// gateway's /v1/cluster/status lists healthy.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace keel::testing {

// The event log's lines whose "event" is `kind`, in order; every object line when `kind` is "".
std::vector<nlohmann::json> read_event_log(const std::string& path, const std::string& kind = "");

// The TEs /v1/cluster/status on the gateway at `port` lists as healthy (0 when it does not answer).
int healthy_tes(int port);

}  // namespace keel::testing
