// SamplingWorkspace: the scratch memory of one sample() call — about 7 bytes per vocabulary entry
// (1 MB at a 152k vocabulary). Holds no request state: any workspace gives the same tokens, so an
// engine serving many requests keeps one per sampling thread and lends it to each Sampler in turn
// instead of paying 1 MB per request. Buffers are sized on first use and reused afterwards.
//
// Thread safety: used by one sample() call at a time.
#pragma once

#include <vector>

#include "sampling/truncation.h"

namespace keel::sampling {

struct SamplingWorkspace {
  std::vector<float> weights;      // [vocab] exp(logit - max_logit), see softmax_math.h
  std::vector<double> block_sums;  // [ceil(vocab / kWeightBlockSize)]
  Truncator truncator;             // top-k / top-p / min-p scratch (keys, histogram, survivors)
  std::vector<float> raw_logits;   // [vocab] copy of the raw logits, for raw logprobs
};

}  // namespace keel::sampling
