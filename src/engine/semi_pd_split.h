// SemiPdSplit: how semi-PD divides the machine's cores between its prefill and decode workers
// (the CPU form of the paper's SM percentages), and the pure functions around it: parsing
// `--semi-pd-split X,Y`, the core set of each worker, and pinning the calling thread to a core.
// Invariants: a valid split has 1 ≤ prefill, decode ≤ the cores available. The sets may
// overlap when X + Y exceeds the cores (as MPS lets SM percentages sum past 100 %): prefill takes
// the first X cores, decode the last Y.
// Thread safety: plain data and pure functions; pin_current_thread affects the caller only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"
#include "core/status.h"

namespace keel::engine {

struct SemiPdSplit {
  int32_t prefill = 1;  // compute threads (cores) of the prefill worker
  int32_t decode = 1;   // compute threads (cores) of the decode worker
  friend bool operator==(const SemiPdSplit&, const SemiPdSplit&) = default;
  // InvalidArgument unless both are in [1, num_cores].
  [[nodiscard]] Status validate(int32_t num_cores) const;
};

// "X,Y" → {X, Y}; InvalidArgument naming the text otherwise (range checks: validate()).
[[nodiscard]] Result<SemiPdSplit> parse_semi_pd_split(const std::string& text);

// The cores this process may run on (sched_getaffinity), ascending; at least one entry.
[[nodiscard]] std::vector<int> allowed_cores();

// The worker core sets of `split` over `cores` (split.validate(cores.size()) must hold):
// prefill = the first split.prefill cores, decode = the last split.decode cores.
struct SemiPdCoreSets {
  std::vector<int> prefill;
  std::vector<int> decode;
};
[[nodiscard]] SemiPdCoreSets semi_pd_core_sets(const SemiPdSplit& split,
                                               const std::vector<int>& cores);

// Pins the calling thread to `core`; false when the system refused (the thread runs unpinned).
bool pin_current_thread(int core);

}  // namespace keel::engine
