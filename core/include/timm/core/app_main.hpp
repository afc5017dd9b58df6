// The main() of timm-cpp's command-line tools.
//
//   int main(int argc, char** argv) { return timm::run_app("timm-run", argc, argv, run); }
//
// sets up logging, runs `body` and turns an escaping error into the house
// convention: "<app>: error: <message>" on stderr and exit code 2 for usage
// errors, 1 for every other failure.
#pragma once

namespace timm {

using AppBody = int (*)(int argc, char** argv);

int run_app(const char* app, int argc, char** argv, AppBody body);

}  // namespace timm
