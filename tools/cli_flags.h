// Flag groups several keel subcommands share (defined in keel_main.cpp).
#pragma once

#include <CLI/CLI.hpp>

#include "commands.h"

// -t/--threads, --isa, --mmap, --weight-layout, --verbose.
void add_compute_options(CLI::App* cmd, keel::cli::ComputeOptions* o);
