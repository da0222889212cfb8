// The fleet over several job executors (JEs), as the gateway shows it: each JE answers `fleet`
// with the TEs it knows and its own counters; every JE knows every TE (the cluster manager adds
// each TE to all of them), so the TEs are taken once — from the first JE that answered, plus any
// TE only a later one lists — and the JEs' job, router and predictor counters are summed. Each
// JE, answering or not, gets a JeSummary (its id, address, whether it answered and why not, its
// own counters), so /v1/cluster/status, `keel cluster status`, /metrics and the dashboard show
// all of them, not the first.
//
// Thread safety: pure functions over values.
#pragma once

#include <string>
#include <vector>

#include "cluster/protocol/messages.h"
#include "core/result.h"

namespace keel::cluster {

// One JE's answer to `fleet` (or why there was none), with its address and the id it last gave
// ("" when it never answered).
struct JeAnswer {
  std::string address;
  std::string last_id;
  Result<FleetStatus> status;
};

// The merged fleet; Unavailable, naming every JE and why it did not answer, when none did.
// je_id lists the answering JEs' ids, comma-separated; max_model_len and max_waiting come with
// the TEs (from the first answer).
[[nodiscard]] Result<FleetStatus> merge_fleet_statuses(const std::vector<JeAnswer>& answers);

// "je-0 (127.0.0.1:7001): <why>; ..." for the JEs that are down ("" when none is).
[[nodiscard]] std::string describe_down_jes(const std::vector<JeSummary>& jes);

}  // namespace keel::cluster
