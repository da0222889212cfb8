// Helpers of the draft tests: the repository's stories260K, its committed draft head, an Ops on
// the best kernel table, and a short dataset of the model's own text.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "draft/draft_dataset.h"
#include "draft/draft_head_file.h"
#include "model/model.h"

namespace keel::draft {

inline std::unique_ptr<model::Model> load_repo_stories() {
  auto m = model::Model::open(KEEL_REPO_STORIES);
  EXPECT_TRUE(m.ok()) << m.error().to_string();
  return m.ok() ? std::move(m).value() : nullptr;
}

struct TestOps {
  ThreadPool pool{1};
  kernels::Ops ops{kernels::best_isa(detect_cpu_features()), &pool};
};

inline DraftDataSpec small_spec(int64_t tokens) {
  DraftDataSpec s;
  s.tokens = tokens;
  s.seq_len = 64;
  s.bos = 1;
  s.stop_ids = {1, 2};
  return s;
}

}  // namespace keel::draft
