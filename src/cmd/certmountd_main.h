// certmountd's command line: flags to NodeOptions, then a Node (src/node/)
// run through its startup order until SIGTERM or SIGINT. A library so the
// shipped daemon (certmountd.cc) and the tests' build of it
// (test/helpers/certmountd_test_hooks.cc) parse and run exactly alike.
#pragma once

#include <functional>

#include "node/node.h"

namespace certmount {

// Parses argv (exit 2 on a usage error, 0 for --help and --version), sets up
// logging, runs the node; returns the process exit code (1 when the node
// could not start). `adjust`, when set, may change the options after
// parsing; certmountd passes none.
int CertmountdMain(int argc, char** argv, const std::function<void(NodeOptions&)>& adjust = {});

}  // namespace certmount
