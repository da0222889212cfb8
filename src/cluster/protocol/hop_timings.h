// HopTimings: where the time went while a request was placed, hop by hop, gateway → JE → TE —
// each hop a duration measured on one process's own clock (no clocks compared across processes)
// and carried back in the replies as a "hops" object of seconds:
//   je_wait    the job waited at the JE before it was handled (its link, the fault hook's delay)
//   je_route   from the JE handling the job to the task call the TE took (routing, encoding, and
//              any tries on TEs that refused)
//   te_call    the JE's call to the TE, as the JE sees it (network both ways plus the TE's part)
//   te_intake  the task waited on the TE's intake thread
//   te_submit  the TE's engine took the request (a tier-T3 peer fetch included)
// plus the gateway's own `placed`: from its submit to the JE's answer. The gateway keeps one
// histogram per hop for /metrics (`keel:request_hop_seconds{hop=...}`) and logs a request whose
// placement took longer than its threshold with every hop and its request id, so one slow request
// can be followed across the processes (the same id is in their logs).
//
// Thread safety: HopTimings is internally locked; the functions are pure.
#pragma once

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "cluster/protocol/seconds_histogram.h"
#include "core/mutex.h"
#include "core/thread_annotations.h"

namespace keel::cluster {

// The hops the JE and TE report, in path order (the keys of a "hops" object).
inline constexpr const char* kHopNames[] = {"je_wait", "je_route", "te_call", "te_intake",
                                            "te_submit"};

// One line for the log: "request ID placed in 5.012 s (je_wait 5.001 s, je_route 0.000 s, ...)";
// hops missing from `hops` (an older peer) are left out.
[[nodiscard]] std::string describe_hops(const std::string& request_id, double placed_s,
                                        const nlohmann::json& hops);

class HopTimings {
 public:
  HopTimings();
  // Adds one placed request: its `placed` time and each hop `hops` names (numbers only).
  void observe(double placed_s, const nlohmann::json& hops);
  // Prometheus text: `keel:request_hop_seconds` with a `hop` label per hop, `placed` included.
  [[nodiscard]] std::string metrics_text() const;

 private:
  mutable Mutex mu_;
  std::map<std::string, SecondsHistogram> hist_ KEEL_GUARDED_BY(mu_);  // by hop name
};

}  // namespace keel::cluster
