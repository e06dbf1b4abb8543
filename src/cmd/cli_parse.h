// The one way certmountd and certmountctl end on their command line: help
// and version print to stdout and exit 0, a parse error prints
// "<program>: <error>" to stderr and exits 2.
#pragma once

#include <CLI/CLI.hpp>
#include <iostream>
#include <optional>
#include <string>

namespace certmount {

inline constexpr int kExitUsage = 2;

// Parses argv into `app`; returns the exit code when the process ends here.
inline std::optional<int> ParseOrExit(CLI::App& app, const std::string& program, int argc,
                                      char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return 0;
  } catch (const CLI::CallForVersion&) {
    std::cout << program << " " << CERTMOUNT_VERSION << "\n";
    return 0;
  } catch (const CLI::ParseError& e) {
    std::cerr << program << ": " << e.what() << "\n";
    return kExitUsage;
  }
  return std::nullopt;
}

}  // namespace certmount
