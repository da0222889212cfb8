// PageSelector: the forward pass's hook for sparse decode. At one layer (Batch::select_layer),
// after that layer's K/V rows of the batch are written and before attention, the selector sees
// each sequence marked select_pages — its tokens' positions and queries — and may replace the
// pages its tokens attend in this layer and every later one. Layers before it attend the
// sequence's BatchSeq::attend_pages. The hook is how a decode step's query chooses its own pages
// (Quest, RaaS); the selector may read the sequence's K rows of that layer from the KV storage
// (the engine folds them into its page summaries there).
//
// Thread safety: called on the thread running Context::forward, once per marked sequence.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/batch.h"
#include "model/kv_storage.h"

namespace keel::model {

class PageSelector {
 public:
  virtual ~PageSelector() = default;
  // `seq`: index into batch.seqs; `positions`: its tokens' positions (ascending); `q`: their query
  // rows, [positions.size()][n_head * head_dim] after RoPE; `kv` holds every row of the sequence
  // up to its last position at `layer`. Returns the pages to attend from this layer on (the rules
  // of BatchSeq::attend_pages; a violation aborts), or empty to keep attend_pages.
  virtual std::vector<int32_t> select(int32_t seq, const BatchSeq& s,
                                      std::span<const int32_t> positions, std::span<const float> q,
                                      const KvStorage& kv, int64_t layer) = 0;
};

}  // namespace keel::model
