// What a pipeline-parallel engine (a PipelineTail behind stage 0) refuses, decided in one place:
// every feature that needs all layers' K/V or hidden states on one process — KV tiers (blocks
// copied to and from DRAM / disk), semi-PD, speculative decoding (the draft head reads the final
// hidden state; verification is fine in principle but not carried), SpecEE early exit, sparse
// decode (page selection at a layer), PIC/CacheBlend links (K/V moved and probed across layers),
// LoRA adapters, and the KV hand-off and peer fetch (a block's bytes are split over processes).
// Refusals are InvalidArgument (config: at start; request: at submit) with a message that names
// the feature and "--pp".
// Thread safety: pure functions.
#pragma once

#include "core/status.h"
#include "engine/engine_config.h"
#include "engine/types.h"

namespace keel::engine {

// OK when `config` asks for nothing a pipeline-parallel engine refuses.
[[nodiscard]] Status check_pipeline_config(const EngineConfig& config);

// OK when `request` (with the engine's defaults in `config`) asks for nothing a pipeline-parallel
// engine refuses.
[[nodiscard]] Status check_pipeline_request(const GenerationRequest& request,
                                            const EngineConfig& config);

}  // namespace keel::engine
