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

// --lora's check: "NAME=PATH" with both parts non-empty ("" when it is, else the message).
inline std::string check_lora_spec(const std::string& v) {
  const size_t eq = v.find('=');
  return eq == std::string::npos || eq == 0 || eq + 1 == v.size()
             ? std::string("expected NAME=PATH")
             : std::string();
}

// -t/--threads, --isa, --mmap, --weight-layout, --verbose.
void add_compute_options(CLI::App* cmd, keel::cli::ComputeOptions* o);
