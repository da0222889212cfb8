// Flag groups several keel subcommands share (defined in keel_main.cpp).
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "commands.h"
#include "model/kv_type.h"

// The values --kv-type accepts (model::kKvTypeNames).
inline std::vector<std::string> kv_type_names() {
  return {keel::model::kKvTypeNames.begin(), keel::model::kKvTypeNames.end()};
}

// -t/--threads, --isa, --mmap, --weight-layout, --verbose.
void add_compute_options(CLI::App* cmd, keel::cli::ComputeOptions* o);
