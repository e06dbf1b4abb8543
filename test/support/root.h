// Tests that mount need root. Outside CI they skip without it; under CI=true a
// skipped root test would silently drop coverage, so it fails instead.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#define CERTMOUNT_REQUIRE_ROOT()                                           \
  do {                                                                     \
    if (geteuid() != 0) {                                                  \
      const char* ci = std::getenv("CI");                                  \
      if (ci != nullptr && std::strcmp(ci, "true") == 0) {                 \
        FAIL() << "this test needs root, and CI=true forbids skipping it"; \
      }                                                                    \
      GTEST_SKIP() << "needs root (mounts)";                               \
    }                                                                      \
  } while (0)
