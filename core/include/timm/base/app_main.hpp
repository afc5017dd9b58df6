// The main() of timm-cpp's command-line tools.
//
//   int main(int argc, char** argv) { return timm::run_app("timm-run", argc, argv, run); }
//
// sets up logging, applies the CPU allocator policy (cpu_allocator.hpp),
// installs the fatal-error handler (error.hpp) that prints
// "<app>: error: <message>" on stderr, runs `body` and reports an escaping
// error through that handler, with exit code 2 for usage errors and 1 for
// every other failure.
#pragma once

namespace timm {

using AppBody = int (*)(int argc, char** argv);

int run_app(const char* app, int argc, char** argv, AppBody body);

}  // namespace timm
