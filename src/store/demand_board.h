// The demand board: how the cluster managers that share one host's model store see each other's
// forecasts. Each manager posts its model's forecast request rate once a second as a small file
// in the store directory, `keel-demand-<entry name>` (never an entry name: the store ignores it),
// and reads everyone's fresh notes into the snapshot of store::plan_preloads — so the managers
// rank the same models by the same rates, and the one whose model is wanted makes the room.
//
// Format: two lines, "<rate> <bytes> <unix seconds posted>\n<model path>\n"; written to a
// temporary and renamed into place. A note older than the reader's max age (its manager stopped
// or died) or malformed is skipped.
//
// Thread safety: pure I/O functions; concurrent writers of different notes are independent, and a
// reader sees each note whole or not at all.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace keel::store {

struct DemandNote {
  std::string entry;   // the model's entry name (entry_name of its key)
  std::string model;   // its GGUF path
  uint64_t bytes = 0;  // the entry's size, or the file's before one exists
  double rate = 0.0;   // forecast requests per second
  double posted_unix_s = 0.0;
};

// "keel-demand-<entry>".
[[nodiscard]] std::string demand_note_name(std::string_view entry);

[[nodiscard]] Status post_demand(const std::string& dir, const DemandNote& note);
// Every note in `dir` posted within `max_age_s` before `now_unix_s` (and not over 1 s after it),
// in name order.
[[nodiscard]] std::vector<DemandNote> read_demands(const std::string& dir, double now_unix_s,
                                                   double max_age_s);
// Removes `entry`'s note (a manager stopping); absent is fine.
void withdraw_demand(const std::string& dir, std::string_view entry);

}  // namespace keel::store
