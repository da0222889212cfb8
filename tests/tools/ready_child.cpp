// start_ready_child (see ready_child.h).
#include "ready_child.h"

#include <gtest/gtest.h>

#include <chrono>

#include "proc/ready_line.h"

namespace keel::testing {

int start_ready_child(proc::ProcessSupervisor& sup, const std::string& name,
                      std::vector<std::string> argv, pid_t* pid) {
  proc::ChildSpec spec;
  spec.name = name;
  spec.argv = std::move(argv);
  spec.ready_timeout = std::chrono::seconds(60);
  Result<proc::Child> child = sup.spawn(spec);
  EXPECT_TRUE(child.ok()) << child.status().message();
  if (!child.ok()) return 0;
  *pid = child->pid;
  Result<int> port = proc::ready_port(child->ready);
  return port.ok() ? *port : 0;
}

}  // namespace keel::testing
