// TokenHistory: sparse per-request token counts for the penalties.
#include "sampling/token_history.h"

#include "core/check.h"

namespace keel::sampling {

TokenHistory::Entry& TokenHistory::entry_for(int32_t token_id) {
  KEEL_CHECK(token_id >= 0);
  auto [it, inserted] = index_.try_emplace(token_id, static_cast<uint32_t>(entries_.size()));
  if (inserted) entries_.push_back(Entry{token_id, 0, false});
  return entries_[it->second];
}

const TokenHistory::Entry* TokenHistory::find(int32_t token_id) const {
  auto it = index_.find(token_id);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

void TokenHistory::set_prompt(std::span<const int32_t> tokens) {
  for (Entry& e : entries_) e.in_prompt = false;
  for (int32_t id : tokens) entry_for(id).in_prompt = true;
}

void TokenHistory::add_output(int32_t token_id) {
  ++entry_for(token_id).output_count;
  ++num_output_tokens_;
}

void TokenHistory::clear() {
  entries_.clear();
  index_.clear();
  num_output_tokens_ = 0;
}

int32_t TokenHistory::output_count(int32_t token_id) const {
  const Entry* e = find(token_id);
  return e ? e->output_count : 0;
}

bool TokenHistory::in_prompt(int32_t token_id) const {
  const Entry* e = find(token_id);
  return e != nullptr && e->in_prompt;
}

}  // namespace keel::sampling
